// The `kiln` command as a library function: `kiln devices` lists every backend and device
// (available or not, and why); `kiln demo` is the short showcase that `make demo` runs; `kiln
// bench` runs the benchmark suite on every device and writes JSON and an HTML report
// (tools/bench/); `kiln tune` measures the host-dependent choices again (the cpu backend's
// matmul library per shape class); `kiln inspect` and `kiln run` read AOT artifacts.
// tools/kiln.cpp and the Python package (`python -m kiln`) both call run_command.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

#include <unistd.h>

#include <ctime>
#include <sstream>

#include "executor/cancel.h"
#include "executor/stream_hold.h"
#include "kiln.h"
#include "tools/bench/peers.h"
#include "tools/bench/report.h"
#include "tools/cli.h"
#ifdef KILN_HAVE_CPU_BACKEND
#include "backends/cpu/matmul_classes.h"
#endif

namespace {

int cmd_devices() {
  for (const kiln::DeviceInfo& d : kiln::devices()) {
    std::printf("%-12s %-10s %s\n", d.device.str().c_str(), d.available ? "available" : "missing",
                d.available ? d.description.c_str() : d.reason.c_str());
  }
  std::printf("default: %s\n", kiln::default_device().str().c_str());
  return 0;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

kiln::Array gelu(const kiln::Array& x) {
  return x * (1.0f + kiln::erf(x / std::sqrt(2.0f))) / 2.0f;
}

void print_tasks(const std::vector<kiln::TaskEvent>& events) {
  std::map<std::string, std::pair<int, double>> by_name;
  for (const kiln::TaskEvent& e : events) {
    auto& [count, us] = by_name[e.name + " on " + e.stream.str()];
    count++;
    us += (e.end_ns - e.start_ns) / 1000.0;
  }
  for (const auto& [name, stat] : by_name)
    std::printf("  %-48s x%-3d %9.1f us\n", name.c_str(), stat.first, stat.second);
}

int cmd_demo(const std::string& trace_path) {
  using namespace kiln;
  std::printf("== devices\n");
  cmd_devices();

  Device dev = default_device();
  std::printf("\n== eager gelu on %s: x * (1 + erf(x / sqrt(2))) / 2, x of shape (256, 1024)\n",
              dev.str().c_str());
  Array x = random::normal({256, 1024}, float32, random::key(42));
  eval(x);
  ProfileScope all_tasks;
  std::vector<TaskEvent> eager_events;
  Array y = gelu(x);
  Array m = mean(y);
  Array top = argmax(max(y, 1));
  {
    ProfileScope prof;
    eval({y, m, top});
    eager_events = prof.events();
  }
  std::vector<float> xs = x.to_vector<float>(), ys = y.to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double ref = xs[i] * 0.5 * (1.0 + std::erf(xs[i] / std::sqrt(2.0)));
    worst = std::max(worst, std::fabs(ref - ys[i]));
  }
  std::printf("mean %.6f, row with the largest value %lld, max |error| vs libm %.3g\n",
              m.item<float>(), (long long)top.item<int64_t>(), worst);
  std::printf("tasks (one kernel per primitive, eagerly):\n");
  print_tasks(eager_events);

  std::printf("\n== compile(gelu): traced once, fused into one kernel\n");
  int traces = 0;
  auto f = compile([&](const std::vector<Array>& in) {
    ++traces;
    return std::vector<Array>{gelu(in[0])};
  });
  auto t0 = std::chrono::steady_clock::now();
  Array yc = f({x})[0];
  eval(yc);
  double first = ms_since(t0);
  std::vector<TaskEvent> compiled_events;
  t0 = std::chrono::steady_clock::now();
  {
    ProfileScope prof;
    for (int i = 0; i < 10; ++i) eval(f({x}));
    compiled_events = prof.events();
  }
  double per_call = ms_since(t0) / 10;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) eval(gelu(x));
  double eager_call = ms_since(t0) / 10;
  double diff = 0;
  std::vector<float> yv = yc.to_vector<float>();
  for (size_t i = 0; i < ys.size(); ++i) diff = std::max(diff, double(std::fabs(yv[i] - ys[i])));
  std::printf(
      "first call %.2f ms (trace + fuse + JIT), then %.3f ms per call vs %.3f ms eager "
      "(%.1fx); max |compiled - eager| %.3g\n",
      first, per_call, eager_call, eager_call / per_call, diff);
  print_tasks(compiled_events);

  std::printf("\n== the same compiled function on another stream and device: no retrace\n");
  for (const DeviceInfo& d : devices()) {
    if (!d.available) continue;
    Stream s = new_stream(d.device);
    StreamScope scope(s);
    ProfileScope prof;
    Array r = f({x})[0];
    eval(r);
    auto ev = prof.events();
    std::printf("  caller on %-26s -> ran %s on %s\n", s.str().c_str(),
                ev.empty() ? "nothing" : ev.back().name.c_str(),
                ev.empty() ? "-" : ev.back().stream.str().c_str());
  }
  std::printf("traces of the user function: %d\n", traces);

  if (!trace_path.empty()) {
    all_tasks.write_chrome_trace(trace_path);
    std::printf("Chrome trace of every task written to %s\n", trace_path.c_str());
  }
  return 0;
}

// `kiln inspect ART [--dot]`: the artifact's text form, or its task DAG for Graphviz with one
// colour per device.
int cmd_inspect(const std::string& path, bool dot) {
  kiln::Executable e = kiln::Executable::load(path);
  if (!dot) {
    std::printf("%s", e.as_text().c_str());
    return 0;
  }
  // The "plan:" and "placements:" sections name every task and its device.
  std::istringstream text(e.as_text());
  std::vector<std::string> names, devices;
  std::vector<std::vector<int>> deps;
  std::string line;
  bool in_plan = false, in_places = false;
  while (std::getline(text, line)) {
    if (line == "plan:" || line == "placements:" || line == "kernels:")
      in_plan = line == "plan:", in_places = line == "placements:";
    else if (in_plan && line.rfind("task ", 0) == 0) {
      std::string name = line.substr(line.find(": ") + 2);
      names.push_back(name.substr(0, name.find(" lane ")));
      std::vector<int> d;
      std::string list = line.substr(line.rfind("deps(") + 5);
      std::istringstream ds(list.substr(0, list.size() - 1));
      for (std::string x; std::getline(ds, x, ',');)
        if (!x.empty()) d.push_back(std::stoi(x));
      deps.push_back(d);
    } else if (in_places && line.rfind("  task ", 0) == 0) {
      devices.push_back(line.substr(line.rfind(" on ") + 4));
    }
  }
  const char* palette[] = {"#9ec2ea", "#f3c190", "#a4d8b1", "#cdb4e6", "#f4a6a6"};
  std::map<std::string, int> colour;
  std::printf("digraph kiln {\n  node [shape=box, style=filled, fontname=sans];\n");
  for (size_t t = 0; t < names.size(); ++t) {
    const std::string& dev = t < devices.size() ? devices[t] : "?";
    int c = colour.emplace(dev, static_cast<int>(colour.size())).first->second;
    std::printf("  t%zu [label=\"%s\\n%s\", fillcolor=\"%s\"];\n", t, names[t].c_str(), dev.c_str(),
                palette[c % 5]);
    for (int d : deps[t]) std::printf("  t%d -> t%zu;\n", d, t);
  }
  std::printf("}\n");
  return 0;
}

// A Slurm task number from the environment, -1 when unset.
int slurm_number(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (!*v || *end || n < 0 || n > (1 << 24))
    throw kiln::Error(std::string("kiln run: ") + name + "='" + v +
                      "' is not a task number (Slurm sets it to one)");
  return static_cast<int>(n);
}

// This process's rank and the number of ranks: the world group's when a launcher started MPI
// ranks (mpiexec, srun --mpi=pmix); else Slurm's task among the step's tasks (SLURM_PROCID of
// SLURM_NTASKS: srun without MPI); else 0 of 1.
int this_rank() {
  kiln::distributed::Group world = kiln::distributed::init();
  if (world.size() > 1) return world.rank();
  int rank = slurm_number("SLURM_PROCID");
  return rank < 0 ? 0 : rank;
}

int rank_count() {
  kiln::distributed::Group world = kiln::distributed::init();
  if (world.size() > 1) return world.size();
  int rank = slurm_number("SLURM_PROCID"), size = slurm_number("SLURM_NTASKS");
  if (rank < 0) return 1;
  if (size <= rank)
    throw kiln::Error(
        "kiln run: {size} under Slurm needs SLURM_NTASKS above SLURM_PROCID=" +
        std::to_string(rank) + " (got " +
        (size < 0 ? std::string("none: give srun or sbatch --ntasks") : std::to_string(size)) +
        ")");
  return size;
}

// A path with "{rank}", "{size}" and "{task}" filled in: this process's rank and the number of
// ranks (this_rank, rank_count), and its task, Slurm's SLURM_ARRAY_TASK_ID in a job array (else the
// rank), so every rank or array task picks its own shard (-i x.{task}.npy).
std::string for_this_task(std::string path) {
  auto fill = [&](const std::string& key, const std::function<std::string()>& value) {
    for (size_t at; (at = path.find(key)) != std::string::npos;)
      path.replace(at, key.size(), value());
  };
  auto rank = [] { return std::to_string(this_rank()); };
  fill("{rank}", rank);
  fill("{size}", [] { return std::to_string(rank_count()); });
  fill("{task}", [&] {
    const char* t = std::getenv("SLURM_ARRAY_TASK_ID");
    return t ? std::string(t) : rank();
  });
  return path;
}

// `kiln run ART -i x.npy ... -o out.npy ...`: placements kept, everything else on --device.
// Under a launcher every rank runs the artifact (its collectives join the world group).
int run_artifact(const std::string& path, const std::vector<std::string>& ins,
                 const std::vector<std::string>& outs, const std::string& dev,
                 const std::string& trace, const std::vector<std::string>& remaps);

// --timeout: the run gives up waiting when it passes, says what it waited for and exits 124
// (as timeout(1) does) at once, without the exit's wait for device queues (a stuck queue would
// hold that wait too). KILN_TEST_HOLD_STREAM=1 holds the run's stream on purpose (tests only).
int cmd_run(const std::string& path, const std::vector<std::string>& ins,
            const std::vector<std::string>& outs, const std::string& dev, const std::string& trace,
            const std::vector<std::string>& remaps, double timeout) {
  using namespace kiln;
  if (timeout < 0)
    throw Error("kiln run: --timeout is seconds >= 0 (0: none), got a negative value");
  std::shared_ptr<CancelToken> token;
  if (timeout > 0)
    token = std::make_shared<CancelToken>(std::chrono::steady_clock::now() +
                                          std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::duration<double>(timeout)));
  std::unique_ptr<StreamHold> hold;
  if (const char* h = std::getenv("KILN_TEST_HOLD_STREAM"); h && std::string(h) == "1")
    hold =
        std::make_unique<StreamHold>(dev.empty() ? current_stream() : default_stream(device(dev)));
  try {
    CancelScope scope(token);
    return run_artifact(path, ins, outs, dev, trace, remaps);
  } catch (const Error& e) {
    if (!token || !token->deadline_passed()) throw;
    std::fprintf(stderr, "kiln run: --timeout %g s passed: %s\n", timeout, e.what());
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(124);
  }
}

int run_artifact(const std::string& path, const std::vector<std::string>& ins,
                 const std::vector<std::string>& outs, const std::string& dev,
                 const std::string& trace, const std::vector<std::string>& remaps) {
  using namespace kiln;
  DeviceMap remap;
  for (const std::string& m : remaps) {
    size_t eq = m.find('=');
    if (eq == std::string::npos)
      throw Error("kiln run: --remap takes FROM=TO (opencl:0=cpu:0), got '" + m + "'");
    remap[m.substr(0, eq)] = m.substr(eq + 1);
  }
  Executable e = Executable::load(for_this_task(path), remap);
  std::optional<StreamScope> scope;
  if (!dev.empty()) scope.emplace(device(dev));
  std::vector<Array> args;
  for (const std::string& i : ins) args.push_back(load_npy(for_this_task(i)));
  std::optional<ProfileScope> prof;
  if (!trace.empty()) prof.emplace();
  std::vector<Array> results = e(args);
  if (outs.size() != results.size())
    throw Error("kiln run: the artifact returns " + std::to_string(results.size()) +
                " outputs; give as many -o files (got " + std::to_string(outs.size()) + ")");
  // A program placed on ranks: each rank writes the outputs it computes (the others' raise).
  std::vector<int> owners = e.output_ranks();
  std::vector<Array> here;
  for (size_t i = 0; i < results.size(); ++i)
    if (owners[i] < 0) here.push_back(results[i]);
  eval(here);
  for (size_t i = 0; i < outs.size(); ++i) {
    if (owners[i] >= 0) {
      std::printf("output %zu is computed on rank %d: %s is written there\n", i, owners[i],
                  outs[i].c_str());
      continue;
    }
    save_npy(for_this_task(outs[i]), results[i]);
    std::printf("wrote %s: %s %s\n", for_this_task(outs[i]).c_str(),
                results[i].dtype().name().c_str(), to_string(results[i].shape()).c_str());
  }
  if (prof) {
    prof->write_chrome_trace(trace);
    for (const TaskEvent& t : prof->events())
      std::printf("%s on %s\n", t.name.c_str(), t.stream.str().c_str());
  }
  return 0;
}

struct BenchArgs {
  std::string suite = "quick", devices = "all", json, html, python, peers_script;
  bool peers = false;
  double seconds = 0;
};

std::vector<kiln::Device> parse_devices(const std::string& list) {
  std::vector<kiln::Device> out;
  if (list == "all") return out;  // every available device
  std::stringstream ss(list);
  for (std::string name; std::getline(ss, name, ',');)
    if (!name.empty()) out.push_back(kiln::device(name));  // raises for unknown or unusable
  return out;
}

// A bar on a terminal, plain lines otherwise (CI logs, pipes).
void show_progress(size_t done, size_t total, const std::string& what) {
  static const bool tty = ::isatty(STDERR_FILENO);
  if (!tty) {
    if (what != "done") std::fprintf(stderr, "[%zu/%zu] %s\n", done + 1, total, what.c_str());
    return;
  }
  int width = 30, filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r[%s%s] %3zu/%zu %-48.48s", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), done, total, what.c_str());
  if (what == "done") std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

// `kiln tune [--show]`: measures every matmul shape class on this host again (bench_matmul's
// shapes and each class already in the table) and prints the table: each candidate's fastest
// run and the winner. --show prints the table as it is, measuring nothing.
int cmd_tune(bool show_only) {
#ifndef KILN_HAVE_CPU_BACKEND
  (void)show_only;
  throw kiln::Error(
      "kiln tune: this Kiln has no cpu backend (it needs LLVM 15 and OpenBLAS when "
      "it is configured), so there is nothing to tune");
#else
  namespace cpu = kiln::cpu;
  cpu::Tuner& tuner = cpu::matmul_tuner();
  std::vector<cpu::TuneResult> results;
  if (show_only) {
    results = tuner.table();
  } else {
    std::vector<cpu::MatmulClass> classes = cpu::tune_classes();
    for (size_t i = 0; i < classes.size(); ++i) {
      show_progress(i, classes.size(), classes[i].key());
      results.push_back(cpu::tune_matmul_class(classes[i]));
    }
    show_progress(classes.size(), classes.size(), "done");
  }
  std::string path = tuner.path();
  std::printf("matmul library per shape class on %s; table %s\n", cpu::host_cpu_model().c_str(),
              path.empty() ? "(in memory only: the cache folder was refused)" : path.c_str());
  if (const char* forced = std::getenv(tuner.force_env().c_str()); forced && *forced)
    std::printf("%s=%s is set: it overrides this table\n", tuner.force_env().c_str(), forced);
  std::printf("%-34s %-14s %-62s %s\n", "class (batches / m x k x n / threads)", "kind",
              "one thread's share of the tiles, fastest run (CPU time)", "winner");
  for (const cpu::TuneResult& r : results) {
    std::optional<cpu::MatmulClass> c = cpu::parse_matmul_key(r.key);
    std::string times;
    for (const auto& [id, sec] : r.seconds) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%s %.3f ms", times.empty() ? "" : ", ", id.c_str(),
                    sec * 1e3);
      times += buf;
    }
    std::printf("%-34s %-14s %-62s %s\n", r.key.c_str(), c ? c->kind().c_str() : "?", times.c_str(),
                r.winner.c_str());
  }
  if (!show_only)
    std::printf("measured %zu classes in %.0f ms\n", results.size(),
                tuner.seconds_measuring() * 1e3);
  return 0;
#endif
}

std::string now_string() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
  return buf;
}

int cmd_bench(const BenchArgs& a) {
  namespace kb = kiln::bench;
  kb::Options opt;
  opt.suite = a.suite;
  opt.devices = parse_devices(a.devices);
  opt.seconds_per_case = a.seconds;
  std::vector<kb::Case> cases = kb::suite(a.suite);
  std::fprintf(stderr, "measuring the bounds (copy bandwidth, FMA peak)...\n");
  kb::Report rep;
  rep.machine = kb::measure_machine();
  rep.suite = a.suite;
  rep.date = now_string();
  rep.results = kb::run(cases, opt, rep.machine, show_progress);
  for (const kb::Result& r : rep.results)
    if (std::find(rep.devices.begin(), rep.devices.end(), r.device) == rep.devices.end())
      rep.devices.push_back(r.device);
  if (a.peers) {
    std::fprintf(stderr, "peers: NumPy, JAX, MLX through %s...\n", a.python.c_str());
    kb::run_peers(cases, a.python, a.peers_script,
                  opt.seconds_per_case > 0 ? opt.seconds_per_case : 0.25, rep);
  }
  std::printf("%s, %d threads; copy %.1f GB/s, float32 FMA peak %.0f GFLOP/s (%s, measured now)\n",
              rep.machine.cpu.c_str(), rep.machine.threads, rep.machine.copy_gbps,
              rep.machine.peak_gflops_f32, rep.machine.peak_isa.c_str());
  std::printf("%-34s %-13s %-9s %11s %11s %8s\n", "case", "device", "mode", "median", "min",
              "bound");
  for (const kb::Result& r : rep.results) {
    std::string c = r.name + " " + r.shape;
    if (!r.error.empty()) {
      std::printf("%-34.34s %-13s %-9s error: %s\n", c.c_str(), r.device.c_str(), r.mode.c_str(),
                  r.error.c_str());
      continue;
    }
    std::string bound = r.fraction > 0 ? std::to_string(int(r.fraction * 100 + 0.5)) + "%" : "-";
    std::printf("%-34.34s %-13s %-9s %9.4f ms %8.4f ms %8s\n", c.c_str(), r.device.c_str(),
                r.mode.c_str(), r.median_ms, r.min_ms, bound.c_str());
  }
  for (const kb::PeerResult& p : rep.peers)
    std::printf("peer %-29.29s %-13s %-9s %9.4f ms %s\n", (p.name + " " + p.shape).c_str(),
                p.peer.c_str(), p.mode.c_str(), p.median_ms, p.error.c_str());
  for (const std::string& m : rep.peers_missing) std::printf("peer not found: %s\n", m.c_str());
  if (!a.json.empty()) kb::write_json(rep, a.json), std::printf("wrote %s\n", a.json.c_str());
  if (!a.html.empty()) kb::write_html(rep, a.html), std::printf("wrote %s\n", a.html.c_str());
  return 0;
}

}  // namespace

namespace kiln::tools {

int run_command(int argc, const char* const* argv, const CommandDefaults& defaults) {
  CLI::App app{"kiln: compile array functions into fused kernels and run them as task graphs"};
  app.require_subcommand(1);
  auto* devices = app.add_subcommand("devices", "list every backend and device, and why not");
  auto* demo = app.add_subcommand("demo", "a short showcase on the default device");
  std::string trace;
  demo->add_option("--trace", trace, "write a Chrome trace of the demo's tasks to this file");
  auto* bench = app.add_subcommand("bench", "run the benchmark suite on every device");
  BenchArgs ba;
  ba.python = defaults.python;
  ba.peers_script = defaults.peers_script.empty() ? kiln::bench::source_tree_peers_script()
                                                  : defaults.peers_script;
  bench->add_option("--suite", ba.suite, "demo (seconds), quick (under 2 minutes) or standard")
      ->check(CLI::IsMember({"demo", "quick", "standard"}));
  bench->add_option("--devices", ba.devices, "all, or a list such as cpu,reference");
  bench->add_option("--json", ba.json, "write the results as JSON (schema kiln-bench/1)");
  bench->add_option("--html", ba.html, "write a self-contained HTML report with charts");
  bench->add_option("--seconds", ba.seconds, "time per case, device and mode (default: suite's)");
  bench->add_flag("--peers", ba.peers, "also time NumPy, JAX and MLX on the same cases");
  bench->add_option("--python", ba.python, "the Python --peers runs (default " + ba.python + ")");
  auto* tune = app.add_subcommand("tune", "measure the host-dependent choices again (cpu matmul)");
  bool tune_show = false;
  tune->add_flag("--show", tune_show, "print the table as it is, measuring nothing");
  auto* inspect = app.add_subcommand("inspect", "print an AOT artifact (its text form)");
  std::string art;
  bool dot = false;
  inspect->add_option("artifact", art, "a file Executable::save wrote")->required();
  inspect->add_flag("--dot", dot, "the task DAG for Graphviz, devices as colours");
  auto* run = app.add_subcommand("run", "run an AOT artifact on .npy inputs");
  std::string run_art, run_device, run_trace;
  std::vector<std::string> run_in, run_out, run_remap;
  run->add_option("artifact", run_art,
                  "a file Executable::save wrote ({rank}: this rank's part of a program placed "
                  "on ranks)")
      ->required();
  run->add_option("-i,--input", run_in,
                  "an input .npy, in argument order ({rank}, {size}, {task}: this rank's, the "
                  "number of ranks, the array task's; from MPI, else Slurm's SLURM_PROCID, "
                  "SLURM_NTASKS, SLURM_ARRAY_TASK_ID)");
  run->add_option("-o,--output", run_out,
                  "where each output goes (.npy; {rank}, {size}, {task} as -i)");
  run->add_option("--device", run_device, "the device for work not placed by the artifact");
  run->add_option("--profile", run_trace, "write a Chrome trace of the tasks run");
  run->add_option("--remap", run_remap, "FROM=TO: run the artifact's FROM work on TO");
  double run_timeout = 0;
  run->add_option("--timeout", run_timeout,
                  "seconds; past them the run gives up waiting, says for what, and exits 124");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    std::cout.flush();
    return rc;
  }
  // Whatever printed it, the output is out before returning (the caller may be Python, whose
  // own buffered stdout writes to the same descriptor).
  struct Flush {
    ~Flush() {
      std::cout.flush();
      std::fflush(stdout);
    }
  } flush;
  try {
    if (*devices) return cmd_devices();
    if (*demo) return cmd_demo(trace);
    if (*bench) return cmd_bench(ba);
    if (*tune) return cmd_tune(tune_show);
    if (*inspect) return cmd_inspect(art, dot);
    if (*run)
      return cmd_run(run_art, run_in, run_out, run_device, run_trace, run_remap, run_timeout);
  } catch (const kiln::Error& e) {
    std::cerr << "kiln: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
