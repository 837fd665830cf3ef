// Kernel IR -> LLVM IR. Each kernel becomes one function
//   void <symbol>(void* const* buffers, const int64_t* params, int64_t begin, int64_t end)
// that runs the points [begin, end) of the flattened kept (outer) domain, so the host can split
// a launch into chunks. Loops are emitted innermost-last with the innermost domain axis as the
// inner loop, in the simple shape LLVM's loop vectoriser widens (verified: <16 x float>; on
// AVX-512 hosts functions ask for 512-bit vectors, measured ~10% faster than LLVM's 256-bit
// default on the fused gelu). Column reductions (strided reduced axes, contiguous kept axis)
// instead walk tiles of kept points with the tile loop innermost.
//
// Numerics (the policy the differential tests' tolerances follow):
//  - No FMA contraction and no fast-math on element-wise arithmetic: + - * / sqrt, casts,
//    comparisons, min/max and integer ops are bitwise equal to scalar_ops.h.
//  - float32 transcendental functions are the inline approximations of vector_math.h (<= 2 ulp);
//    float64 ones call libm, as the oracle does.
//  - Float sum/prod reductions accumulate in double (as the oracle) but carry the `reassoc` flag
//    so the vectoriser may reorder them: results differ from the oracle by rounding only.
//  - Float max/min reductions propagate NaN; vectorised ones may return either zero of a
//    -0/+0 tie. Argmax is exact (first maximum, NaN wins) and scalar.
#pragma once

#include <memory>
#include <string>

#include "backends/cpu/codegen_options.h"
#include "backends/kernel_ir.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace kiln::cpu {

struct CodegenTarget {
  std::string triple, cpu, features;  // stamped on the function so cost models see the host
};

// Builds the module holding `symbol`. The kernel must already be valid (Kernel::validate()).
std::unique_ptr<llvm::Module> generate_kernel(const Kernel& k, const std::string& symbol,
                                              const CodegenTarget& target,
                                              const CodegenOptions& options,
                                              llvm::LLVMContext& ctx);

}  // namespace kiln::cpu
