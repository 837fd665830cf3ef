// Kernel IR -> GLSL 450 compute shader for the Vulkan backend. Element-wise kernels loop over
// points from their global invocation index (4 or 8 points per step with vector access where
// every buffer is contiguous; on a CPU device inputs through texel buffers, steps in subgroup
// runs); reductions give each kept point a workgroup (a strided loop over the
// reduced extent, then a subgroup stage or a tree in shared memory). Semantics follow
// backends/scalar_ops.h. The layout (glsl_codegen.cpp) is GLSL's own; every value, load and
// store is written by the shared emitter (backends/source/emitter.h) in the GLSL dialect
// (dialect_glsl.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/kernel_ir.h"

namespace kiln::vulkan {

// What the device offers that changes the generated code or makes a kernel impossible.
struct ShaderFeatures {
  bool float64 = false;  // shaderFloat64
  bool int64 = false;    // shaderInt64
  std::string device;    // "vulkan:0 (llvmpipe)", for error messages
  // Reach the kernel's buffers through 64-bit buffer device addresses read from the params
  // buffer (then bound alone, at binding 0) instead of one storage-buffer binding each: the
  // form of a kernel whose buffers exceed maxStorageBufferRange.
  bool by_address = false;
  // Contiguous element-wise kernels step 8 points through u64vec4 accesses instead of 4 through
  // vec4 (needs int64): for a CPU device, where each access is a loop over SIMD lanes.
  bool wide_access = false;
  // The vector-read inputs of those kernels (buffers they load and never store) are uniform
  // texel buffers of RGBA32UI texels (4 words each) read with texelFetch instead of storage
  // buffers: lavapipe fetches texels with gathers across its SIMD lanes, where a storage-buffer
  // load is a loop over the lanes with a branch per lane and component. Not with by_address.
  bool texel_loads = false;
  // Subgroup arithmetic and shuffles in compute shaders: reductions combine within subgroups
  // first (else a shared-memory tree over the workgroup).
  bool subgroups = false;
  // Vector steps of element-wise kernels in one contiguous run per subgroup
  // (source::ShaderOptions::subgroup_runs; for a CPU device), launched as at most
  // kRunGroups workgroups (Shader::max_groups). Taken where subgroup_size (0: no subgroup
  // operations) divides the workgroup size.
  bool subgroup_runs = false;
  uint32_t subgroup_size = 0;
  // maxPushConstantsSize: params (and addresses) that fit go in push constants instead of a
  // params buffer, so a launch binds only the kernel's own buffers. 0: always a params buffer.
  uint32_t push_bytes = 0;
  // Float controls to request (PhysicalInfo::keep_*): NaN/inf/signed zeros and denormals kept.
  bool keep_nan32 = false, keep_denorm32 = false, keep_nan64 = false, keep_denorm64 = false;
  // float32 (and float16/bfloat16, computed in float32) division and sqrt in double, rounded
  // once: a GPU driver's float32 ones may be 2.5 ulp off (Vulkan allows it; NVIDIA's are), the
  // rounded double is the correctly rounded float32 result the reference computes (53 bits
  // leave room for double rounding and for the driver's error in double). Off on CPU devices,
  // whose float32 division and sqrt are IEEE's, and without shaderFloat64.
  bool divide_in_double = false;
  // Workgroup size of element-wise kernels (reductions keep kLocalSize): a power of two.
  int map_local_size = 64;
  // Element-wise kernels may read and write contiguous buffers as vectors (wide_access says
  // how wide); false: one point per access (for measurements).
  bool vector_access = true;
};

// A float launch scalar the host converts before a launch: params slot `slot` receives the
// float32 bits of params[param] (a double's bits), so the shader needs no float64 to read it.
struct FloatSlot {
  int param = 0;
  int slot = 0;
};

// Workgroups of a kernel whose steps go in subgroup runs: on lavapipe (2 cores) gelu took the
// same time from 8 to 1024 groups, 9% more at 4096 and 25% more at 16384, where each run is
// short; 1024 leaves room to balance the work over many more cores.
constexpr int kRunGroups = 1024;

struct Shader {
  std::string glsl;
  int local_size = 0;
  bool per_group = false;  // one workgroup per kept point (reductions)
  int max_groups = 0;      // workgroups per launch at most (0: the backend's choice)
  int points_per_invocation = 1;
  int nparams = 0;  // words of the kernel's own params
  std::vector<FloatSlot> float_slots;
  // by_address: params word address_slot + b holds the device address of buffer b.
  int address_slot = -1;
  // Words (8 bytes each) of params pushed as push constants; 0: the params are a storage
  // buffer bound after the kernel's buffers (or alone, by_address).
  int push_words = 0;
  // Bindings of the shader's descriptor set: storage buffers, except those marked in `texel`
  // (one flag per binding, or empty), uniform texel buffers of RGBA32UI.
  int bindings = 0;
  std::vector<bool> texel;
};

// Raises kiln::Error naming the device feature a kernel needs and the device lacks.
Shader generate_glsl(const Kernel& k, const ShaderFeatures& f);

}  // namespace kiln::vulkan
