// Row reductions on cpu (issue 20 item 3): softmax, log_softmax, layer_norm and rms_norm over
// the last axis of float32 arrays, each printed in one run beside
//   compiled  the row kernel walked row by row (kernel_ir.h invariant 6, backends/cpu/row_walk.h)
//   passes    the same compiled function with the walk off (KILN_ROW_WALK_BYTES=0): its passes
//             as separate kernels, the path before row kernels and the one long rows take
//   eager     one kernel per op
//   JAX jit   benchmarks/peers/rows_jax.py, alternating with Kiln round by round
//   copy      one copy of the array's bytes (the faster of one memcpy and every thread copying)
// Goals: compiled <= eager everywhere; softmax <= 1.0x JAX on 1024x1024 and <= 1.5x the copy
// on 32x1000x4096. Then a sweep of softmax row lengths (2^24 floats in all, down to one row)
// timing the walk against the passes: where a line between them would go
// (backends/cpu/row_walk.h). --stores times instead the walk of each op on 32x1000x4096 with
// ordinary and with streaming stores (backends/cpu/streaming_stores.h, each forced), round by
// round beside the copy: the median of the per-round ratios, and each one's fastest call.
//   build/benchmarks/bench_rows [--python PATH] [--rounds N] [--no-sweep | --sweep-only]
//                               [--stores]
//   (~/peers/bin/python)
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jax_peer.h"
#include "kiln.h"

using namespace kiln;

namespace {

using Clock = std::chrono::steady_clock;

double best_ms(int reps, const std::function<void()>& f) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return best;
}

using Op = std::function<Array(const Array& x, const Array& w, const Array& b)>;

struct Case {
  const char* name;
  Op op;
};

std::vector<Case> cases() {
  return {
      {"softmax", [](const Array& x, const Array&, const Array&) { return nn::softmax(x); }},
      {"log_softmax",
       [](const Array& x, const Array&, const Array&) { return nn::log_softmax(x); }},
      {"layer_norm",
       [](const Array& x, const Array& w, const Array& b) { return nn::layer_norm(x, w, b); }},
      {"rms_norm", [](const Array& x, const Array& w, const Array&) { return nn::rms_norm(x, w); }},
  };
}

// The compiled op, its walk on or off (the env var is read when the kernels compile, at the
// first call).
CompiledFunction compiled(const Op& op, bool walk, const std::vector<Array>& args) {
  if (walk)
    unsetenv("KILN_ROW_WALK_BYTES");
  else
    setenv("KILN_ROW_WALK_BYTES", "0", 1);
  CompiledFunction f = compile(
      [op](const std::vector<Array>& in) { return std::vector<Array>{op(in[0], in[1], in[2])}; });
  eval(f(args));
  unsetenv("KILN_ROW_WALK_BYTES");
  return f;
}

// One copy of `bytes` bytes: one memcpy or every thread copying a part, whichever is faster.
double copy_ms(size_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes);
  double one = best_ms(reps, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  int parts = tbb::this_task_arena::max_concurrency();
  double all = best_ms(reps, [&] {
    tbb::parallel_for(0, parts, [&](int p) {
      size_t lo = bytes * p / parts, hi = bytes * (p + 1) / parts;
      std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
    });
  });
  return std::min(one, all);
}

struct Row {
  double compiled = 1e30, passes = 1e30, eager = 1e30, jax = -1, copy = 0;
};

Row measure(const Case& c, const Shape& shape, const std::string& python, int rounds) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  int reps = n > (int64_t{1} << 24) ? 3 : 20;
  Array x = random::normal(shape, float32, random::key(1));
  Array w = random::normal({shape.back()}, float32, random::key(2));
  Array b = random::normal({shape.back()}, float32, random::key(3));
  eval({x, w, b});
  std::vector<Array> args{x, w, b};
  CompiledFunction walk = compiled(c.op, true, args), passes = compiled(c.op, false, args);
  std::unique_ptr<JaxPeer> jax;
  if (!python.empty()) {  // the peer reads its case from the environment it inherits
    std::string spec = c.name;
    for (int64_t d : shape) spec.append(" ").append(std::to_string(d));
    setenv("KILN_ROWS_PEER_CASE", spec.c_str(), 1);
    jax = std::make_unique<JaxPeer>(python,
                                    std::string(KILN_SOURCE_DIR) + "/benchmarks/peers/rows_jax.py");
  }
  Row r;
  for (int round = 0; round < rounds; ++round) {
    r.compiled = std::min(r.compiled, best_ms(reps, [&] { eval(walk(args)); }));
    r.passes = std::min(r.passes, best_ms(reps, [&] { eval(passes(args)); }));
    r.eager = std::min(r.eager, best_ms(reps, [&] { eval(c.op(x, w, b)); }));
    if (jax && jax->ok()) {
      Timing t = jax->best_of(reps);
      if (t.wall > 0) r.jax = r.jax < 0 ? t.wall * 1e3 : std::min(r.jax, t.wall * 1e3);
    }
  }
  r.copy = copy_ms(static_cast<size_t>(n) * sizeof(float), reps);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The walk compiled with its stores forced one way (read when the kernel compiles).
CompiledFunction with_stores(const Op& op, bool streaming, const std::vector<Array>& args) {
  setenv("KILN_NONTEMPORAL_BYTES", "0", 1);
  setenv("KILN_ROW_STORES", streaming ? "streaming" : "ordinary", 1);
  CompiledFunction f = compile(
      [op](const std::vector<Array>& in) { return std::vector<Array>{op(in[0], in[1], in[2])}; });
  eval(f(args));
  unsetenv("KILN_NONTEMPORAL_BYTES");
  unsetenv("KILN_ROW_STORES");
  return f;
}

void stores(int rounds) {
  std::printf("%-12s %10s %10s %10s %9s %9s %18s\n", "32x1000x4096", "ordinary", "streaming",
              "copy", "ord/copy", "str/copy", "streaming/ordinary");
  Shape shape{32, 1000, 4096};
  size_t bytes = size_t{32} * 1000 * 4096 * sizeof(float);
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  int parts = tbb::this_task_arena::max_concurrency();
  auto copy = [&] {  // every thread copying a part (copy_ms without its allocation)
    tbb::parallel_for(0, parts, [&](int p) {
      size_t lo = bytes * p / parts, hi = bytes * (p + 1) / parts;
      std::memcpy(dst.data() + lo, src.data() + lo, hi - lo);
    });
  };
  for (const Case& c : cases()) {
    Array x = random::normal(shape, float32, random::key(1));
    Array w = random::normal({4096}, float32, random::key(2));
    Array b = random::normal({4096}, float32, random::key(3));
    eval({x, w, b});
    std::vector<Array> args{x, w, b};
    CompiledFunction ord = with_stores(c.op, false, args), str = with_stores(c.op, true, args);
    double to = 1e30, ts = 1e30, tc = 1e30;
    std::vector<double> ratios;
    for (int round = 0; round < rounds; ++round) {  // which goes first alternates
      double o = 1e30, s = 1e30;
      for (int i = 0; i < 2; ++i) {
        bool ord_first = (round + i) % 2 == 0;
        for (int k = 0; k < 2; ++k) {
          if ((k == 0) == ord_first)
            o = std::min(o, best_ms(1, [&] { eval(ord(args)); }));
          else
            s = std::min(s, best_ms(1, [&] { eval(str(args)); }));
        }
        tc = std::min(tc, best_ms(1, copy));
      }
      ratios.push_back(s / o);
      to = std::min(to, o), ts = std::min(ts, s);
    }
    std::printf("%-12s %10.3f %10.3f %10.3f %8.2fx %8.2fx %17.3f\n", c.name, to, ts, tc, to / tc,
                ts / tc, median(ratios));
    std::fflush(stdout);
  }
}

std::string shape_str(const Shape& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out.append(i ? "x" : "").append(std::to_string(s[i]));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string python;
  if (const char* home = std::getenv("HOME")) python = std::string(home) + "/peers/bin/python";
  int rounds = 3;
  bool sweep = true, cases_too = true, stores_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--python" && i + 1 < argc)
      python = argv[++i];
    else if (a == "--rounds" && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-sweep")
      sweep = false;
    else if (a == "--sweep-only")
      cases_too = false;
    else if (a == "--stores")
      stores_only = true;
  }
  std::string cpu_desc;
  for (const DeviceInfo& d : devices())
    if (d.device.backend == "cpu") cpu_desc = d.description;
  std::printf("bench_rows: cpu (%s), %d threads; fastest call of %d rounds\n", cpu_desc.c_str(),
              tbb::this_task_arena::max_concurrency(), rounds);
  if (stores_only) {
    stores(std::max(rounds, 5));
    return 0;
  }
  std::printf("%-12s %-12s %9s %9s %9s %9s %9s  %8s %8s %8s\n", "op", "shape", "compiled", "passes",
              "eager", "JAX jit", "copy", "/eager", "/JAX", "/copy");
  for (const Shape& shape : {Shape{1024, 1024}, Shape{32, 1000, 4096}}) {
    if (!cases_too) break;
    for (const Case& c : cases()) {
      Row r = measure(c, shape, python, rounds);
      char jax[32] = "-", vs_jax[32] = "-";
      if (r.jax > 0) {
        std::snprintf(jax, sizeof jax, "%.3f", r.jax);
        std::snprintf(vs_jax, sizeof vs_jax, "%.2fx", r.compiled / r.jax);
      }
      std::printf("%-12s %-12s %9.3f %9.3f %9.3f %9s %9.3f  %7.2fx %8s %7.2fx\n", c.name,
                  shape_str(shape).c_str(), r.compiled, r.passes, r.eager, jax, r.copy,
                  r.compiled / r.eager, vs_jax, r.compiled / r.copy);
      std::fflush(stdout);
    }
  }
  if (!sweep) return 0;
  std::printf(
      "\nsoftmax over rows of L floats, 2^24 floats in all (ms; walk/passes < 1: the walk wins)\n");
  std::printf("%10s %10s %10s %10s %10s\n", "L", "row KiB", "walk", "passes", "walk/passes");
  const std::vector<Case> all = cases();
  const Case& sm = all[0];
  for (int64_t len = 1024; len <= (int64_t{1} << 24); len *= len < (int64_t{1} << 22) ? 4 : 2) {
    Shape shape{(int64_t{1} << 24) / len, len};
    Array x = random::normal(shape, float32, random::key(1));
    Array w = zeros({len}, float32);
    eval({x, w});
    std::vector<Array> args{x, w, w};
    CompiledFunction passes = compiled(sm.op, false, args);
    // The walk forced on whatever the line says: KILN_ROW_WALK_BYTES large.
    setenv("KILN_ROW_WALK_BYTES", "1000000000000", 1);
    CompiledFunction forced = compile([&](const std::vector<Array>& in) {
      return std::vector<Array>{sm.op(in[0], in[1], in[2])};
    });
    eval(forced(args));
    unsetenv("KILN_ROW_WALK_BYTES");
    double tw = 1e30, tp = 1e30;
    for (int round = 0; round < rounds; ++round) {
      tw = std::min(tw, best_ms(5, [&] { eval(forced(args)); }));
      tp = std::min(tp, best_ms(5, [&] { eval(passes(args)); }));
    }
    std::printf("%10lld %10lld %10.3f %10.3f %10.2f\n", static_cast<long long>(len),
                static_cast<long long>(len * 8 / 1024), tw, tp, tw / tp);
    std::fflush(stdout);
  }
  return 0;
}
