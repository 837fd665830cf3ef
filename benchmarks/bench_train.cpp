// The compiled training step of issue 11: a 2-layer MLP 1024 -> 4096 -> 1024 with exact gelu,
// batch 256, float32, mean squared error and one Adam step. Measured in one run, rounds
// alternating: the same step uncompiled (eager: one kernel per primitive), compiled (forward,
// backward and update fused and planned once) and JAX's jit of the same step in jax.numpy
// (benchmarks/peers/train_jax.py; only when a Python with jax exists: ~/peers/bin/python or
// --python PATH). Also the compiled step's memory (its plan's memory analysis) against the sum
// the issue names: parameters, optimizer state, activations kept for backward and gradients,
// and the peak the cpu buffer pool measured during one step.
//
//   build/benchmarks/bench_train [--rounds N] [--python PATH] [--no-peers]
//   build/benchmarks/bench_train --serve
// --serve runs only the compiled step as a peer of benchmarks/python/bench_train_python.py (the
// same step from Python): it prints `ready kiln`, then for each line `N` on stdin runs N steps
// and prints `best_ms <fastest> cpu_ms <CPU per step> peak_mb <pool peak of one step>`.
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "executor/executor.h"
#include "jax_peer.h"
#include "kiln.h"
#ifdef KILN_HAVE_CPU_BACKEND
#include "backends/cpu/buffer_pool.h"
#endif

using namespace kiln;

namespace {

template <typename F>
Timing best_of(int reps, F&& f) {
  Timing t;
  double cpu0 = process_cpu_seconds();
  for (int i = 0; i < reps; ++i) {
    auto s = std::chrono::steady_clock::now();
    f();
    t.wall = std::min(t.wall,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
  }
  t.cpu = (process_cpu_seconds() - cpu0) / reps;
  return t;
}

struct Trainer {
  nn::MLP model{{1024, 4096, 1024}, nn::gelu, random::key(0)};
  optim::Adam optimizer{model.parameters(), 1e-3};
  Array x = random::normal({256, 1024}, float32, random::key(1));
  Array y = random::normal({256, 1024}, float32, random::key(2));
  std::vector<std::vector<Array>*> state{&model.parameters().arrays(), &optimizer.state()};
  nn::ModuleValueAndGradFn loss_and_grad = nn::value_and_grad(
      model, [this](const std::vector<Array>& a) { return nn::mse(model(a[0]), a[1]); });
  Fn step = [this](const std::vector<Array>& a) {
    auto [loss, grads] = loss_and_grad(a);
    optimizer.update(model, grads);
    return std::vector<Array>{loss};
  };
  CompiledFunction compiled = compile(step, {.inputs = state, .outputs = state});

  void run(bool use_compiled) {
    Array loss = use_compiled ? compiled({x, y})[0] : step({x, y})[0];
    std::vector<Array> all = model.parameters().arrays();
    all.insert(all.end(), optimizer.state().begin(), optimizer.state().end());
    all.push_back(loss);
    eval(all);
  }
};

size_t bytes_of(const std::vector<Array>& v) {
  size_t n = 0;
  for (const Array& a : v) n += a.nbytes();
  return n;
}

// Measured: the cpu buffer pool's peak of live bytes during one compiled step (a training
// loop's: the previous step's arrays dropped), less what else the process holds (the eager
// trainer, the data); the step's arguments count, as they are live while it runs.
#ifdef KILN_HAVE_CPU_BACKEND
size_t step_peak_bytes(Trainer& t) {
  auto pool = cpu::BufferPool::instance();
  size_t args = bytes_of(t.model.parameters().arrays()) + bytes_of(t.optimizer.state()) +
                t.x.nbytes() + t.y.nbytes();
  size_t before = pool->stats().live_bytes;
  pool->reset_peak();
  t.run(true);
  return pool->stats().peak_live_bytes - (before - args);
}
#endif

void measure_step_memory(Trainer& t, size_t budget) {
#ifdef KILN_HAVE_CPU_BACKEND
  size_t donated0 = donated_bytes();
  size_t peak = step_peak_bytes(t);
  std::printf(
      "  measured (cpu buffer pool): peak live during the step %.1f MB; / that = %.2f; "
      "donated %.1f MB\n",
      peak / 1e6, static_cast<double>(peak) / budget, (donated_bytes() - donated0) / 1e6);
#else
  (void)t, (void)budget;
  std::printf("  measured: needs the cpu backend's buffer pool (not built)\n");
#endif
}

// The compiled step as a peer process (see the header comment); returns main's exit status.
int serve() {
  Trainer t;
  t.run(true);  // traced, kernels built
  std::printf("ready kiln\n");
  std::fflush(stdout);
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    int reps = std::max(1, std::atoi(line));
    Timing tm = best_of(reps, [&] { t.run(true); });
#ifdef KILN_HAVE_CPU_BACKEND
    double peak_mb = step_peak_bytes(t) / 1e6;
#else
    double peak_mb = -1;
#endif
    std::printf("best_ms %.4f cpu_ms %.4f peak_mb %.1f\n", tm.wall * 1e3, tm.cpu * 1e3, peak_mb);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::string python;
  bool peers = true;
  if (const char* home = std::getenv("HOME")) {
    std::string p = std::string(home) + "/peers/bin/python";
    if (std::filesystem::exists(p)) python = p;
  }
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::atoi(argv[++i]);
    else if (a == "--python" && i + 1 < argc)
      python = argv[++i];
    else if (a == "--no-peers")
      peers = false;
    else if (a == "--serve")
      return serve();
  }
  Trainer eager, fused;
  eager.run(false);  // warm: kernels built, memory pools filled
  fused.run(true);
  std::unique_ptr<JaxPeer> jax;
  if (peers && !python.empty()) {
    jax = std::make_unique<JaxPeer>(
        python, std::string(KILN_SOURCE_DIR) + "/benchmarks/peers/train_jax.py");
    if (!jax->ok())
      std::printf("JAX: could not run %s (%s)\n", python.c_str(), jax->last_line().c_str());
  }
  std::printf("== training step: MLP 1024->4096->1024 gelu, batch 256, mse, Adam (float32)\n");
  Timing e, c, j;
  for (int r = 0; r < rounds; ++r) {
    Timing te = best_of(2, [&] { eager.run(false); });
    Timing tc = best_of(4, [&] { fused.run(true); });
    e.wall = std::min(e.wall, te.wall), e.cpu = std::min(e.cpu, te.cpu);
    c.wall = std::min(c.wall, tc.wall), c.cpu = std::min(c.cpu, tc.cpu);
    if (jax && jax->ok()) {
      Timing tj = jax->best_of(4);
      if (tj.wall > 0) j.wall = std::min(j.wall, tj.wall), j.cpu = std::min(j.cpu, tj.cpu);
    }
  }
  double flops = 3 * 2.0 * 256 * (1024.0 * 4096 * 2);  // forward + two backward matmuls each
  std::printf("  %-28s %9.2f ms  (cpu %7.2f ms)  %6.0f GFLOP/s\n", "Kiln uncompiled (eager)",
              e.wall * 1e3, e.cpu * 1e3, flops / e.wall / 1e9);
  std::printf("  %-28s %9.2f ms  (cpu %7.2f ms)  %6.0f GFLOP/s\n", "Kiln compiled", c.wall * 1e3,
              c.cpu * 1e3, flops / c.wall / 1e9);
  if (j.wall < 1e29)
    std::printf("  %-28s %9.2f ms  (cpu %7.2f ms)  %6.0f GFLOP/s\n",
                ("JAX " + jax->version() + " jit").c_str(), j.wall * 1e3, j.cpu * 1e3,
                flops / j.wall / 1e9);
  std::printf("  compiled speed-up over eager: %.2fx (goal >= 1.5x)\n", e.wall / c.wall);
  if (j.wall < 1e29)
    std::printf("  Kiln compiled / JAX jit:      %.2fx time (goal <= 1.1x)\n", c.wall / j.wall);
  else
    std::printf("  JAX not measured (no ~/peers/bin/python; pass --python PATH)\n");
  std::printf("  traces of the compiled step:  %zu\n", fused.compiled.cache_size());

  // Memory: what the compiled step's plan holds at its peak, against the sum.
  MemoryAnalysis m = fused.compiled.lower({fused.x, fused.y}).compile().memory_analysis();
  size_t params = bytes_of(fused.model.parameters().arrays());
  size_t opt = bytes_of(fused.optimizer.state());
  size_t grads = params;
  size_t kept = 2 * 256 * 4096 * 4 + 256 * 1024 * 4;  // pre-activation, gelu output, residual
  size_t budget = params + opt + kept + grads;
  std::printf("\n== memory of the compiled step (plan's memory analysis)\n");
  for (const auto& [dev, d] : m.devices)
    std::printf(
        "  %s: arguments %.1f MB, outputs %.1f MB (+ %.1f MB written into donated arguments), "
        "argument copies %.1f MB (aliases), temporaries %.1f MB\n",
        dev.c_str(), d.argument_bytes / 1e6, d.output_bytes / 1e6, d.donated_bytes / 1e6,
        d.argument_copy_bytes / 1e6, d.temp_bytes / 1e6);
  std::printf(
      "  params %.1f + optimizer state %.1f + kept activations %.1f + gradients %.1f = %.1f MB\n",
      params / 1e6, opt / 1e6, kept / 1e6, grads / 1e6, budget / 1e6);
  std::printf(
      "  analysis: peak (arguments + outputs + temporaries) %.1f MB; / that = %.2f (goal "
      "<= 1.2)\n",
      m.peak_bytes() / 1e6, static_cast<double>(m.peak_bytes()) / budget);
  measure_step_memory(fused, budget);
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("  process peak RSS (both trainers, all kernels): %.1f MB\n", ru.ru_maxrss / 1e3);
  return 0;
}
