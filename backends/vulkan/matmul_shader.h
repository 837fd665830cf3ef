// The GLSL of Kiln's Vulkan matmul: C[i] = A[i] @ B[i] for a batch of row-major operands, either
// of which may be stored transposed (A as k x m, B as n x k: MatmulArgs::trans_a/trans_b).
//  - On a GPU it is tiled 16 x 16 through shared memory (each workgroup stages a tile of A and
//    of B per step along k).
//  - On a CPU device (lavapipe) workgroup barriers are expensive (each invocation is a
//    coroutine) and every load whose address differs between invocations is a loop over SIMD
//    lanes. There each invocation keeps a 4-row block of outputs in registers: per step along k
//    it loads one 4-vector of B (neighbouring lanes, neighbouring columns) and four values of A
//    that are the same for the whole workgroup (a single load), for 16 multiply-adds.
// Operand offsets and sizes come from the params buffer: [m, n, k, batches, a_off..., b_off...,
// c_off...], then, by address, the device addresses of A, B and C. Push constants: the first
// batch of the dispatch (batches beyond the device's grid limit take several dispatches) and
// the range [k0, k1) of k it sums; with `accumulate` it adds C's stored value (a device with a
// loop limit, lavapipe, sums long k in parts, one dispatch each).
#pragma once

#include <cstdint>
#include <string>

#include "graph/dtype.h"

namespace kiln::vulkan {

struct MatmulForm {
  bool tiled = false;       // shared-memory tiles (GPUs)
  int width = 1;            // register-blocked form: columns per invocation, 1 or 4 (vectors of B
                            // and C: n and the B/C offsets divisible by 4)
  bool by_address = false;  // operands through buffer device addresses (beyond the binding
                            // range); only the params buffer is bound
  bool trans_a = false;     // A stored as its transpose (k x m)
  bool trans_b = false;     // B stored as its transpose (n x k); only with width 1
};

struct MatmulPush {
  uint32_t batch0 = 0;
  int32_t k0 = 0, k1 = 0;
  uint32_t accumulate = 0;
};

struct MatmulShader {
  std::string glsl;
  int cols_per_group = 16, rows_per_group = 16;  // the grid is ceil(n/cols) x ceil(m/rows)
  int bindings = 4;                              // storage buffers bound, the params last
};

// float32 or float64. Raises kiln::Error for other dtypes.
MatmulShader matmul_glsl(Dtype d, const MatmulForm& form);

}  // namespace kiln::vulkan
