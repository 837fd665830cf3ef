// The cpu backend's speed, as ratios taken in one run: a hand-built fused gelu Kernel
// x * (1 + erf(x / sqrt(2))) / 2 on float32 (1k, 1M and 131,072,000 = 32x1000x4096 elements)
// against a hand-written fused C++ loop (same vectorisable erf algorithm, same TBB chunking and
// thread count) and against a STREAM-style copy (the memory-bandwidth floor: gelu moves the
// same bytes as a copy); 1 and 2 threads; and kernel compile latency, cold and from the disk
// cache; the same gelu on float16 and bfloat16 (computed in float32, rounded at every op) against
// the float32 kernel. Run: build/benchmarks/bench_cpu_kernels (prints a ratio summary at the end).
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>

#include "backends/cpu/buffer_pool.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/jit.h"
#include "backends/extension.h"
#include "graph/float16.h"
#include "kiln.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

constexpr int64_t kBig = int64_t{32} * 1000 * 4096;

// Best (minimum) seconds per iteration of each named run, for the ratio summary.
std::map<std::string, double> g_best;

void record(const std::string& name, double seconds) {
  auto it = g_best.find(name);
  if (it == g_best.end() || seconds < it->second) g_best[name] = seconds;
}

// Times the benchmark loop body; keeps the fastest iteration.
template <typename F>
void timed_loop(benchmark::State& state, const std::string& name, F&& body) {
  for (auto _ : state) {
    auto t0 = Clock::now();
    body();
    record(name, std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

// ---- the gelu kernel ------------------------------------------------------------------------

Kernel gelu_kernel(int64_t n, Dtype d = float32) {
  Kernel k;
  k.name = "fused_gelu";
  if (n == kBig)
    k.domain = {Dim::constant(32), Dim::constant(1000), Dim::constant(4096)};
  else
    k.domain = {Dim::constant(n)};
  IndexMap m;
  int64_t s = 1;
  for (int i = k.ndim() - 1; i >= 0; --i) {
    m.strides.insert(m.strides.begin(), Dim::constant(s));
    s *= k.domain[i].value;
  }
  m.offset = Dim::constant(0);
  auto add = [&](Value v) {
    k.body.push_back(v);
    return static_cast<int>(k.body.size()) - 1;
  };
  auto cst = [&](float f) {
    Value v;
    v.kind = ValueKind::Constant, v.dtype = d, v.constant = Scalar::of(f).cast(d);
    return add(v);
  };
  auto bin = [&](BinaryOp op, int a, int b) {
    Value v;
    v.kind = ValueKind::Binary, v.binary = op, v.dtype = d, v.a = a, v.b = b;
    return add(v);
  };
  k.buffers.push_back({d, false, m});
  Value x;
  x.kind = ValueKind::Load, x.dtype = d, x.buffer = 0;
  int xv = add(x);
  Value e;
  e.kind = ValueKind::Unary, e.unary = UnaryOp::Erf, e.dtype = d;
  e.a = bin(BinaryOp::Divide, xv, cst(static_cast<float>(std::sqrt(2.0))));
  int ev = add(e);
  int r =
      bin(BinaryOp::Divide, bin(BinaryOp::Multiply, xv, bin(BinaryOp::Add, cst(1), ev)), cst(2));
  k.buffers.push_back({d, true, m});
  k.stores.push_back({1, r});
  return k;
}

// ---- the hand-written baseline --------------------------------------------------------------

// The same erf algorithm as the JIT's (vector_math.cpp), written as branch-free C++ so g++
// vectorises it: the fair "best hand-written fused loop" baseline.
inline float poly(float x, std::initializer_list<float> c) {
  float acc = 0;
  for (float v : c) acc = acc * x + v;
  return acc;
}

inline float hand_erf(float x) {
  float xc = x > 4.f ? 4.f : (x < -4.f ? -4.f : x);
  float z = xc * xc;
  float p = poly(z, {2.0015095640223045e-6f, 0.00028283157593563815f, 0.0038033077684824308f,
                     0.052852256547350698f, 0.19167024685191649f, 1.1283791590578851f});
  float q = poly(z, {3.7483294648092395e-5f, 0.0011663487838495679f, 0.015045922524155666f,
                     0.11457382724376274f, 0.50319622937315642f, 1.0f});
  return xc * (p / q);
}

// One chunk of the hand loop; __restrict so g++ needs no alias checks.
void hand_gelu_range(const float* __restrict x, float* __restrict y, int64_t b, int64_t e) {
  const float inv = 1.41421356f;
  for (int64_t i = b; i < e; ++i) y[i] = x[i] * (1.f + hand_erf(x[i] / inv)) / 2.f;
}

void hand_gelu(const float* x, float* y, int64_t n) {
  if (n < (1 << 16)) return hand_gelu_range(x, y, 0, n);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n, 1 << 14),
      [&](const tbb::blocked_range<int64_t>& r) { hand_gelu_range(x, y, r.begin(), r.end()); });
}

#ifdef __AVX512F__
// A second baseline independent of Kiln's erf: AVX-512 intrinsics around glibc's libmvec
// vector erff (the function g++ -ffast-math -fopenmp-simd calls for std::erf in a loop).
extern "C" __m512 _ZGVeN16v_erff(__m512);

void libmvec_gelu_range(const float* __restrict x, float* __restrict y, int64_t b, int64_t e) {
  const __m512 inv = _mm512_set1_ps(0.70710678f), one = _mm512_set1_ps(1.f),
               half = _mm512_set1_ps(0.5f);
  int64_t i = b;
  for (; i + 16 <= e; i += 16) {
    __m512 v = _mm512_loadu_ps(x + i);
    __m512 r = _ZGVeN16v_erff(_mm512_mul_ps(v, inv));
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(v, _mm512_add_ps(one, r)), half));
  }
  for (; i < e; ++i) y[i] = x[i] * (1.f + std::erf(x[i] * 0.70710678f)) * 0.5f;
}

void libmvec_gelu(const float* x, float* y, int64_t n) {
  if (n < (1 << 16)) return libmvec_gelu_range(x, y, 0, n);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n, 1 << 14),
      [&](const tbb::blocked_range<int64_t>& r) { libmvec_gelu_range(x, y, r.begin(), r.end()); });
}
#endif

#ifdef __AVX512F__
// The copy with non-temporal stores: no read-for-ownership of the destination, the best a
// streaming kernel can do on this machine (Kiln's kernels use ordinary stores).
void stream_copy_nt(const float* x, float* y, int64_t n) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 16),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      int64_t i = r.begin();
                      for (; i < r.end() && (reinterpret_cast<uintptr_t>(y + i) & 63); ++i)
                        y[i] = x[i];
                      for (; i + 16 <= r.end(); i += 16)
                        _mm512_stream_ps(y + i, _mm512_loadu_ps(x + i));
                      for (; i < r.end(); ++i) y[i] = x[i];
                    });
  _mm_sfence();
}
#endif

void stream_copy(const float* x, float* y, int64_t n) {
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 16),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      std::memcpy(y + r.begin(), x + r.begin(), (r.end() - r.begin()) * 4);
                    });
}

// ---- shared data ----------------------------------------------------------------------------

struct Data {
  std::shared_ptr<Buffer> in, out;
  int64_t n;
};

Data& data(int64_t n) {
  static std::map<int64_t, Data> all;
  auto it = all.find(n);
  if (it != all.end()) return it->second;
  Backend& be = backend_for(device("cpu"));
  Data d{be.allocate(0, n * 4), be.allocate(0, n * 4), n};
  auto* x = static_cast<float*>(d.in->host_ptr());
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i % 2001) - 1000) / 250.f;
  std::memset(d.out->host_ptr(), 0, n * 4);  // touch: no first-use page faults in timings
  return all.emplace(n, d).first->second;
}

std::string label(const char* what, int64_t n, int threads) {
  return std::string(what) + "/" + std::to_string(n) + "/threads:" + std::to_string(threads);
}

// A hand-written loop over the shared input and output, on `threads` threads.
template <void (*Loop)(const float*, float*, int64_t)>
void host_loop(benchmark::State& state, const char* name) {
  int64_t n = state.range(0);
  int threads = static_cast<int>(state.range(1));
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
  Data& d = data(n);
  auto* x = static_cast<const float*>(d.in->host_ptr());
  auto* y = static_cast<float*>(d.out->host_ptr());
  timed_loop(state, label(name, n, threads), [&] { Loop(x, y, n); });
  state.SetBytesProcessed(state.iterations() * n * 8);
}

// Every size on 1 and 2 threads.
void all_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t n : {kBig, int64_t{1} << 20, int64_t{1000}})
    for (int t : {1, 2}) b->Args({n, t});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}
void big_only(benchmark::internal::Benchmark* b) {
  b->Args({kBig, 1})->Args({kBig, 2})->UseRealTime()->Unit(benchmark::kMillisecond);
}

void BM_GeluJit(benchmark::State& state) {
  int64_t n = state.range(0);
  int threads = static_cast<int>(state.range(1));
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
  Data& d = data(n);
  Backend& be = backend_for(device("cpu"));
  auto ck = be.compile(0, gelu_kernel(n));
  auto q = be.create_queue(0);
  KernelArgs args{{d.in.get(), d.out.get()}, {}};
  timed_loop(state, label("gelu_jit", n, threads), [&] { q->enqueue_kernel(*ck, args); });
  state.SetBytesProcessed(state.iterations() * n * 8);
}

// The big gelu on a 16-bit float dtype (range(0): 0 float16, 1 bfloat16), 1 and 2 threads.
void BM_GeluJitHalf(benchmark::State& state) {
  Dtype dt = state.range(0) == 0 ? float16 : bfloat16;
  int threads = static_cast<int>(state.range(1));
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism, threads);
  static std::map<int64_t, std::pair<std::shared_ptr<Buffer>, std::shared_ptr<Buffer>>> bufs;
  Backend& be = backend_for(device("cpu"));
  auto& [in, out] = bufs[state.range(0)];
  if (!in) {
    in = be.allocate(0, kBig * 2), out = be.allocate(0, kBig * 2);
    auto* x = static_cast<const float*>(data(kBig).in->host_ptr());
    auto* h = static_cast<uint16_t*>(in->host_ptr());
    for (int64_t i = 0; i < kBig; ++i)
      h[i] = dt == float16 ? float_to_half_bits(x[i]) : float_to_bfloat16_bits(x[i]);
    std::memset(out->host_ptr(), 0, kBig * 2);
  }
  auto ck = be.compile(0, gelu_kernel(kBig, dt));
  auto q = be.create_queue(0);
  KernelArgs args{{in.get(), out.get()}, {}};
  timed_loop(state, label(("gelu_jit_" + dt.name()).c_str(), kBig, threads),
             [&] { q->enqueue_kernel(*ck, args); });
  state.SetBytesProcessed(state.iterations() * kBig * 4);
}

void BM_GeluHand(benchmark::State& state) { host_loop<hand_gelu>(state, "gelu_hand"); }

#ifdef __AVX512F__
void BM_GeluLibmvec(benchmark::State& state) { host_loop<libmvec_gelu>(state, "gelu_libmvec"); }
BENCHMARK(BM_GeluLibmvec)->Apply(all_sizes);
#endif

void BM_StreamCopy(benchmark::State& state) { host_loop<stream_copy>(state, "copy"); }

// The same gelu through the public ops, eagerly: five kernels, one per op, each with a fresh
// 524 MB temporary from the buffer pool (the pool is what keeps this from page-faulting).
void BM_GeluEager(benchmark::State& state) {
  StreamScope scope(device("cpu"));
  Array x = random::normal({32, 1000, 4096}, float32, random::key(1));
  eval(x);
  Array inv = full({}, std::sqrt(2.0), float32), one = ones({}, float32),
        half = full({}, 0.5, float32);
  timed_loop(state, "gelu_eager", [&] {
    Array y = multiply(multiply(x, add(one, erf(divide(x, inv)))), half);
    eval(y);
  });
  state.SetBytesProcessed(state.iterations() * kBig * 8);
}

// A full reduction (no kept axes) of the 131M floats, split into 16 parallel partials
// (split_reduce.h); it reads half the bytes a copy moves. Both threads.
void BM_FullReduce(benchmark::State& state) {
  auto op = static_cast<ReduceOp>(state.range(0));
  Data& d = data(kBig);
  Kernel k;
  k.name = "full_reduce";
  k.domain = {Dim::constant(kBig)};
  k.buffers.push_back({float32, false, {{Dim::constant(1)}, Dim::constant(0)}});
  Value x;
  x.kind = ValueKind::Load, x.dtype = float32, x.buffer = 0;
  k.body.push_back(x);
  Value r;
  r.kind = ValueKind::Reduce, r.dtype = float32, r.a = 0;
  k.body.push_back(r);
  k.reduce = Reduction{op, 1, 1};
  k.buffers.push_back({float32, true, {{Dim::constant(0)}, Dim::constant(0)}});
  k.stores.push_back({1, 1});
  Backend& be = backend_for(device("cpu"));
  auto ck = be.compile(0, k);
  auto q = be.create_queue(0);
  KernelArgs args{{d.in.get(), d.out.get()}, {}};
  timed_loop(state, std::string("full_") + op_name(op), [&] { q->enqueue_kernel(*ck, args); });
  state.SetBytesProcessed(state.iterations() * kBig * 4);
}

// Compile latency: each iteration compiles a kernel new to the process (a different constant).
// cold = LLVM optimises and emits it; warm = the same kernel found in the disk cache after the
// in-memory cache was dropped (what a second process pays).
void BM_CompileLatency(benchmark::State& state) {
  bool warm = state.range(0) == 1;
  static int serial = 0;
  Backend& be = backend_for(device("cpu"));
  for (auto _ : state) {
    state.PauseTiming();
    Kernel k = gelu_kernel(1000);
    k.body[1].constant = Scalar::of(1.4142f + static_cast<float>(++serial) * 1e-4f);
    if (warm) {
      be.compile(0, k);
      cpu::Jit::instance().flush_disk_cache();  // a load from the file, not the write queue
      cpu::Jit::instance().clear_memory_cache();
    }
    state.ResumeTiming();
    auto t0 = Clock::now();
    be.compile(0, k);
    record(warm ? "compile_warm_disk" : "compile_cold",
           std::chrono::duration<double>(Clock::now() - t0).count());
  }
}

#ifdef __AVX512F__
void BM_StreamCopyNT(benchmark::State& state) { host_loop<stream_copy_nt>(state, "copy_nt"); }
BENCHMARK(BM_StreamCopyNT)->Apply(big_only);
#endif

BENCHMARK(BM_StreamCopy)->Apply(big_only);
BENCHMARK(BM_GeluHand)->Apply(all_sizes);
BENCHMARK(BM_GeluJit)->Apply(all_sizes);
BENCHMARK(BM_GeluJitHalf)
    ->Args({0, 1})
    ->Args({0, 2})
    ->Args({1, 1})
    ->Args({1, 2})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GeluEager)->Iterations(5)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FullReduce)
    ->Arg(static_cast<int>(ReduceOp::Sum))
    ->Arg(static_cast<int>(ReduceOp::Max))
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CompileLatency)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The first kernel of the process, including the LLJIT's creation: run the program twice on
// the same KILN_CACHE_DIR to see it cold and then warm from disk.
void first_compile_in_process() {
  Backend& be = backend_for(device("cpu"));
  cpu::JitStats before = cpu::Jit::instance().stats();
  auto t0 = Clock::now();
  be.compile(0, gelu_kernel(kBig));
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  cpu::JitStats after = cpu::Jit::instance().stats();
  std::printf("first compile in this process (incl. LLJIT creation): %.2f ms (%s)\n", ms,
              after.disk_hits > before.disk_hits ? "loaded from the disk cache" : "LLVM compiled");
}

void summary() {
  auto ms = [](const std::string& k) { return g_best.count(k) ? g_best[k] * 1e3 : NAN; };
  std::printf("\n== summary (best iteration of each run, this process)\n");
  for (int t : {1, 2}) {
    for (int64_t n : {kBig, int64_t{1} << 20, int64_t{1000}}) {
      double jit = ms(label("gelu_jit", n, t)), hand = ms(label("gelu_hand", n, t));
      double mvec = ms(label("gelu_libmvec", n, t));
      std::printf(
          "gelu n=%-10lld threads=%d: jit %9.4f ms, hand loop %9.4f ms (jit/hand %.2f), "
          "libmvec loop %9.4f ms (jit/libmvec %.2f)",
          static_cast<long long>(n), t, jit, hand, jit / hand, mvec, jit / mvec);
      if (n == kBig) {
        double copy = ms(label("copy", n, t));
        double gbs = n * 8 / (copy * 1e-3) / 1e9;
        double nt = ms(label("copy_nt", n, t));
        std::printf(
            "\n    copy %.2f ms (%.1f GB/s): jit at %.0f%% of it; non-temporal copy %.2f ms "
            "(%.1f GB/s): jit at %.0f%% of it",
            copy, gbs, 100 * copy / jit, nt, n * 8 / (nt * 1e-3) / 1e9, 100 * nt / jit);
      }
      std::printf("\n");
    }
  }
  for (int t : {1, 2})
    for (const char* h : {"float16", "bfloat16"}) {
      double jit = ms(label("gelu_jit", kBig, t));
      double half = ms(label((std::string("gelu_jit_") + h).c_str(), kBig, t));
      std::printf("gelu %s n=%lld threads=%d: %.2f ms, %.2fx the float32 jit (half the bytes)\n", h,
                  static_cast<long long>(kBig), t, half, half / jit);
    }
  std::printf("eager (unfused, 5 kernels) gelu n=%lld threads=2: %.2f ms, %.2fx the fused jit\n",
              static_cast<long long>(kBig), ms("gelu_eager"),
              ms("gelu_eager") / ms(label("gelu_jit", kBig, 2)));
  cpu::PoolStats pool = cpu::BufferPool::instance()->stats();
  std::printf("buffer pool: %lld allocations reused a block, %lld were fresh\n",
              static_cast<long long>(pool.reused), static_cast<long long>(pool.fresh));
  for (const char* r : {"full_sum", "full_max"})
    std::printf("%s of %lld floats (2 threads): %.2f ms, %.1f GB/s read\n", r,
                static_cast<long long>(kBig), ms(r), kBig * 4 / (ms(r) * 1e-3) / 1e9);
  std::printf("compile latency: cold %.2f ms, warm from disk %.2f ms\n", ms("compile_cold"),
              ms("compile_warm_disk"));
  cpu::JitStats js = cpu::Jit::instance().stats();
  double n = static_cast<double>(std::max<int64_t>(js.compiled, 1));
  std::printf(
      "where a cold compile goes (mean of %lld LLVM compiles, wall ms): Kernel IR -> LLVM IR "
      "%.2f, O3 pipeline %.2f, isel+regalloc+object emission %.2f; per load (%lld): ORC link "
      "%.2f, disk cache read %.2f\n",
      static_cast<long long>(js.compiled), js.codegen_ms / n, js.optimize_ms / n, js.emit_ms / n,
      static_cast<long long>(js.compiled + js.disk_hits),
      js.link_ms / static_cast<double>(std::max<int64_t>(js.compiled + js.disk_hits, 1)),
      js.disk_ms / static_cast<double>(std::max<int64_t>(js.compiled + js.disk_hits, 1)));
}

}  // namespace

int main(int argc, char** argv) {
  first_compile_in_process();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  summary();
  return 0;
}
