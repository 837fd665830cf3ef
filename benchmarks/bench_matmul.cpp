// Matmul speed on the cpu backend, everything measured in one run (the machine is shared and
// noisy, so each number is the fastest of several rounds, and rounds interleave the candidates):
//  1. the machine's peak: a register-blocked FMA loop (12 independent vector accumulators, the
//     widest vectors the CPU has) on 1 thread and on every core, float32 and float64, and the
//     clock it ran at (a chain of dependent imuls, 3 cycles each), so peak / clock shows the
//     FMA pipes x vector lanes x 2 that the core really has;
//  2. GEMM GFLOP/s of each library Kiln can call (OpenBLAS gemm, OpenBLAS gemv for matrix-vector
//     shapes, oneDNN for float32 and the half types), through the backend's own matmul_with()
//     (tiles over TBB), on square, skinny, small, batched and matrix-vector shapes (some with an
//     operand stored transposed, as x @ W.T and dW = dy.T @ x read them), as a fraction
//     of the measured peak; the library Kiln picks (measured per shape class, matmul_classes.h)
//     is marked with its time over the fastest library's, and a summary line counts the shapes
//     where it is within 10%; plus the old way, one OpenBLAS call on OpenBLAS's own threads;
//  3. the MLP block gelu(x @ W1 + b1) @ W2 + b2 (256x1024 -> 4096 -> 1024, float32) compiled
//     with kiln::compile: ms, GFLOP/s, where the time goes (profiled tasks), and JAX jit of the
//     same function in a child process, alternating with Kiln round by round, when a Python
//     with jax exists (~/peers/bin/python or --python PATH; benchmarks/peers/mlp_jax.py). JAX
//     is never needed to build or run this; Kiln's numbers print either way.
//   build/benchmarks/bench_matmul [--rounds N] [--python PATH] [--no-peers] [--mlp-only]
#include <cblas.h>
#include <sys/wait.h>
#include <tbb/info.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_classes.h"
#include "backends/extension.h"
#include "jax_peer.h"
#include "kiln.h"
#include "tools/bench/fma_peak.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;
using cpu::MatmulLibrary;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- 1. peak -----------------------------------------------------------------------------------

// The peak loop and the clock are tools/bench/fma_peak.h's, the routine `kiln bench` measures its
// compute bound with: the two reports agree on what the machine can do.
using bench::clock_ghz;
using bench::fma_gflops;
using bench::fma_kernel;

struct Peak {
  double ghz = 0;
  std::map<std::string, double> gflops;  // "f32 1t", "f64 2t", ...
};

Peak measure_peak(int threads) {
  Peak p;
  p.ghz = clock_ghz();
  std::printf("\n== 1. peak (register-blocked FMA loop, %s; clock from dependent imuls)\n",
              fma_kernel(false).isa);
  for (bool f64 : {false, true}) {
    for (int t : {1, threads}) {
      double g = fma_gflops(f64, t);
      std::string key = std::string(f64 ? "f64 " : "f32 ") + std::to_string(t) + "t";
      p.gflops[key] = g;
      std::printf("%s peak %3d thread%s: %7.1f GFLOP/s  (%5.1f flop/cycle/core at %.2f GHz)\n",
                  f64 ? "float64" : "float32", t, t == 1 ? " " : "s", g, g / t / p.ghz, p.ghz);
      if (t == threads) break;
    }
  }
  return p;
}

// ---- 2. GEMM per library -------------------------------------------------------------------

struct Gemm {
  Dtype dtype;
  int64_t m, k, n;
  const char* cls;
  int64_t batches = 1;
  bool ta = false, tb = false;  // A or B stored transposed, read in place (MatmulArgs)
};

const Gemm kGemms[] = {
    {float32, 1024, 1024, 1024, "square"},
    {float32, 2048, 2048, 2048, "square"},
    {float32, 256, 1024, 4096, "skinny"},
    {float32, 256, 4096, 1024, "skinny"},
    {float32, 4096, 64, 4096, "skinny"},
    {float32, 1, 4096, 4096, "vector"},
    {float32, 4096, 4096, 1, "vector"},
    {float32, 32, 32, 32, "small"},
    {float32, 64, 64, 64, "small"},
    {float32, 96, 96, 96, "small"},
    {float32, 128, 128, 128, "small"},
    {float32, 256, 256, 256, "small"},
    {float64, 1024, 1024, 1024, "square"},
    {float64, 2048, 2048, 2048, "square"},
    {float64, 256, 1024, 4096, "skinny"},
    {float64, 256, 4096, 1024, "skinny"},
    {float64, 4096, 64, 4096, "skinny"},
    {float64, 1, 4096, 4096, "vector"},
    {float64, 4096, 4096, 1, "vector"},
    {float32, 64, 64, 64, "batched", 64},
    {float32, 128, 128, 128, "batched", 16},
    {float64, 64, 64, 64, "batched", 64},
    {float16, 256, 1024, 1024, "skinny"},
    {kiln::bfloat16, 256, 1024, 1024, "skinny"},
    {float16, 1024, 1024, 1024, "square"},
    // The training step's products with MLX's (out, in) weights: x @ W.T forward, dW = dy.T @ x
    // backward (and the backward's shapes as stored, for comparison); whether the class's
    // choice, measured on untransposed operands, still holds when an operand is transposed.
    {float32, 256, 1024, 4096, "skinny", 1, false, true},
    {float32, 256, 4096, 1024, "skinny", 1, false, true},
    {float32, 1024, 256, 4096, "skinny"},
    {float32, 1024, 256, 4096, "skinny", 1, true, false},
    {float32, 4096, 256, 1024, "skinny"},
    {float32, 4096, 256, 1024, "skinny", 1, true, false},
    {float32, 1024, 1024, 1024, "square", 1, true, true},
    {float32, 1, 4096, 4096, "vector", 1, false, true},
    {float32, 4096, 4096, 1, "vector", 1, true, false},
    {float64, 256, 1024, 4096, "skinny", 1, false, true},
    {float64, 1024, 256, 4096, "skinny", 1, true, false},
};

struct GemmRun {
  const Gemm* g;
  MatmulLibrary lib;
  MatmulArgs args;
  bool own_threads = false;  // the baseline: one OpenBLAS call on OpenBLAS's own threads
  double best = 1e30;
};

// What Kiln did before tiling: one cblas call, OpenBLAS splitting it over its own threads.
void openblas_own_threads(const MatmulArgs& a) {
  int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
  if (a.dtype == float32)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f,
                static_cast<const float*>(a.a->host_ptr()), k,
                static_cast<const float*>(a.b->host_ptr()), n, 0.0f,
                static_cast<float*>(a.c->host_ptr()), n);
  else
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0,
                static_cast<const double*>(a.a->host_ptr()), k,
                static_cast<const double*>(a.b->host_ptr()), n, 0.0,
                static_cast<double*>(a.c->host_ptr()), n);
}

std::shared_ptr<Buffer> filled_buffer(Dtype d, int64_t n, double value) {
  auto b = backend_for(device("cpu")).allocate(0, n * d.size());
  if (d.is_half()) {  // the 16-bit pattern of 0.0156 in each (the speed does not depend on it)
    std::vector<uint16_t> v(n, value == 0 ? 0 : d == float16 ? 0x2400 : 0x3c80);
    b->write(v.data(), 0, n * 2);
  } else if (d == float32) {
    std::vector<float> v(n, static_cast<float>(value));
    b->write(v.data(), 0, n * 4);
  } else {
    std::vector<double> v(n, value);
    b->write(v.data(), 0, n * 8);
  }
  return b;
}

// Every library on every shape, interleaved round by round; fastest round of each.
std::vector<GemmRun> measure_gemms(int threads, int rounds,
                                   std::vector<std::shared_ptr<Buffer>>& keep) {
  std::vector<GemmRun> runs;
  for (const Gemm& g : kGemms) {
    MatmulArgs a;
    a.dtype = g.dtype;
    a.m = g.m;
    a.k = g.k;
    a.n = g.n;
    a.trans_a = g.ta;
    a.trans_b = g.tb;
    for (int64_t b = 0; b < g.batches; ++b) {
      a.a_offsets.push_back(b * g.m * g.k);
      a.b_offsets.push_back(b * g.k * g.n);
      a.c_offsets.push_back(b * g.m * g.n);
    }
    keep.push_back(filled_buffer(g.dtype, g.batches * g.m * g.k, 0.01));
    a.a = keep.back().get();
    keep.push_back(filled_buffer(g.dtype, g.batches * g.k * g.n, 0.02));
    a.b = keep.back().get();
    keep.push_back(filled_buffer(g.dtype, g.batches * g.m * g.n, 0));
    a.c = keep.back().get();
    // Every library the tuner weighs for this shape's class.
    std::vector<MatmulLibrary> libs =
        cpu::matmul_candidates(cpu::matmul_class(a, cpu::threads_allowed()));
    // The baseline: one OpenBLAS call on its own threads (plain float32/float64 products).
    if (g.batches == 1 && !g.dtype.is_half() && !g.ta && !g.tb)
      runs.push_back(GemmRun{&g, MatmulLibrary::OpenBlasGemm, a, true});
    for (MatmulLibrary lib : libs) {
      cpu::matmul_with(lib, a);  // warm: oneDNN creates its primitives
      runs.push_back(GemmRun{&g, lib, a});
    }
  }
  for (int r = 0; r < rounds; ++r)
    for (GemmRun& run : runs) {
      // Small products are repeated so that one timing spans ~0.1 ms or more.
      const MatmulArgs& a = run.args;
      double flops = 2.0 * a.m * a.n * a.k * a.c_offsets.size();
      int reps = static_cast<int>(std::clamp(1e8 / flops, 1.0, 1000.0));
      // Kiln keeps OpenBLAS single-threaded; the baseline gets its threads back for its call.
      if (run.own_threads) openblas_set_num_threads(threads);
      auto t0 = Clock::now();
      for (int i = 0; i < reps; ++i) {
        if (run.own_threads)
          openblas_own_threads(a);
        else
          cpu::matmul_with(run.lib, a);
      }
      run.best = std::min(run.best, seconds_since(t0) / reps);
      if (run.own_threads) openblas_set_num_threads(1);
    }
  return runs;
}

const char* dtype_name(Dtype d) {
  return d == float64          ? "float64"
         : d == float16        ? "float16"
         : d == kiln::bfloat16 ? "bfloat16"
                               : "float32";
}

void print_gemms(const std::vector<GemmRun>& runs, const Peak& peak, int threads, int rounds) {
  // The library Kiln picks for each shape (measured now if no table has its class yet), and the
  // fastest library in this run.
  std::map<const Gemm*, MatmulLibrary> picked;
  std::map<const Gemm*, double> fastest;
  for (const GemmRun& run : runs) {
    if (run.own_threads) continue;
    picked.emplace(run.g, cpu::choose_matmul_library(run.args));
    auto [it, fresh] = fastest.emplace(run.g, run.best);
    if (!fresh) it->second = std::min(it->second, run.best);
  }
  std::printf(
      "\n== 2. GEMM C = A @ B (m x k @ k x n), fastest of %d rounds, %d threads; "
      "%% of peak = %d x the faster 1-thread FMA rate (float32 %.0f, float64 %.0f GFLOP/s);\n"
      "* = the library Kiln picks (measured per shape class, table %s), x best = its time over the "
      "fastest library's in this run\n",
      rounds, threads, threads, threads * peak.gflops.at("f32 1t"),
      threads * peak.gflops.at("f64 1t"), cpu::matmul_tuner().path().c_str());
  std::printf("%-8s %-7s %-27s %-23s %10s %9s %7s %7s\n", "dtype", "class", "[b x] m x k x n",
              "library", "ms", "GFLOP/s", "%peak", "x best");
  int within = 0, shapes = 0;
  double worst = 1;
  for (const GemmRun& run : runs) {
    const Gemm& g = *run.g;
    double flops = 2.0 * g.m * g.n * g.k * g.batches;
    double gf = flops / run.best / 1e9;
    // Peak of `threads` cores: one core's FMA rate times the cores. The all-core loop is printed
    // too, but it undercounts whenever another tenant holds a core. Half types run as float32.
    double core_peak = peak.gflops.at(g.dtype == float64 ? "f64 1t" : "f32 1t");
    char shape[64];
    std::snprintf(shape, sizeof shape, "%s%lldx%lldx%lld%s%s",
                  g.batches > 1 ? (std::to_string(g.batches) + " x ").c_str() : "",
                  static_cast<long long>(g.m), static_cast<long long>(g.k),
                  static_cast<long long>(g.n), g.ta ? " A^T" : "", g.tb ? " B^T" : "");
    bool is_pick = !run.own_threads && picked.at(run.g) == run.lib;
    char ratio[16] = "";
    if (is_pick) {
      double r = run.best / fastest.at(run.g);
      std::snprintf(ratio, sizeof ratio, "%.2fx", r);
      ++shapes;
      within += r <= 1.10;
      worst = std::max(worst, r);
    }
    std::printf("%-8s %-7s %-27s %-22s%s %10.3f %9.1f %6.1f%% %7s\n", dtype_name(g.dtype), g.cls,
                shape, run.own_threads ? "OpenBLAS own threads" : cpu::library_name(run.lib),
                is_pick ? "*" : " ", run.best * 1e3, gf, 100 * gf / (threads * core_peak), ratio);
  }
  std::printf(
      "Kiln's pick within 10%% of the fastest library: %d of %d shapes (worst %.2fx; goal: all)\n",
      within, shapes, worst);
  std::printf("time spent measuring classes in this process: %.1f ms\n",
              cpu::matmul_tuner().seconds_measuring() * 1e3);
}

// ---- 3. the MLP block ------------------------------------------------------------------------

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

constexpr double kMlpFlops = 2.0 * 2 * 256 * 1024 * 4096;  // two GEMMs; the rest is ~0.1%

// Wall time decides; CPU time (summed over threads) tells, on a shared machine, how much of it
// each side took: the scheduler shares cores per thread, so a runtime with more busy threads
// gets more of a loaded machine.

struct Mlp {
  CompiledFunction f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{matmul(gelu(matmul(in[0], in[1]) + in[2]), in[3]) + in[4]};
  });
  std::vector<Array> args;

  Mlp() {
    StreamScope scope(device("cpu"));
    args = {random::normal({256, 1024}, float32, random::key(1)),
            random::normal({1024, 4096}, float32, random::key(2)) * 0.03f,
            random::normal({4096}, float32, random::key(3)),
            random::normal({4096, 1024}, float32, random::key(4)) * 0.015f,
            random::normal({1024}, float32, random::key(5))};
    eval(args);
    eval(f(args));  // trace, lower, JIT outside the timing
  }

  // Fastest of `reps` calls and the process CPU time per call (all threads), in seconds.
  Timing best_of(int reps) {
    StreamScope scope(device("cpu"));
    Timing t;
    double cpu0 = process_cpu_seconds();
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      eval(f(args));
      t.wall = std::min(t.wall, seconds_since(t0));
    }
    t.cpu = (process_cpu_seconds() - cpu0) / reps;
    return t;
  }

  // Mean ms per call of each task name, over `reps` profiled calls.
  void breakdown(int reps) {
    StreamScope scope(device("cpu"));
    ProfileScope prof;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) eval(f(args));
    double wall = seconds_since(t0) / reps;
    std::map<std::string, std::pair<double, int>> by_name;
    for (const TaskEvent& e : prof.events()) {
      auto& [ms, count] = by_name[e.name];
      ms += (e.end_ns - e.start_ns) / 1e6 / reps;
      count += 1;
    }
    double tasks = 0;
    std::printf("where the time goes (mean of %d profiled calls, %.2f ms each):\n", reps,
                wall * 1e3);
    for (auto& [name, v] : by_name) {
      std::printf("  %-34s %2d per call  %8.3f ms\n", name.c_str(), v.second / reps, v.first);
      tasks += v.first;
    }
    std::printf("  %-34s              %8.3f ms\n", "outside tasks (dispatch, eval)",
                wall * 1e3 - tasks);
  }
};

void mlp_section(const std::string& python, int rounds) {
  std::printf(
      "\n== 3. MLP gelu(x@W1+b1)@W2+b2, x 256x1024, W1 1024x4096, W2 4096x1024, "
      "float32 (%.2f GFLOP per call)\n",
      kMlpFlops / 1e9);
  Mlp mlp;
  std::unique_ptr<JaxPeer> jax;
  if (!python.empty()) {
    jax = std::make_unique<JaxPeer>(python,
                                    std::string(KILN_SOURCE_DIR) + "/benchmarks/peers/mlp_jax.py");
    if (jax->ok())
      std::printf("JAX %s jit (%s), alternating with Kiln, %d rounds of 10 calls each\n",
                  jax->version().c_str(), python.c_str(), 4 * rounds);
    else
      std::printf("JAX: could not run %s (%s)\n", python.c_str(), jax->last_line().c_str());
  }
  Timing kiln, peer;
  for (int r = 0; r < 4 * rounds; ++r) {
    Timing k = mlp.best_of(10);
    kiln = {std::min(kiln.wall, k.wall), std::min(kiln.cpu, k.cpu)};
    if (jax && jax->ok()) {
      Timing j = jax->best_of(10);
      if (j.wall > 0) peer = {std::min(peer.wall, j.wall), std::min(peer.cpu, j.cpu)};
    }
  }
  std::printf("kiln::compile  %8.3f ms  %7.1f GFLOP/s   CPU %7.3f ms per call\n", kiln.wall * 1e3,
              kMlpFlops / kiln.wall / 1e9, kiln.cpu * 1e3);
  if (peer.wall < 1e30)
    std::printf(
        "JAX jit        %8.3f ms  %7.1f GFLOP/s   CPU %7.3f ms per call   Kiln / JAX = %.2fx "
        "(goal <= 1.0)\n",
        peer.wall * 1e3, kMlpFlops / peer.wall / 1e9, peer.cpu * 1e3, kiln.wall / peer.wall);
  else if (python.empty())
    std::printf("JAX jit        not measured (no ~/peers/bin/python; pass --python PATH)\n");
  jax.reset();
  mlp.breakdown(rounds * 4);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::string python;
  bool peers = true, mlp_only = false;
  if (const char* home = std::getenv("HOME")) {
    std::string p = std::string(home) + "/peers/bin/python";
    if (std::filesystem::exists(p)) python = p;
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--python" && i + 1 < argc) {
      python = argv[++i];
    } else if (a == "--no-peers") {
      peers = false;
    } else if (a == "--mlp-only") {
      mlp_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--rounds N] [--python PATH] [--no-peers] [--mlp-only]\n",
                   argv[0]);
      return 2;
    }
  }
  if (!peers) python.clear();
  std::signal(SIGPIPE, SIG_IGN);  // a peer that dies must not take this program with it
  int threads = tbb::info::default_concurrency();
  for (const DeviceInfo& d : devices())
    if (d.device.backend == "cpu") std::printf("cpu: %s\n", d.description.c_str());
  if (mlp_only) {
    mlp_section(python, rounds);
    return 0;
  }
  // The peak before and after everything else: the two differ when the machine's other tenants
  // came or went; percentages use the higher (the cores' real capability).
  Peak peak = measure_peak(threads);
  std::vector<std::shared_ptr<Buffer>> buffers;
  std::vector<GemmRun> gemms = measure_gemms(threads, rounds, buffers);
  mlp_section(python, rounds);
  Peak after = measure_peak(threads);
  for (auto& [key, g] : after.gflops) peak.gflops[key] = std::max(peak.gflops[key], g);
  print_gemms(gemms, peak, threads, rounds);
  return 0;
}
