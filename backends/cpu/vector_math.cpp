#include "backends/cpu/vector_math.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace kiln::cpu::vmath {

namespace {

using llvm::IRBuilderBase;
using llvm::Value;

// Small helpers so the formulas below read like the maths. Everything is scalar IR; the loop
// vectoriser widens it.
struct M {
  IRBuilderBase& b;

  llvm::Type* f32() { return b.getFloatTy(); }
  llvm::Type* f64() { return b.getDoubleTy(); }
  Value* cf(double v) { return llvm::ConstantFP::get(f32(), v); }
  Value* cd(double v) { return llvm::ConstantFP::get(f64(), v); }
  Value* c(llvm::Type* t, double v) { return llvm::ConstantFP::get(t, v); }

  Value* intr(llvm::Intrinsic::ID id, Value* x) { return b.CreateUnaryIntrinsic(id, x); }
  Value* intr(llvm::Intrinsic::ID id, Value* x, Value* y) {
    return b.CreateBinaryIntrinsic(id, x, y);
  }
  // a*m + c, fused where the host has FMA (llvm.fmuladd lets the backend choose).
  Value* mad(Value* a, Value* m, Value* c) {
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {a->getType()}, {a, m, c});
  }
  // A true fused multiply-add (the range reductions need the exact product).
  Value* fma(Value* a, Value* m, Value* c) {
    return b.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, m, c});
  }
  // Horner's rule; coefficients from the highest degree down.
  Value* poly(Value* x, std::initializer_list<double> coeffs) {
    auto it = coeffs.begin();
    Value* acc = c(x->getType(), *it++);
    for (; it != coeffs.end(); ++it) acc = mad(acc, x, c(x->getType(), *it));
    return acc;
  }
  Value* isnan(Value* x) { return b.CreateFCmpUNO(x, x); }
  Value* sel(Value* cond, Value* t, Value* f) { return b.CreateSelect(cond, t, f); }
  Value* fabs(Value* x) { return intr(llvm::Intrinsic::fabs, x); }
  Value* copysign(Value* mag, Value* sign) { return intr(llvm::Intrinsic::copysign, mag, sign); }
  Value* minnum(Value* x, Value* y) { return intr(llvm::Intrinsic::minnum, x, y); }
  Value* maxnum(Value* x, Value* y) { return intr(llvm::Intrinsic::maxnum, x, y); }
  Value* rint(Value* x) { return intr(llvm::Intrinsic::rint, x); }
};

// 2^n for an integer-valued float n in [-150, 128], as two factors so that neither overflows
// nor goes denormal; multiplying by both lets results reach the denormal range gracefully.
Value* scale_pow2_f32(M& m, Value* p, Value* n) {
  IRBuilderBase& b = m.b;
  Value* ni = b.CreateFPToSI(n, b.getInt32Ty());
  Value* n1 = b.CreateAShr(ni, 1);
  Value* n2 = b.CreateSub(ni, n1);
  auto factor = [&](Value* e) {
    Value* bits = b.CreateShl(b.CreateAdd(e, b.getInt32(127)), 23);
    return b.CreateBitCast(bits, m.f32());
  };
  return b.CreateFMul(b.CreateFMul(p, factor(n1)), factor(n2));
}

// The same for doubles with n in [-1100, 1100].
Value* scale_pow2_f64(M& m, Value* p, Value* n) {
  IRBuilderBase& b = m.b;
  Value* ni = b.CreateFPToSI(n, b.getInt64Ty());
  Value* n1 = b.CreateAShr(ni, 1);
  Value* n2 = b.CreateSub(ni, n1);
  auto factor = [&](Value* e) {
    Value* bits = b.CreateShl(b.CreateAdd(e, b.getInt64(1023)), 52);
    return b.CreateBitCast(bits, m.f64());
  };
  return b.CreateFMul(b.CreateFMul(p, factor(n1)), factor(n2));
}

// sin(r) and cos(r) for |r| <= pi/4 (Taylor to r^9 and r^10: truncation < 3e-9 relative).
Value* sin_poly(M& m, Value* r) {
  Value* z = m.b.CreateFMul(r, r);
  Value* p = m.poly(z, {1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6});
  return m.mad(m.b.CreateFMul(r, z), p, r);
}
Value* cos_poly(M& m, Value* r) {
  Value* z = m.b.CreateFMul(r, r);
  Value* p = m.poly(z, {-1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24});
  Value* z2 = m.b.CreateFMul(z, z);
  return m.mad(z2, p, m.mad(z, m.cf(-0.5), m.cf(1.0)));
}

// v - 4 * rint(v / 4): v modulo 4 in [-2, 2], exact (every step is exact in double).
Value* mod4(M& m, Value* v) {
  Value* k = m.rint(m.b.CreateFMul(v, m.cd(0.25)));
  return m.fma(m.cd(-4), k, v);
}

// sin (cos_shift = 0) or cos (cos_shift = 1) of a double argument, result in float.
// Range reduction for every finite argument: |x| * 2/pi modulo 4 (quarter turns), with 2/pi
// split in four doubles (~210 bits) and each product split exactly into hi + lo by an FMA, so
// each term can be reduced modulo 4 exactly before summing: no Payne-Hanek table, no loss for
// huge arguments (|x| up to 2^128 keeps ~2^-80 absolute accuracy in quarter turns).
Value* sincos_of_f64(M& m, Value* xd, int cos_shift) {
  IRBuilderBase& b = m.b;
  Value* finite = b.CreateFCmpOLT(m.fabs(xd), m.cd(INFINITY));
  Value* ax = m.fabs(m.sel(finite, xd, m.cd(0)));
  Value* f = m.cd(0);
  for (double c : {0.6366197723675814, -3.935735335036497e-17, -2.1442872565786008e-33,
                   1.6107127853188224e-49}) {
    Value* hi = b.CreateFMul(ax, m.cd(c));
    Value* lo = m.fma(ax, m.cd(c), b.CreateFNeg(hi));
    f = b.CreateFAdd(f, b.CreateFAdd(mod4(m, hi), mod4(m, lo)));
  }
  f = mod4(m, f);
  Value* n = m.rint(f);
  Value* r = b.CreateFMul(b.CreateFSub(f, n), m.cd(1.5707963267948966));
  Value* q = b.CreateAdd(b.CreateFPToSI(n, b.getInt32Ty()), b.getInt32(cos_shift));
  Value* rf = b.CreateFPTrunc(r, m.f32());
  Value* swap = b.CreateICmpNE(b.CreateAnd(q, 1), b.getInt32(0));
  Value* neg = b.CreateICmpNE(b.CreateAnd(q, 2), b.getInt32(0));
  if (cos_shift == 0)  // sin is odd: reduce |x|, then flip for negative x
    neg = b.CreateXor(neg, b.CreateFCmpOLT(xd, m.cd(0)));
  Value* v = m.sel(swap, cos_poly(m, rf), sin_poly(m, rf));
  v = m.sel(neg, b.CreateFNeg(v), v);
  return m.sel(finite, v, m.cf(NAN));
}

// ln(a) for a positive finite double a (from a float, so never denormal), series in
// s = f/(2+f) to s^15: relative error ~1e-16. a == 0 and a == inf are the caller's business.
Value* log_f64_core(M& m, Value* a) {
  IRBuilderBase& b = m.b;
  const uint64_t kSqrtHalf = 0x3fe6a09e667f3bcdULL;
  Value* ix = b.CreateSub(b.CreateBitCast(a, b.getInt64Ty()), b.getInt64(kSqrtHalf));
  Value* k = b.CreateAShr(ix, 52);
  Value* mb = b.CreateAdd(b.CreateAnd(ix, b.getInt64(0xfffffffffffffULL)), b.getInt64(kSqrtHalf));
  Value* f = b.CreateFSub(b.CreateBitCast(mb, m.f64()), m.cd(1));
  Value* s = b.CreateFDiv(f, b.CreateFAdd(m.cd(2), f));
  Value* z = b.CreateFMul(s, s);
  Value* R = b.CreateFMul(
      z, m.poly(z, {2.0 / 15, 2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3}));
  Value* hfsq = b.CreateFMul(m.cd(0.5), b.CreateFMul(f, f));
  Value* l1p = b.CreateFAdd(b.CreateFSub(f, hfsq), b.CreateFMul(s, b.CreateFAdd(hfsq, R)));
  Value* kf = b.CreateSIToFP(k, m.f64());
  return m.mad(kf, m.cd(0.6931471805599453), m.mad(kf, m.cd(2.3190468138462996e-17), l1p));
}

// 2^t in double for any t (clamped so the result over/underflows naturally), ~1e-15 relative.
Value* exp2_f64(M& m, Value* t) {
  IRBuilderBase& b = m.b;
  Value* tc = m.sel(m.isnan(t), m.cd(0), m.minnum(m.maxnum(t, m.cd(-1100)), m.cd(1100)));
  Value* n = m.rint(tc);
  Value* w = b.CreateFMul(b.CreateFSub(tc, n), m.cd(0.6931471805599453));
  Value* p = m.poly(w, {1.0 / 479001600, 1.0 / 39916800, 1.0 / 3628800, 1.0 / 362880, 1.0 / 40320,
                        1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0});
  return scale_pow2_f64(m, p, n);
}

}  // namespace

Value* exp_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  Value* xs = m.sel(m.isnan(x), m.cf(0), m.minnum(m.maxnum(x, m.cf(-104)), m.cf(89)));
  Value* n = m.rint(b.CreateFMul(xs, m.cf(1.4426950408889634)));
  Value* r = m.mad(n, m.cf(-0.693359375), xs);
  r = m.mad(n, m.cf(0.00021219444005469057), r);
  Value* p = m.poly(r, {1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0});
  return m.sel(m.isnan(x), x, scale_pow2_f32(m, p, n));
}

Value* log_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  // Denormals are scaled into the normal range first (exponent corrected by -23).
  Value* tiny = b.CreateFCmpOLT(x, m.cf(0x1p-126));
  Value* xs = m.sel(tiny, b.CreateFMul(x, m.cf(0x1p23)), x);
  const uint32_t kSqrtHalf = 0x3f3504f3;
  Value* ix = b.CreateSub(b.CreateBitCast(xs, b.getInt32Ty()), b.getInt32(kSqrtHalf));
  Value* k = b.CreateAdd(b.CreateAShr(ix, 23), m.sel(tiny, b.getInt32(-23), b.getInt32(0)));
  Value* mb = b.CreateAdd(b.CreateAnd(ix, b.getInt32(0x7fffff)), b.getInt32(kSqrtHalf));
  Value* f = b.CreateFSub(b.CreateBitCast(mb, m.f32()), m.cf(1));  // exact (Sterbenz)
  Value* s = b.CreateFDiv(f, b.CreateFAdd(m.cf(2), f));
  Value* z = b.CreateFMul(s, s);
  Value* R = b.CreateFMul(z, m.poly(z, {2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3}));
  Value* hfsq = b.CreateFMul(m.cf(0.5), b.CreateFMul(f, f));
  Value* kf = b.CreateSIToFP(k, m.f32());
  Value* lo = m.mad(kf, m.cf(1.4286068203094173e-06), b.CreateFMul(s, b.CreateFAdd(hfsq, R)));
  Value* v = m.mad(kf, m.cf(0.693145751953125), b.CreateFAdd(b.CreateFSub(f, hfsq), lo));
  v = m.sel(b.CreateFCmpOEQ(x, m.cf(INFINITY)), x, v);
  v = m.sel(b.CreateFCmpOEQ(x, m.cf(0)), m.cf(-INFINITY), v);
  v = m.sel(b.CreateFCmpOLT(x, m.cf(0)), m.cf(NAN), v);
  return m.sel(m.isnan(x), x, v);
}

// erf(x) = x * P(x^2) / Q(x^2) on [-4, 4], a rational fit (relative error 2.8e-8) that
// needs no exp and no second branch: ~13 vector ops. Beyond |x| = 4, erf rounds to +-1; the
// clamp is written with compares so that NaN passes through.
Value* erf_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  Value* xc = m.sel(b.CreateFCmpOGT(x, m.cf(4)), m.cf(4), x);
  xc = m.sel(b.CreateFCmpOLT(xc, m.cf(-4)), m.cf(-4), xc);
  Value* z = b.CreateFMul(xc, xc);
  Value* p = m.poly(z, {2.0015095640223045e-6, 0.00028283157593563815, 0.0038033077684824308,
                        0.052852256547350698, 0.19167024685191649, 1.1283791590578851});
  Value* q = m.poly(z, {3.7483294648092395e-5, 0.0011663487838495679, 0.015045922524155666,
                        0.11457382724376274, 0.50319622937315642, 1.0});
  return b.CreateFMul(xc, b.CreateFDiv(p, q));
}

Value* tanh_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  Value* a = m.fabs(x);
  Value* z = b.CreateFMul(x, x);
  // |x| < 0.625: x + x^3 * P5(x^2) (Chebyshev fit of (tanh(x)/x - 1)/x^2, error 1.6e-9).
  Value* p = m.poly(z, {0.0022927448161781423, -0.008343945515839152, 0.02176891865102821,
                        -0.053959259577204543, 0.13333303556915742, -0.33333333172140362});
  Value* small = m.mad(b.CreateFMul(x, z), p, x);
  // Otherwise 1 - 2/(e^{2|x|} + 1); |x| is capped at 10 where tanh rounds to 1.
  Value* e = exp_f32(b, b.CreateFMul(m.cf(2), m.minnum(a, m.cf(10))));
  Value* big = b.CreateFSub(m.cf(1), b.CreateFDiv(m.cf(2), b.CreateFAdd(e, m.cf(1))));
  Value* v = m.sel(b.CreateFCmpOLT(a, m.cf(0.625)), small, m.copysign(big, x));
  return m.sel(m.isnan(x), x, v);
}

Value* sigmoid_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  Value* e = exp_f32(b, b.CreateFNeg(x));
  return b.CreateFDiv(m.cf(1), b.CreateFAdd(m.cf(1), e));
}

Value* sin_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  return sincos_of_f64(m, b.CreateFPExt(x, m.f64()), 0);
}

Value* cos_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  return sincos_of_f64(m, b.CreateFPExt(x, m.f64()), 1);
}

Value* cos_f32_of_f64(IRBuilderBase& b, Value* xd) {
  M m{b};
  return sincos_of_f64(m, xd, 1);
}

Value* rsqrt_f32(IRBuilderBase& b, Value* x) {
  M m{b};
  Value* s = m.intr(llvm::Intrinsic::sqrt, b.CreateFPExt(x, m.f64()));
  return b.CreateFPTrunc(b.CreateFDiv(m.cd(1), s), m.f32());
}

// pow in double (so y*log2|x| keeps ~50 bits), then the C99 special cases as selects.
Value* pow_f32(IRBuilderBase& b, Value* x, Value* y) {
  M m{b};
  Value* xd = b.CreateFPExt(x, m.f64());
  Value* yd = b.CreateFPExt(y, m.f64());
  Value* ax = m.fabs(xd);
  Value* l = b.CreateFMul(log_f64_core(m, ax), m.cd(1.4426950408889634));
  l = m.sel(b.CreateFCmpOEQ(ax, m.cd(0)), m.cd(-INFINITY), l);
  l = m.sel(b.CreateFCmpOEQ(ax, m.cd(INFINITY)), m.cd(INFINITY), l);
  Value* r = exp2_f64(m, b.CreateFMul(yd, l));
  // y*log2|x| is NaN for y = 0 with |x| in {0, inf} and for |x| = 1 with y = inf; both are
  // fixed by the special cases below. An infinite t clamps to +-1100 and over/underflows.
  Value* t = b.CreateFMul(yd, l);
  r = m.sel(b.CreateFCmpOEQ(t, m.cd(INFINITY)), m.cd(INFINITY), r);
  r = m.sel(b.CreateFCmpOEQ(t, m.cd(-INFINITY)), m.cd(0), r);
  Value* y_int = b.CreateFCmpOEQ(m.intr(llvm::Intrinsic::trunc, yd), yd);
  Value* half = b.CreateFMul(yd, m.cd(0.5));
  Value* y_odd = b.CreateAnd(y_int, b.CreateFCmpONE(m.intr(llvm::Intrinsic::trunc, half), half));
  Value* x_neg = b.CreateICmpSLT(b.CreateBitCast(x, b.getInt32Ty()), b.getInt32(0));
  r = m.sel(b.CreateAnd(x_neg, y_odd), b.CreateFNeg(r), r);
  Value* x_finite = b.CreateFCmpOLT(ax, m.cd(INFINITY));
  Value* neg_nonint =
      b.CreateAnd(b.CreateFCmpOLT(xd, m.cd(0)), b.CreateAnd(x_finite, b.CreateNot(y_int)));
  r = m.sel(neg_nonint, m.cd(NAN), r);
  r = m.sel(b.CreateOr(m.isnan(xd), m.isnan(yd)), m.cd(NAN), r);
  Value* y_inf = b.CreateFCmpOEQ(m.fabs(yd), m.cd(INFINITY));
  r = m.sel(b.CreateAnd(b.CreateFCmpOEQ(xd, m.cd(-1)), y_inf), m.cd(1), r);
  r = m.sel(b.CreateOr(b.CreateFCmpOEQ(yd, m.cd(0)), b.CreateFCmpOEQ(xd, m.cd(1))), m.cd(1), r);
  return b.CreateFPTrunc(r, m.f32());
}

}  // namespace kiln::cpu::vmath
