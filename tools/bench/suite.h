// The `kiln bench` suite: the cases (what users run: gelu, norms, softmax, an MLP block, a small
// attention, reductions, random draws, dispatch and first-call latency, scheduler DAG shapes),
// timed eager and compiled on every device asked for, beside the bounds measured in the same run
// (the machine's copy bandwidth and FMA peak).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::bench {

// What a case's time is compared with.
enum class Bound {
  Bandwidth,  // bytes moved / copy bandwidth
  Compute,    // flops / FMA peak
  None,       // a latency: no bound
};

struct Case {
  std::string name;   // "gelu"
  std::string shape;  // "1024x1024", for people
  double bytes = 0;   // what a perfect implementation reads and writes per call
  double flops = 0;
  Bound bound = Bound::Bandwidth;
  // Which bound the report uses and what it leaves out, for people (JSON and HTML); empty: the
  // plain words for `bound` (bound_note()).
  std::string bound_note;
  bool eager = true, compiled = true;
  std::function<std::vector<Array>(const Device&)> inputs;  // evaluated, on the device
  Fn fn;
  // Latency cases time something other than a call of fn (first calls): this replaces the
  // timing loop and returns one sample in ms.
  std::function<double(const Device&, int rep)> sample;
  int tasks = 0;              // for DAG cases: tasks per call (the report shows time per task)
  std::vector<int64_t> dims;  // the sizes peers.py builds the same case from; empty: no peers
};

struct Result {
  std::string name, shape, device, mode;  // mode: "eager" or "compiled"
  int reps = 0;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  double gbps = 0, gflops = 0;
  Bound bound = Bound::None;
  double fraction = 0;     // of the bound, from the median
  double bound_value = 0;  // GB/s (copy of the case's bytes) or GFLOP/s (FMA peak)
  std::string bound_note;  // the case's, or the plain words for its bound
  int tasks = 0;
  std::string error;  // set when the case raised on this device
};

struct Machine {
  std::string cpu;
  int threads = 0;
  double copy_gbps = 0;        // measured: parallel copy of 256 MB
  double peak_gflops_f32 = 0;  // measured: FMA loop on every thread (fma_peak.h)
  std::string peak_isa;        // the vectors that loop used: "AVX-512", "AVX2", "SSE2"
};

struct Options {
  std::string suite = "quick";  // demo | quick | standard
  std::vector<Device> devices;  // every available one when empty
  double seconds_per_case = 0;  // per case, device and mode; 0: the suite's default
};

// The bounds, measured now (peak.cpp).
Machine measure_machine();
// GB/s (read + written) of a parallel copy moving `bytes` in total: a case whose data fits in
// the caches is held to the cache's speed, not DRAM's.
double copy_gbps_at(double bytes, int threads);
std::vector<Case> suite(const std::string& name);
// Runs every case on every device, eager and compiled; `progress` is told before each run.
std::vector<Result> run(
    const std::vector<Case>& cases, const Options& options, const Machine& m,
    const std::function<void(size_t done, size_t total, const std::string& what)>& progress);

const char* bound_name(Bound b);
// What the report says about a case's bound: its own note, or the plain words for its kind.
std::string bound_note(const Case& c);

}  // namespace kiln::bench
