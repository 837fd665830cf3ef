// The compute-shader layout of C-family kernels: one entry per kernel, a grid-stride loop over
// the domain's points for element-wise kernels (vector steps where the dialect reads and writes
// the buffers as vectors, then a scalar tail), and for reductions a workgroup per kept point: a
// strided loop over the reduced extent, then a subgroup stage where the device has subgroup
// arithmetic and shuffles (else a tree in shared memory), and invocation 0 combines the partials
// in order, runs the epilogue and stores. GLSL uses it; a WGSL dialect could.
#pragma once

#include <string>

#include "backends/kernel_ir.h"
#include "backends/source/dialect.h"

namespace kiln::source {

// A language's words for the layout.
struct ShaderWords {
  std::string main;        // opens the entry point ("void main() {")
  std::string index;       // the 32-bit index type, also its conversion: index(x)
  std::string local_id;    // this invocation's index in its workgroup (unsigned)
  std::string num_groups;  // how many workgroups the launch has (unsigned)
  std::string group_id;    // this workgroup's linear index (index type)
  std::string shared;      // before a workgroup-shared array ("shared ")
  std::string barrier;     // a workgroup barrier on shared memory
  std::string subgroup_invocation, subgroup_id, num_subgroups, subgroup_size;
  std::string subgroup_add, subgroup_mul, subgroup_or, subgroup_and, shuffle_xor;
};

class ShaderDialect : public Dialect {
 public:
  virtual const ShaderWords& words() const = 0;
  // Called once the emitter is attached, before anything is written (checks, plans).
  virtual void prepare() {}
  // An integer of dtype d computed wider than d, brought back to d's range.
  virtual std::string wrap(Dtype d, const std::string& x) const = 0;
  // Vector access of element-wise kernels: points per step (0: none), the declarations that
  // open a step, the lane being written (-1: the scalar tail), the writes that close a step.
  virtual int vector_step() const { return 0; }
  virtual std::string vector_begin() { return ""; }
  virtual void set_lane(int lane) { (void)lane; }
  virtual std::string vector_end() { return ""; }
};

struct ShaderOptions {
  int local_size = 64;
  bool subgroups = false;  // reductions combine within subgroups first
  bool float64 = false;    // float sums and products accumulate in double
  // Vector steps of element-wise kernels go to workgroups in contiguous blocks, and each
  // subgroup walks one contiguous run of its block, lane by lane (instead of a grid-stride
  // loop). On a CPU device, whose subgroup is its SIMD width, each run's accesses then advance
  // sequentially, which the hardware prefetches; grid-stride steps were 25% slower on lavapipe.
  bool subgroup_runs = false;
};

struct ShaderBody {
  std::string text;                // helper functions, shared arrays and the entry point
  bool uses_subgroups = false;     // subgroup arithmetic and shuffles
  bool uses_subgroup_ids = false;  // subgroup ids and sizes only (subgroup_runs)
};

ShaderBody shader_body(const Kernel& k, ShaderDialect& d, const ShaderOptions& o);

}  // namespace kiln::source
