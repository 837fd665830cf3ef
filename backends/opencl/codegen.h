// Kernel IR -> OpenCL C 1.2 source: the shared work-group layout (backends/source/
// workgroup_layout.h) written in the OpenCL C dialect (dialect_opencl.h); this file checks the
// device's capabilities. One program per Kernel; its entry points share one argument
// list: the kernel's buffers (b0..), every launch word as a `long` (p0..), the float launch
// scalars converted on the host (c<value>..), and for reductions three __local arrays sized by
// the launch's work-group size.
//  - Element-wise kernels: entry `kiln_map`, a work-item per element on GPUs (four through
//    float4 where the kernel is 1-D and aligned: dialect_opencl.h's map_lanes) and on CPU
//    devices contiguous runs in segments along the last axis, 16 lanes at a time in float16
//    where the loads allow (row folds too).
//  - Reductions: entry `kiln_reduce`, one work-group per output element (grid-stride over
//    outputs), each work-item accumulating a strided share of the reduced extent, then a tree
//    in local memory; work-item 0 runs the epilogue and stores.
//  - Full reductions (no kept axes) also get `kiln_part` (each group reduces one contiguous
//    chunk into a partial in a scratch buffer) and `kiln_final` (one group combines the
//    partials, then the epilogue): the split scheme, so a long reduction uses every compute
//    unit.
// Semantics are scalar_ops.h's (see README "opencl" for where OpenCL's math differs):
// wrapping integer arithmetic through unsigned types, saturating float->int casts (NaN -> 0),
// NaN-propagating max/min, first-max argmax, float16/bfloat16 as storage types with the
// rounding of graph/float16.h written out in integer code, counter-based random numbers of
// graph/random.h. No FP contraction; division and sqrt correctly rounded where the device
// supports it. float32 sums and products accumulate in double on devices with fp64.
#pragma once

#include <string>
#include <vector>

#include "backends/kernel_ir.h"

namespace kiln::opencl {

struct DeviceCaps {
  bool fp64 = true;
  bool int64 = true;
  // A CPU device (CL_DEVICE_TYPE_CPU) runs a work-group's items one after another: each item
  // then reduces one contiguous run (cache lines and vector loads); GPUs interleave items so
  // that neighbours read neighbouring elements (coalesced).
  bool cpu = false;
};

// A float launch scalar passed as its own argument (the host converts the launch word).
struct ScalarArg {
  int param;    // the launch word it comes from
  Dtype dtype;  // float32 / float16 / bfloat16 are passed as float, float64 as double
};

struct Generated {
  std::string source;
  int num_params = 0;              // long arguments p0..p{n-1}
  std::vector<ScalarArg> scalars;  // after the params
  bool reduction = false;
  bool split = false;   // kiln_part / kiln_final exist
  size_t acc_size = 0;  // bytes of one accumulator (the __local and scratch element)
  int map_points = 1;   // points per work-item of kiln_map (4: a GPU's float4 form)
};

// Throws kiln::Error when the kernel needs what the device lacks (float64 without cl_khr_fp64,
// int64 without 64-bit integers), naming the extension.
Generated generate(const Kernel& k, const DeviceCaps& caps, const std::string& device_name);

}  // namespace kiln::opencl
