// The distributions built on the counter-based draws of graph/random.cpp (MLX's randint,
// bernoulli, truncated_normal and categorical): ops over uniform draws and raw bits, so they run
// on every backend, fuse, take key arrays (traced keys included) and give the same values on
// every backend for the same key.
#include <cmath>

#include "graph/ops.h"
#include "graph/random.h"

namespace kiln::random {

namespace {

// `a` broadcast to `shape` is `shape` itself (no wider), or kiln::Error naming op.
void check_fits(const Array& a, const Shape& shape, const char* what, const char* op) {
  if (broadcast_shapes(a.shape(), shape, op) != shape)
    throw_error(op, ": ", what, " of shape ", a.shape(), " does not broadcast to shape ", shape);
}

Array as_float(const Array& a, const StreamOrDevice& s) {
  return a.dtype().is_float() ? a : astype(a, float32, s);
}

// An integer array's values as uint64 bits (signed values sign-extended first), so that
// differences wrap to the true span of any two int64 or uint64 values.
Array as_u64(const Array& a, const StreamOrDevice& s) {
  if (a.dtype() == uint64) return a;
  return astype(astype(a, int64, s), uint64, s);
}

Array scalar(double v, Dtype d, const StreamOrDevice& s) {
  return scalar_constant(Scalar::of(v).cast(d), s);
}

}  // namespace

Array randint(const Array& low, const Array& high, const Shape& shape, Dtype dtype, KeyArg key,
              StreamOrDevice s) {
  const char* op = "random::randint";
  check_dtype(dtype, op);
  if (!dtype.is_int())
    throw_error(op, ": dtype ", dtype,
                " is not valid (an integer dtype: int8, int32, int64, uint8, uint32, uint64)");
  for (const Array* b : {&low, &high})
    if (b->dtype().is_float())
      throw_error(op, ": bounds must be integers or bools, got ", b->dtype());
  check_fits(low, shape, "low", op);
  check_fits(high, shape, "high", op);
  Array lo = as_u64(low, s), span = subtract(as_u64(high, s), lo, s);  // wraps to the true span
  Array r = remainder(bits(shape, 8, key, s), span, s);                // 0 where span is 0
  Array value = astype(add(lo, r, s), dtype, s);
  // high > low, compared in int64 (uint64 when either bound is uint64).
  Dtype cmp = low.dtype() == uint64 || high.dtype() == uint64 ? uint64 : int64;
  Array valid = greater(astype(high, cmp, s), astype(low, cmp, s), s);
  return where(valid, value, astype(low, dtype, s), s);
}

Array randint(int64_t low, int64_t high, const Shape& shape, Dtype dtype, KeyArg key,
              StreamOrDevice s) {
  if (!(low < high)) throw_error("random::randint: low ", low, " must be less than high ", high);
  return randint(array(low, s), array(high, s), shape, dtype, std::move(key), s);
}

Array bernoulli(const Array& p, std::optional<Shape> shape, KeyArg key, StreamOrDevice s) {
  Array prob = as_float(p, s);
  Shape out = shape ? *shape : prob.shape();
  check_fits(prob, out, "p", "random::bernoulli");
  return less(uniform(out, prob.dtype(), std::move(key), s), prob, s);
}

Array bernoulli(double p, const Shape& shape, KeyArg key, StreamOrDevice s) {
  if (!(p >= 0 && p <= 1))
    throw_error("random::bernoulli: p = ", p, " is not a probability (0 <= p <= 1)");
  return bernoulli(scalar(p, float32, s), shape, std::move(key), s);
}

// u uniform between erf(lower / sqrt 2) and erf(upper / sqrt 2), kept inside (-1, 1) so the
// result is finite, then sqrt 2 * erfinv(u), clipped to the bounds against rounding.
Array truncated_normal(const Array& lower, const Array& upper, std::optional<Shape> shape,
                       Dtype dtype, KeyArg key, StreamOrDevice s) {
  const char* op = "random::truncated_normal";
  check_dtype(dtype, op);
  if (!dtype.is_float())
    throw_error(op, ": dtype ", dtype,
                " is not valid (a float dtype: float16, bfloat16, float32, float64)");
  Array lo = astype(lower, dtype, s), hi = astype(upper, dtype, s);
  Shape out = shape ? *shape : broadcast_shapes(lo.shape(), hi.shape(), op);
  check_fits(lo, out, "lower", op);
  check_fits(hi, out, "upper", op);
  Array root2 = scalar(std::sqrt(2.0), dtype, s);
  Array a = erf(divide(lo, root2, s), s), b = erf(divide(hi, root2, s), s);
  Array u = add(a, multiply(subtract(b, a, s), uniform(out, dtype, std::move(key), s), s), s);
  double below_one = 1 - std::ldexp(1.0, -unit_digits(dtype));  // the largest value under 1
  u = clip(u, -below_one, below_one, s);
  return clip(multiply(root2, erfinv(u, s), s), lo, hi, s);
}

Array truncated_normal(double lower, double upper, const Shape& shape, Dtype dtype, KeyArg key,
                       StreamOrDevice s) {
  if (!(lower <= upper))
    throw_error("random::truncated_normal: lower ", lower, " must not exceed upper ", upper);
  return truncated_normal(scalar(lower, float64, s), scalar(upper, float64, s), shape, dtype,
                          std::move(key), s);
}

namespace {

// argmax(logits + g) along the last axis, g = -log(-log(u)) Gumbel noise of `noise` shape
// (logits broadcast to it); a uniform 0 gives g = -inf, an entry never chosen.
Array gumbel_argmax(const Array& logits, const Shape& noise, KeyArg key, const StreamOrDevice& s) {
  Array u = uniform(noise, logits.dtype(), std::move(key), s);
  Array g = negative(log(negative(log(u, s), s), s), s);
  return astype(argmax(add(logits, g, s), -1, false, s), uint32, s);
}

// logits as floats with `axis` moved last; `batch` gets the other axes' extents.
Array logits_last(const Array& logits, int axis, Shape& batch, const StreamOrDevice& s) {
  int ax = normalize_axis(axis, logits.ndim(), "random::categorical");
  Array l = moveaxis(as_float(logits, s), ax, -1, s);
  batch.assign(l.shape().begin(), l.shape().end() - 1);
  return l;
}

}  // namespace

Array categorical(const Array& logits, int axis, KeyArg key, StreamOrDevice s) {
  Shape batch;
  Array l = logits_last(logits, axis, batch, s);
  return gumbel_argmax(l, l.shape(), std::move(key), s);
}

Array categorical(const Array& logits, int axis, const Shape& shape, KeyArg key, StreamOrDevice s) {
  Shape batch;
  Array l = logits_last(logits, axis, batch, s);
  if (broadcast_shapes(batch, shape, "random::categorical") != shape)
    throw_error("random::categorical: logits of shape ", logits.shape(), " without axis ", axis,
                " (", batch, ") do not broadcast to shape ", shape);
  Shape noise = shape;
  noise.push_back(l.shape().back());
  return gumbel_argmax(l, noise, std::move(key), s);
}

Array categorical(const Array& logits, int axis, int num_samples, KeyArg key, StreamOrDevice s) {
  if (num_samples < 0)
    throw_error("random::categorical: num_samples = ", num_samples, " must be >= 0");
  Shape batch;
  Array l = expand_dims(logits_last(logits, axis, batch, s), -2, s);
  Shape noise = batch;
  noise.push_back(num_samples);
  noise.push_back(l.shape().back());
  return gumbel_argmax(l, noise, std::move(key), s);
}

}  // namespace kiln::random
