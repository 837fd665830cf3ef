// Element-wise functions and statistics built from the primitives: they run on every
// backend and fuse like any expression, and reverse mode, forward mode and vmap go through the
// primitives they are made of.
#include <cmath>
#include <numeric>

#include "graph/ops.h"

namespace kiln {

namespace {

Array as_float(const Array& a, const StreamOrDevice& s) {
  return a.dtype().is_float() ? a : astype(a, float_result_type(a.dtype()), s);
}

Array fill_like(const Array& a, double v, const StreamOrDevice& s) {
  return full({}, v, a.dtype(), s);
}

}  // namespace

Array log1p(const Array& a, StreamOrDevice s) {
  Array x = as_float(a, s);
  Array u = add(x, fill_like(x, 1, s), s);
  Array d = subtract(u, fill_like(x, 1, s), s);
  Array zero = equal(d, fill_like(x, 0, s), s);
  // log(u) * x / (u - 1) cancels the rounding of 1 + x (Goldberg); where u rounds to 1, x. The
  // division takes 1 there instead of 0: the branch where() drops still gets differentiated,
  // and x / 0 would make its zero cotangent 0 * inf = NaN.
  Array safe_d = where(zero, fill_like(x, 1, s), d, s);
  Array r = multiply(log(u, s), divide(x, safe_d, s), s);
  Array inf = fill_like(x, INFINITY, s);
  return where(zero, x, where(equal(x, inf, s), x, r, s), s);
}

Array expm1(const Array& a, StreamOrDevice s) {
  Array x = as_float(a, s);
  Array u = exp(x, s);
  Array one = fill_like(x, 1, s);
  Array um1 = subtract(u, one, s);
  Array inf = fill_like(x, INFINITY, s);
  Array at_one = equal(u, one, s), at_minus_one = equal(um1, fill_like(x, -1, s), s),
        at_inf = equal(u, inf, s);
  // (u - 1) * x / log(u) (Kahan); where u rounds to 1, x; where u - 1 is -1, -1. The division
  // reads log(u) only where that branch is taken (1 elsewhere): the branches where() drops are
  // differentiated too, and dividing by log(1) = 0 or log(0) would turn their zero cotangents
  // into NaN.
  Array taken = logical_not(logical_or(at_one, logical_or(at_minus_one, at_inf, s), s), s);
  Array safe_u = where(taken, u, fill_like(x, 2, s), s);
  Array r = divide(multiply(um1, x, s), log(safe_u, s), s);
  r = where(at_minus_one, um1, r, s);
  r = where(at_inf, u, r, s);
  return where(at_one, x, r, s);
}

// Horner's rule for the polynomial with coefficients c (highest degree first) at w.
Array horner(const std::vector<double>& c, const Array& w, const StreamOrDevice& s) {
  Array p = fill_like(w, c[0], s);
  for (size_t i = 1; i < c.size(); ++i) p = add(multiply(p, w, s), fill_like(w, c[i], s), s);
  return p;
}

// Giles' single-precision approximation ("Approximating the erfinv function", GPU Gems 2010):
// a polynomial in w = -log(1 - x^2) on each side of w = 5; then Newton steps on erf(y) = x
// (one for 32 bits and narrower, two for float64, where Giles' fit alone is ~1e-7 off).
Array erfinv(const Array& a, StreamOrDevice s) {
  Array x = as_float(a, s);
  Array one = fill_like(x, 1, s);
  Array w = negative(log(multiply(subtract(one, x, s), add(one, x, s), s), s), s);
  Array central = horner({2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                          0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941},
                         subtract(w, fill_like(x, 2.5, s), s), s);
  Array tail = horner({-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                       0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682},
                      subtract(sqrt(w, s), fill_like(x, 3, s), s), s);
  Array y = multiply(where(less(w, fill_like(x, 5, s), s), central, tail, s), x, s);
  Array slope = fill_like(x, 2 / std::sqrt(M_PI), s);
  for (int step = 0; step < (x.dtype() == float64 ? 2 : 1); ++step) {
    Array err = subtract(erf(y, s), x, s);
    y = subtract(y, divide(err, multiply(slope, exp(negative(multiply(y, y, s), s), s), s), s), s);
  }
  // erfinv(+-1) = +-inf (the polynomials do not reach it).
  Array inf = multiply(x, fill_like(x, INFINITY, s), s);
  return where(equal(abs(x, s), one, s), inf, y, s);
}

Array clip(const Array& a, const Array& low, const Array& high, StreamOrDevice s) {
  return minimum(maximum(a, low, s), high, s);
}

Array clip(const Array& a, double low, double high, StreamOrDevice s) {
  if (low > high) throw_error("clip: low (", low, ") is above high (", high, ")");
  return clip(a, weak_scalar(scalar_of(low), a), weak_scalar(scalar_of(high), a), s);
}

Array sign(const Array& a, StreamOrDevice s) {
  if (a.dtype().is_bool())
    throw_error("sign: not defined for bool; cast with astype(x, int32) first");
  Array pos = astype(greater(a, weak_scalar(0.0, false, a), s), a.dtype(), s);
  if (a.dtype().is_unsigned()) return pos;
  Array r = subtract(pos, astype(less(a, weak_scalar(0.0, false, a), s), a.dtype(), s), s);
  return a.dtype().is_float() ? where(not_equal(a, a, s), a, r, s) : r;
}

Array round(const Array& a, StreamOrDevice s) {
  if (!a.dtype().is_float()) return a;
  // From the floor and the exact fraction a - floor(a): up above one half, down below, to the
  // even neighbour at one half.
  Array f = floor(a, s);
  Array frac = subtract(a, f, s);
  Array half = fill_like(a, 0.5, s), one = fill_like(a, 1, s);
  Array even = equal(f, multiply(floor(multiply(f, half, s), s), fill_like(a, 2, s), s), s);
  Array tie = where(even, f, add(f, one, s), s);
  return where(greater(frac, half, s), add(f, one, s), where(less(frac, half, s), f, tie, s), s);
}

Array var(const Array& a, const std::vector<int>& axes_in, bool keepdims, int ddof,
          StreamOrDevice s) {
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  if (!axes_in.empty()) axes = normalize_axes(axes_in, a.ndim(), "var");
  if (ddof < 0) throw_error("var: ddof must be >= 0, got ", ddof);
  Array x = as_float(a, s);
  Array d = subtract(x, mean(x, axes, true, s), s);
  Array v = mean(multiply(d, d, s), axes, keepdims, s);
  if (ddof == 0) return v;
  double n = 1;
  for (int ax : axes) n *= static_cast<double>(a.shape()[ax]);
  double scale = n - ddof > 0 ? n / (n - ddof) : INFINITY;  // NumPy: inf or nan, no error
  return multiply(v, fill_like(v, scale, s), s);
}

Array std(const Array& a, const std::vector<int>& axes, bool keepdims, int ddof, StreamOrDevice s) {
  return sqrt(var(a, axes, keepdims, ddof, s), s);
}

Array var(const Array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, std::vector<int>{}, keepdims, ddof, s);
}
Array var(const Array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return var(a, std::vector<int>{axis}, keepdims, ddof, s);
}
Array std(const Array& a, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, std::vector<int>{}, keepdims, ddof, s);
}
Array std(const Array& a, int axis, bool keepdims, int ddof, StreamOrDevice s) {
  return std(a, std::vector<int>{axis}, keepdims, ddof, s);
}

namespace {

// any and all count the elements that decide them (nonzero ones for any, zero ones for all):
// max and min have no identity for an empty axis, where any is false and all is true (NumPy).
// `reduce` sums over the caller's axes.
template <typename Sum>
Array count_decides(const Array& a, bool all, Sum reduce, StreamOrDevice s) {
  Array flags = astype(a, bool_, s);
  Array c = reduce(astype(all ? logical_not(flags, s) : flags, int64, s));
  Array zero = array(int64_t{0}, s);
  return all ? equal(c, zero, s) : not_equal(c, zero, s);
}

}  // namespace

Array any(const Array& a, bool keepdims, StreamOrDevice s) {
  return count_decides(
      a, false, [&](const Array& x) { return sum(x, keepdims, s); }, s);
}
Array any(const Array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return count_decides(
      a, false, [&](const Array& x) { return sum(x, axes, keepdims, s); }, s);
}
Array any(const Array& a, int axis, bool keepdims, StreamOrDevice s) {
  return count_decides(
      a, false, [&](const Array& x) { return sum(x, axis, keepdims, s); }, s);
}
Array all(const Array& a, bool keepdims, StreamOrDevice s) {
  return count_decides(
      a, true, [&](const Array& x) { return sum(x, keepdims, s); }, s);
}
Array all(const Array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  return count_decides(
      a, true, [&](const Array& x) { return sum(x, axes, keepdims, s); }, s);
}
Array all(const Array& a, int axis, bool keepdims, StreamOrDevice s) {
  return count_decides(
      a, true, [&](const Array& x) { return sum(x, axis, keepdims, s); }, s);
}

Array argmin(const Array& a, bool keepdims, StreamOrDevice s) {
  Array r = argmin(flatten(a, 0, -1, s), 0, false, s);
  if (!keepdims) return r;
  std::vector<int> axes(a.ndim());
  std::iota(axes.begin(), axes.end(), 0);
  return expand_dims(r, axes, s);
}

Array argmin(const Array& a, int axis, bool keepdims, StreamOrDevice s) {
  int ax = normalize_axis(axis, a.ndim(), "argmin");
  // The first place holding the minimum: exact for every dtype (negating would overflow the
  // smallest signed integer and wrap unsigned ones).
  Array hit = astype(equal(a, min(a, ax, true, s), s), int32, s);
  return argmax(hit, ax, keepdims, s);
}

}  // namespace kiln
