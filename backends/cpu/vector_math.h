// Float32 transcendental functions emitted inline as straight-line LLVM IR (selects, no branches,
// no calls), so LLVM's loop vectoriser widens them with the loop; a scalar libm call per element
// would make a fused kernel ~20x slower. Float64 kernels call libm instead (bitwise the oracle).
//
// Each function takes and returns a scalar `float` llvm::Value (pow_f32: two). Polynomials use
// llvm.fmuladd, so they fuse on FMA hosts. erf trades accuracy (5 ulp, fit error 0.5 ulp plus
// float rounding of P and Q) for speed: ~13 vector ops, so a fused gelu stays near the
// bandwidth bound instead of being compute-bound; the bounds below were measured on this (AVX-512)
// host by tests/test_cpu_backend.cpp (VectorMath.*) against libm in double rounded to float, over a
// dense sweep plus edge cases (0, -0, +-inf, NaN, denormals, huge arguments):
//
//   function   algorithm                                                   max error
//   exp        Cody-Waite by ln2, degree-7 Taylor, 2-step 2^n scaling      1 ulp
//   log        fdlibm-style s = f/(2+f) series on [sqrt(.5), sqrt(2))      1 ulp
//   erf        x*P5(x^2)/Q5(x^2) on |x|<=4 (rational least-squares fit)     5 ulp
//   tanh       |x|<0.625: x+x^3*P5(x^2); else 1-2/(exp(2|x|)+1)            1 ulp
//   sigmoid    1/(1+exp(-x))                                               2 ulp
//   sin, cos   |x|*2/pi mod 4 exactly (4-part 2/pi, FMA), Taylor, |r|<=pi/4  2 ulp
//   pow        computed in double: exp2(y*log2|x|) with in-house series    1 ulp
//   sqrt       llvm.sqrt (correctly rounded); rsqrt: 1/sqrt in double      0 ulp (exact)
// Denormal results (exp of x < -87.3) may be off by one denormal step (double rounding).
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace kiln::cpu::vmath {

llvm::Value* exp_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* log_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* erf_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* tanh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* sigmoid_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* sin_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* cos_f32(llvm::IRBuilderBase& b, llvm::Value* x);
// cos of a double argument, rounded to float (random normals: cos(2*pi*u) with u exact).
llvm::Value* cos_f32_of_f64(llvm::IRBuilderBase& b, llvm::Value* xd);
llvm::Value* pow_f32(llvm::IRBuilderBase& b, llvm::Value* x, llvm::Value* y);
// 1/sqrt(x) computed in double and rounded once, like the oracle.
llvm::Value* rsqrt_f32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace kiln::cpu::vmath
