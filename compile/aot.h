// Ahead of time, as JAX's stages: `f.lower(args)` traces and lowers without running anything,
// `Lowered::as_text()` shows the graph, the plan with its placements and every kernel, and
// `Lowered::compile()` builds the kernels into an Executable. An Executable runs the very plan a
// direct call of `f` runs (the same cache entry), so placements and results cannot differ
// between the two paths, whichever way compute_on and compile are nested.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compile/compile.h"

namespace kiln {

struct AotState;

// Work per device label: "reference:0", or "caller" for lanes that follow the caller's stream
// (resolved at call time).
struct CostAnalysis {
  struct Device {
    double flops = 0;  // element-wise operations and reductions count 1 per element; matmul 2mnk
    double bytes_read = 0, bytes_written = 0;
    int kernels = 0, copies = 0, library_calls = 0;
  };
  std::map<std::string, Device> devices;
  Device total;
  std::string str() const;
};

// What one call holds while it runs: every buffer of a plan is bound before its first task,
// so the call's peak is the sum of these fields (over devices), argument copies counted only
// where they do not alias.
struct MemoryAnalysis {
  struct Device {
    size_t argument_bytes = 0;  // call inputs, captured state and captured constants
    size_t output_bytes = 0;    // outputs in memory of their own
    // Outputs written into a captured state input's memory (buffer donation): no new memory
    // when the caller holds no other reference to that input, as in a training loop.
    size_t donated_bytes = 0;
    // Copies of arguments onto a lane: the executor makes them aliases of the argument (no
    // memory) when the lane's device can read it (a cpu array on a cpu lane), else real copies.
    size_t argument_copy_bytes = 0;
    size_t temp_bytes = 0;  // other temporaries (storage shared by disjoint lifetimes)
  };
  std::map<std::string, Device> devices;
  // The call's peak when the argument copies alias and the donations happen: arguments,
  // outputs of their own and temporaries, summed over devices.
  size_t peak_bytes() const;
  std::string str() const;
};

// Device names in an artifact mapped to devices of this machine: {{"opencl:0", "cpu:0"}}.
using DeviceMap = std::map<std::string, std::string>;

class Executable {
 public:
  // Runs with arguments of the lowered signature (same count and dtypes; same shapes, or same
  // ranks for a shapeless function); other arguments raise kiln::Error. One loaded from an
  // artifact runs only the shapes it was saved with, shapeless or not (the artifact holds one
  // lowering); other shapes raise naming them and the saved ones. Captured `inputs` and
  // `outputs` state is read and written as by a direct call.
  std::vector<Array> operator()(const std::vector<Array>& args) const;
  std::string as_text() const;
  MemoryAnalysis memory_analysis() const;
  // Placement on ranks: the rank that computes each output when that is another rank (reading
  // it here raises naming it), else -1.
  std::vector<int> output_ranks() const;

  // The artifact: "kiln artifact 1", the text form, what running needs beyond it (task kinds,
  // launch values, captured constants) and a checksum. A function with captured inputs/outputs
  // state cannot be saved (kiln::Error). load(save(e)).as_text() == e.as_text().
  std::string artifact() const;
  void save(const std::string& path) const;
  // Runs in any process without the C++ function; kernels come from the disk cache or are built
  // from their IR. A truncated, damaged, edited or other-version file raises kiln::Error with
  // line:column and what was expected; work placed on a device this machine lacks raises unless
  // `remap` names a replacement.
  static Executable load(const std::string& path, const DeviceMap& remap = {});
  static Executable from_artifact(std::string_view text, const DeviceMap& remap = {});

 private:
  friend class Lowered;
  std::shared_ptr<const AotState> s_;
};

class Lowered {
 public:
  // Stable, human-readable text: signature, graph after passes (with placements, constants'
  // values and each node's axes and other params), the plan (lanes, slots, tasks), each task's
  // device, and every kernel's Kernel IR. DESIGN.md has the grammar.
  std::string as_text() const;
  CostAnalysis cost_analysis() const;
  // Builds every kernel for its lane's device (lanes that follow the caller resolve against the
  // calling thread's current stream now; other streams build on first use).
  Executable compile() const;

 private:
  friend class CompiledFunction;
  std::shared_ptr<const AotState> s_;
};

}  // namespace kiln
