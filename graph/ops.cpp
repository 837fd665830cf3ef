#include "graph/ops.h"

#include "graph/array_node.h"
#include "graph/element.h"
#include "graph/trace_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <optional>

namespace kiln {

namespace {

Array make(Shape shape, Dtype dtype, Op op, Params p, std::vector<Array> inputs,
           const StreamOrDevice& s) {
  checked_nbytes(shape, dtype, op_name(op));  // a result too large to address is refused here
  return make_array(std::move(shape), dtype, op, std::move(p), std::move(inputs),
                    resolve_stream(s));
}

Array cast_if(const Array& a, Dtype d, const StreamOrDevice& s) {
  return a.dtype() == d ? a : astype(a, d, s);
}

std::string dtypes_str(const Array& a, const Array& b) {
  return a.dtype().name() + " and " + b.dtype().name();
}

Array unary(UnaryOp op, const Array& a, Dtype compute, const StreamOrDevice& s) {
  Params p;
  p.unary = op;
  Array x = cast_if(a, compute, s);
  return make(x.shape(), compute, Op::Unary, p, {x}, s);
}

Array float_unary(UnaryOp op, const Array& a, const StreamOrDevice& s) {
  return unary(op, a, float_result_type(a.dtype()), s);
}

// Binary ops broadcast implicitly: the node keeps its inputs' shapes and the kernel builder
// reads them through broadcast index maps, so eager code never materialises a broadcast.
Array binary(BinaryOp op, const Array& a, const Array& b, const StreamOrDevice& s) {
  const char* name = op_name(op);
  Shape out = broadcast_shapes(a.shape(), b.shape(), name);
  Dtype compute = promote_types(a.dtype(), b.dtype());
  Dtype result = compute;
  if (is_logical(op)) {
    compute = result = bool_;
  } else if (is_comparison(op)) {
    result = bool_;
  } else if (op == BinaryOp::Divide) {
    compute = result = float_result_type(compute);
  } else if (is_bitwise(op)) {
    if (compute.is_float())
      throw_error(name, ": not defined for float operands (", dtypes_str(a, b),
                  "); valid dtypes: bool, int8, int32, int64, uint8, uint32, uint64");
    bool shift = op == BinaryOp::LeftShift || op == BinaryOp::RightShift;
    if (shift && compute.is_bool()) compute = result = uint8;  // as MLX: bools shift as uint8
  } else if (compute.is_bool() && op != BinaryOp::Maximum && op != BinaryOp::Minimum &&
             op != BinaryOp::Multiply) {
    throw_error(name, ": not defined for bool operands (", dtypes_str(a, b),
                "); cast with astype(x, int32) first");
  }
  Params p;
  p.binary = op;
  return make(out, result, Op::Binary, p, {cast_if(a, compute, s), cast_if(b, compute, s)}, s);
}

std::vector<int> all_axes(int ndim) {
  std::vector<int> v(ndim);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

Shape reduced_shape(const Shape& in, const std::vector<int>& axes, bool keepdims) {
  Shape out;
  for (int i = 0; i < static_cast<int>(in.size()); ++i) {
    bool r = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!r)
      out.push_back(in[i]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

Array reduce(ReduceOp op, const Array& a, std::vector<int> axes, bool keepdims,
             const StreamOrDevice& s) {
  const char* name = op_name(op);
  axes = normalize_axes(axes, a.ndim(), name);
  if ((op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::Argmax)) {
    for (int ax : axes)
      if (a.shape()[ax] == 0)
        throw_error(name, ": cannot reduce over axis ", ax, " of extent 0 in shape ", a.shape(),
                    " (", name, " of an empty set has no identity)");
  }
  Dtype out = a.dtype();
  Array x = a;
  if (op == ReduceOp::Argmax) {
    out = int64;
  } else if ((op == ReduceOp::Sum || op == ReduceOp::Prod) && a.dtype().size() == 1) {
    // bool, int8 and uint8 accumulate in 32 bits (as MLX does): a sum of bytes rarely fits one.
    out = a.dtype() == uint8 ? uint32 : int32;
    x = astype(a, out, s);
  }
  if (axes.empty()) return x;  // reducing a 0-d array over no axes leaves its value
  Params p;
  p.reduce = op;
  p.axes = axes;
  p.keepdims = keepdims;
  return make(reduced_shape(a.shape(), axes, keepdims), out, Op::Reduce, p, {x}, s);
}

Array reduce_all(ReduceOp op, const Array& a, bool keepdims, const StreamOrDevice& s) {
  return reduce(op, a, all_axes(a.ndim()), keepdims, s);
}

Array reduce_axis(ReduceOp op, const Array& a, int axis, bool keepdims, const StreamOrDevice& s) {
  return reduce(op, a, {normalize_axis(axis, a.ndim(), op_name(op))}, keepdims, s);
}

}  // namespace

// ---- creation ----

Array array_from_bytes(const void* data, size_t nbytes, Shape shape, Dtype dtype,
                       StreamOrDevice s) {
  size_t expect = checked_nbytes(shape, dtype, "array_from_bytes");
  if (nbytes != expect)
    throw_error("array_from_bytes: ", nbytes, " bytes given for shape ", shape, " of ", dtype,
                " (needs ", expect, ")");
  if (nbytes && !data) throw_error("array_from_bytes: null data for ", nbytes, " bytes");
  ResolvedStream rs = resolve_stream(s);
  auto buf = std::make_shared<HostBuffer>(nbytes, rs.stream.device);
  if (nbytes) buf->write(data, 0, nbytes);
  return make_array(std::move(shape), dtype, std::move(buf), rs);
}

template <typename T, typename>
Array array(T value, StreamOrDevice s) {
  return array(std::vector<T>{value}, Shape{}, std::move(s));
}

template <typename T>
Array array(const std::vector<T>& values, Shape shape, StreamOrDevice s) {
  return array(values, std::move(shape), dtype_of<T>(), std::move(s));
}

template <typename T>
Array array(const std::vector<T>& values, Shape shape, Dtype dtype, StreamOrDevice s) {
  check_dtype(dtype, "array");
  check_shape(shape, "array");
  if (static_cast<int64_t>(values.size()) != shape_size(shape))
    throw_error("array: ", values.size(), " values given for shape ", shape, ", which holds ",
                shape_size(shape));
  std::vector<unsigned char> raw(values.size() * dtype.size());
  for (size_t i = 0; i < values.size(); ++i) {
    Scalar v = Scalar::of(values[i]).cast(dtype);
    scalar::store(raw.data(), dtype, static_cast<int64_t>(i), {v.f, v.i});
  }
  return array_from_bytes(raw.data(), raw.size(), std::move(shape), dtype, std::move(s));
}

#define KILN_INSTANTIATE_ARRAY(T)                                        \
  template Array array<T, void>(T, StreamOrDevice);                      \
  template Array array<T>(const std::vector<T>&, Shape, StreamOrDevice); \
  template Array array<T>(const std::vector<T>&, Shape, Dtype, StreamOrDevice);
KILN_INSTANTIATE_ARRAY(bool)
KILN_INSTANTIATE_ARRAY(int8_t)
KILN_INSTANTIATE_ARRAY(int32_t)
KILN_INSTANTIATE_ARRAY(int64_t)
KILN_INSTANTIATE_ARRAY(uint8_t)
KILN_INSTANTIATE_ARRAY(uint32_t)
KILN_INSTANTIATE_ARRAY(uint64_t)
KILN_INSTANTIATE_ARRAY(float)
KILN_INSTANTIATE_ARRAY(double)
#undef KILN_INSTANTIATE_ARRAY

Array full(Shape shape, Scalar value, StreamOrDevice s) {
  check_shape(shape, "full");
  Params p;
  p.value = value;
  return make(std::move(shape), value.dtype, Op::Full, p, {}, s);
}

Array full(Shape shape, double value, Dtype dtype, StreamOrDevice s) {
  return full(std::move(shape), Scalar::of(value).cast(dtype), std::move(s));
}

Array zeros(Shape shape, Dtype dtype, StreamOrDevice s) {
  return full(std::move(shape), 0.0, dtype, std::move(s));
}
Array ones(Shape shape, Dtype dtype, StreamOrDevice s) {
  return full(std::move(shape), 1.0, dtype, std::move(s));
}
Array zeros_like(const Array& a, StreamOrDevice s) { return zeros(a.shape(), a.dtype(), s); }
Array ones_like(const Array& a, StreamOrDevice s) { return ones(a.shape(), a.dtype(), s); }

Array arange(double start, double stop, double step, Dtype dtype, StreamOrDevice s) {
  check_dtype(dtype, "arange");
  if (step == 0 || !std::isfinite(step) || !std::isfinite(start) || !std::isfinite(stop))
    throw_error("arange: start ", start, ", stop ", stop, ", step ", step,
                " must be finite with a non-zero step");
  if (dtype.is_bool()) throw_error("arange: dtype bool is not valid (use an int or float dtype)");
  double count = std::ceil((stop - start) / step);
  if (count > static_cast<double>(int64_t{1} << 48))
    throw_error("arange: start ", start, ", stop ", stop, ", step ", step, " give ", count,
                " elements (at most 2^48)");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(count));
  Params p;
  p.value = Scalar::of(start).cast(dtype);
  p.step_value = Scalar::of(step).cast(dtype);
  if (!dtype.is_float() && (p.value.as_double() != start || p.step_value.as_double() != step))
    throw_error("arange: start ", start, " and step ", step, " are not exact in ", dtype);
  return make({n}, dtype, Op::Arange, p, {}, s);
}

Array arange(int64_t stop, Dtype dtype, StreamOrDevice s) {
  return arange(0.0, static_cast<double>(stop), 1.0, dtype, std::move(s));
}

// ---- element-wise ----

Array negative(const Array& a, StreamOrDevice s) {
  if (a.dtype().is_bool())
    throw_error("negative: not defined for bool (use logical_not for bool arrays)");
  return unary(UnaryOp::Negative, a, a.dtype(), s);
}
Array abs(const Array& a, StreamOrDevice s) {
  if (a.dtype().is_bool() || a.dtype().is_unsigned()) return a;
  return unary(UnaryOp::Abs, a, a.dtype(), s);
}
Array exp(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Exp, a, s); }
Array log(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Log, a, s); }
Array sqrt(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Sqrt, a, s); }
Array rsqrt(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Rsqrt, a, s); }
Array sin(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Sin, a, s); }
Array cos(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Cos, a, s); }
Array tanh(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Tanh, a, s); }
Array erf(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Erf, a, s); }
Array sigmoid(const Array& a, StreamOrDevice s) { return float_unary(UnaryOp::Sigmoid, a, s); }
// floor and ceil of an integer are the integer itself; Kiln keeps its dtype.
Array floor(const Array& a, StreamOrDevice s) {
  return a.dtype().is_float() ? unary(UnaryOp::Floor, a, a.dtype(), s) : a;
}
Array ceil(const Array& a, StreamOrDevice s) {
  return a.dtype().is_float() ? unary(UnaryOp::Ceil, a, a.dtype(), s) : a;
}
Array logical_not(const Array& a, StreamOrDevice s) {
  return unary(UnaryOp::LogicalNot, a, bool_, s);
}
Array bitwise_invert(const Array& a, StreamOrDevice s) {
  if (a.dtype().is_float())
    throw_error("bitwise_invert: not defined for ", a.dtype(),
                "; valid dtypes: bool, int8, int32, int64, uint8, uint32, uint64");
  return unary(UnaryOp::BitwiseInvert, a, a.dtype(), s);
}

Array add(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Add, a, b, s);
}
Array subtract(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Subtract, a, b, s);
}
Array multiply(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Multiply, a, b, s);
}
Array divide(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Divide, a, b, s);
}
Array power(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Power, a, b, s);
}
Array maximum(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Maximum, a, b, s);
}
Array minimum(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Minimum, a, b, s);
}
Array equal(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Equal, a, b, s);
}
Array not_equal(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::NotEqual, a, b, s);
}
Array less(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Less, a, b, s);
}
Array less_equal(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::LessEqual, a, b, s);
}
Array greater(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Greater, a, b, s);
}
Array greater_equal(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::GreaterEqual, a, b, s);
}
Array logical_and(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::LogicalAnd, a, b, s);
}
Array logical_or(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::LogicalOr, a, b, s);
}
Array floor_divide(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::FloorDivide, a, b, s);
}
Array remainder(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::Remainder, a, b, s);
}
Array bitwise_and(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::BitwiseAnd, a, b, s);
}
Array bitwise_or(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::BitwiseOr, a, b, s);
}
Array bitwise_xor(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::BitwiseXor, a, b, s);
}
Array left_shift(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::LeftShift, a, b, s);
}
Array right_shift(const Array& a, const Array& b, StreamOrDevice s) {
  return binary(BinaryOp::RightShift, a, b, s);
}

Array where(const Array& cond, const Array& x, const Array& y, StreamOrDevice s) {
  Shape out =
      broadcast_shapes(broadcast_shapes(cond.shape(), x.shape(), "where"), y.shape(), "where");
  Dtype d = promote_types(x.dtype(), y.dtype());
  return make(out, d, Op::Select, {}, {cast_if(cond, bool_, s), cast_if(x, d, s), cast_if(y, d, s)},
              s);
}

Array astype(const Array& a, Dtype dtype, StreamOrDevice s) {
  if (a.dtype() == dtype) return a;
  return make(a.shape(), dtype, Op::Cast, {}, {a}, s);
}

// ---- reductions ----

#define KILN_REDUCTION(NAME, OP)                                                              \
  Array NAME(const Array& a, bool keepdims, StreamOrDevice s) {                               \
    return reduce_all(OP, a, keepdims, s);                                                    \
  }                                                                                           \
  Array NAME(const Array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) { \
    return reduce(OP, a, axes, keepdims, s);                                                  \
  }                                                                                           \
  Array NAME(const Array& a, int axis, bool keepdims, StreamOrDevice s) {                     \
    return reduce_axis(OP, a, axis, keepdims, s);                                             \
  }
KILN_REDUCTION(sum, ReduceOp::Sum)
KILN_REDUCTION(max, ReduceOp::Max)
KILN_REDUCTION(min, ReduceOp::Min)
KILN_REDUCTION(prod, ReduceOp::Prod)
#undef KILN_REDUCTION

Array mean(const Array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  std::vector<int> ax = normalize_axes(axes, a.ndim(), "mean");
  Dtype d = float_result_type(a.dtype());
  // float16/bfloat16 sum in float32 and round once at the end: their sum would overflow
  // float16 (65504) long before the mean does.
  Dtype acc = d.is_half() ? float32 : d;
  Array total = sum(astype(a, acc, s), ax, keepdims, s);
  // The count is a node, not a constant, so shapeless compile sees it change with the input;
  // the mean of an empty set is 0/0 = NaN, as in NumPy.
  Params p;
  p.axes = ax;
  Array m = divide(total, make({}, acc, Op::Count, p, {a}, s), s);
  return astype(m, d, s);
}
Array mean(const Array& a, bool keepdims, StreamOrDevice s) {
  return mean(a, all_axes(a.ndim()), keepdims, s);
}
Array mean(const Array& a, int axis, bool keepdims, StreamOrDevice s) {
  return mean(a, std::vector<int>{normalize_axis(axis, a.ndim(), "mean")}, keepdims, s);
}

Array argmax(const Array& a, int axis, bool keepdims, StreamOrDevice s) {
  return reduce_axis(ReduceOp::Argmax, a, axis, keepdims, s);
}
Array argmax(const Array& a, bool keepdims, StreamOrDevice s) {
  Array flat = flatten(a, 0, -1, s);
  Array r = reduce_axis(ReduceOp::Argmax, flat, 0, false, s);
  return keepdims ? expand_dims(r, all_axes(a.ndim()), s) : r;
}

// ---- shape ----

// Every reshape goes through here, recording how it was asked for (see ReshapeKind).
static Array reshape_as(const Array& a, Shape out, ReshapeKind kind, std::vector<int> axes,
                        std::vector<int64_t> spec, const StreamOrDevice& s) {
  // While tracing, a no-op reshape still records what was asked (shapeless replays it).
  if (out == a.shape() && !is_tracing()) return a;
  Params p;
  p.reshape = kind;
  p.axes = std::move(axes);
  p.shape = std::move(spec);
  return make(std::move(out), a.dtype(), Op::Reshape, p, {a}, s);
}

Shape resolve_reshape(const Shape& in, Shape shape) {
  int infer = -1;
  int64_t known = 1, size = shape_size(in);
  bool overflow = false;  // a product past int64 cannot equal the input's size
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) throw_error("reshape: ", shape, " has more than one -1 (at most one)");
      infer = i;
    } else if (shape[i] < 0) {
      throw_error("reshape: ", shape, " has a negative extent (only -1 may be inferred)");
    } else {
      overflow = overflow || __builtin_mul_overflow(known, shape[i], &known);
    }
  }
  if (overflow)
    throw_error("reshape: cannot reshape array of shape ", in, " (", size, " elements) into ",
                shape, " (more than 2^63 elements)");
  if (infer >= 0) {
    if (known == 0 || size % known != 0)
      throw_error("reshape: cannot reshape array of shape ", in, " (", size, " elements) into ",
                  shape);
    shape[infer] = size / known;
  }
  if (shape_size(shape) != size)
    throw_error("reshape: cannot reshape array of shape ", in, " (", size, " elements) into ",
                shape, " (", shape_size(shape), " elements)");
  return shape;
}

Array reshape(const Array& a, Shape shape, StreamOrDevice s) {
  Shape out = resolve_reshape(a.shape(), shape);
  return reshape_as(a, std::move(out), ReshapeKind::Explicit, {}, std::move(shape), s);
}
Array flatten(const Array& a, int start_axis, int end_axis, StreamOrDevice s) {
  if (a.ndim() == 0) return expand_dims(a, 0, s);
  int b = normalize_axis(start_axis, a.ndim(), "flatten");
  int e = normalize_axis(end_axis, a.ndim(), "flatten");
  if (b > e)
    throw_error("flatten: start_axis ", start_axis, " comes after end_axis ", end_axis,
                " for rank ", a.ndim());
  Shape out(a.shape().begin(), a.shape().begin() + b);
  int64_t n = 1;
  for (int i = b; i <= e; ++i) n *= a.shape()[i];
  out.push_back(n);
  out.insert(out.end(), a.shape().begin() + e + 1, a.shape().end());
  return reshape_as(a, out, ReshapeKind::Flatten, {b, e}, {}, s);
}

Array squeeze(const Array& a, const std::vector<int>& axes, StreamOrDevice s) {
  std::vector<int> ax;
  for (int x : axes) ax.push_back(normalize_axis(x, a.ndim(), "squeeze"));
  Shape out;
  for (int i = 0; i < a.ndim(); ++i) {
    bool drop = std::find(ax.begin(), ax.end(), i) != ax.end();
    if (drop && a.shape()[i] != 1)
      throw_error("squeeze: axis ", i, " of shape ", a.shape(), " has extent ", a.shape()[i],
                  " (only extent-1 axes can be squeezed)");
    if (!drop) out.push_back(a.shape()[i]);
  }
  std::sort(ax.begin(), ax.end());
  return reshape_as(a, out, ReshapeKind::Squeeze, ax, {}, s);
}

Array squeeze(const Array& a, StreamOrDevice s) {
  std::vector<int> ax;
  for (int i = 0; i < a.ndim(); ++i)
    if (a.shape()[i] == 1) ax.push_back(i);
  return squeeze(a, ax, s);
}

Array expand_dims(const Array& a, const std::vector<int>& axes, StreamOrDevice s) {
  int out_ndim = a.ndim() + static_cast<int>(axes.size());
  std::vector<int> ax = normalize_axes(axes, out_ndim, "expand_dims");
  if (axes.empty()) return a;
  Shape out;
  size_t k = 0;
  for (int i = 0; i < out_ndim; ++i) {
    if (std::find(ax.begin(), ax.end(), i) != ax.end())
      out.push_back(1);
    else
      out.push_back(a.shape()[k++]);
  }
  return reshape_as(a, out, ReshapeKind::ExpandDims, ax, {}, s);
}

Array expand_dims(const Array& a, int axis, StreamOrDevice s) {
  return expand_dims(a, std::vector<int>{axis}, s);
}

Array transpose(const Array& a, const std::vector<int>& axes, StreamOrDevice s) {
  if (static_cast<int>(axes.size()) != a.ndim())
    throw_error("transpose: permutation of ", axes.size(), " axes given for an array of rank ",
                a.ndim(), " (needs exactly ", a.ndim(), ")");
  std::vector<int> perm;
  for (int x : axes) perm.push_back(normalize_axis(x, a.ndim(), "transpose"));
  std::vector<int> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw_error("transpose: axes repeat (needs a permutation of 0..", a.ndim() - 1, ")");
  bool identity = true;
  Shape out;
  for (int i = 0; i < a.ndim(); ++i) {
    out.push_back(a.shape()[perm[i]]);
    identity = identity && perm[i] == i;
  }
  if (identity) return a;
  Params p;
  p.axes = perm;
  return make(out, a.dtype(), Op::Transpose, p, {a}, s);
}

Array transpose(const Array& a, StreamOrDevice s) {
  std::vector<int> perm(a.ndim());
  for (int i = 0; i < a.ndim(); ++i) perm[i] = a.ndim() - 1 - i;
  return transpose(a, perm, s);
}

Array moveaxis(const Array& a, int source, int destination, StreamOrDevice s) {
  int from = normalize_axis(source, a.ndim(), "moveaxis");
  int to = normalize_axis(destination, a.ndim(), "moveaxis");
  if (from == to) return a;
  std::vector<int> perm(a.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  perm.erase(perm.begin() + from);
  perm.insert(perm.begin() + to, from);
  return transpose(a, perm, s);
}

Array swapaxes(const Array& a, int axis1, int axis2, StreamOrDevice s) {
  std::vector<int> perm(a.ndim());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[normalize_axis(axis1, a.ndim(), "swapaxes")],
            perm[normalize_axis(axis2, a.ndim(), "swapaxes")]);
  return transpose(a, perm, s);
}

Array broadcast_to(const Array& a, const Shape& shape, StreamOrDevice s) {
  check_shape(shape, "broadcast_to");
  Shape b = broadcast_shapes(a.shape(), shape, "broadcast_to");
  if (b != shape)
    throw_error("broadcast_to: array of shape ", a.shape(), " cannot be broadcast to ", shape);
  if (shape == a.shape() && !is_tracing()) return a;
  Params p;
  p.shape = shape;
  return make(shape, a.dtype(), Op::Broadcast, p, {a}, s);
}

Array stop_gradient(const Array& a, StreamOrDevice s) {
  // Only a transform can tell this node from `a`; a trace may be differentiated later (its
  // function runs again, inline, under the transform), so it keeps the node too.
  if (!in_transform() && !is_tracing()) return a;
  Params p;
  p.shape = a.shape();
  p.stop_gradient = true;
  return make(a.shape(), a.dtype(), Op::Broadcast, p, {a}, s);
}

Array slice(const Array& a, std::vector<int64_t> start, std::vector<int64_t> stop,
            std::vector<int64_t> step, StreamOrDevice s) {
  int n = a.ndim();
  if (static_cast<int>(start.size()) != n || static_cast<int>(stop.size()) != n ||
      static_cast<int>(step.size()) != n)
    throw_error("slice: start, stop and step need one entry per axis (", n, " for shape ",
                a.shape(), "), got ", start.size(), ", ", stop.size(), ", ", step.size());
  Shape out(n);
  bool identity = true;
  for (int i = 0; i < n; ++i) {
    int64_t d = a.shape()[i];
    if (step[i] == 0) throw_error("slice: step on axis ", i, " is 0 (must be non-zero)");
    auto clamp = [&](int64_t v, bool is_start) {
      if (v < 0) v += d;
      if (step[i] > 0) return std::clamp<int64_t>(v, 0, d);
      (void)is_start;
      return std::clamp<int64_t>(v, -1, d - 1);
    };
    start[i] = clamp(start[i], true);
    stop[i] = clamp(stop[i], false);
    // In 128 bits: a step of INT64_MIN or INT64_MAX must not wrap (NumPy gives one element).
    __int128 st = step[i], a0 = start[i], b0 = stop[i];
    __int128 len = st > 0 ? (b0 - a0 + st - 1) / st : (a0 - b0 - st - 1) / (-st);
    out[i] = static_cast<int64_t>(len > 0 ? len : 0);
    identity = identity && start[i] == 0 && step[i] == 1 && out[i] == d;
  }
  if (identity && !is_tracing()) return a;
  Params p;
  p.start = std::move(start);
  p.stop = std::move(stop);
  p.step = std::move(step);
  return make(out, a.dtype(), Op::Slice, p, {a}, s);
}

Array slice(const Array& a, std::vector<int64_t> start, std::vector<int64_t> stop,
            StreamOrDevice s) {
  return slice(a, std::move(start), std::move(stop), std::vector<int64_t>(a.ndim(), 1), s);
}

Array concatenate(const std::vector<Array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) throw_error("concatenate: needs at least one array");
  const Array& first = arrays[0];
  if (first.ndim() == 0) throw_error("concatenate: zero-dimensional arrays cannot be joined");
  int ax = normalize_axis(axis, first.ndim(), "concatenate");
  Dtype d = first.dtype();
  Shape out = first.shape();
  out[ax] = 0;
  for (const Array& x : arrays) {
    if (x.ndim() != first.ndim())
      throw_error("concatenate: arrays of shapes ", first.shape(), " and ", x.shape(),
                  " have different ranks");
    for (int i = 0; i < first.ndim(); ++i)
      if (i != ax && x.shape()[i] != first.shape()[i])
        throw_error("concatenate: shapes ", first.shape(), " and ", x.shape(), " differ on axis ",
                    i, " (all axes but ", ax, " must match)");
    if (__builtin_add_overflow(out[ax], x.shape()[ax], &out[ax]))
      throw_error("concatenate: the joined extent of axis ", ax, " overflows int64");
    d = promote_types(d, x.dtype());
  }
  if (arrays.size() == 1) return first;
  std::vector<Array> in;
  for (const Array& x : arrays) in.push_back(cast_if(x, d, s));
  Params p;
  p.axes = {ax};
  return make(out, d, Op::Concatenate, p, in, s);
}

// ---- linear algebra ----

Array matmul(const Array& a, const Array& b, StreamOrDevice s) {
  if (a.ndim() == 0 || b.ndim() == 0)
    throw_error("matmul: operands must have at least one dimension, got shapes ", a.shape(),
                " and ", b.shape(), " (use multiply for scalars)");
  if (a.dtype().is_bool() || b.dtype().is_bool())
    throw_error("matmul: bool operands (", dtypes_str(a, b), ") are not supported");
  // NumPy: a 1-D left operand is a row vector, a 1-D right operand a column vector; the added
  // axes are removed from the result.
  Array x = a.ndim() == 1 ? expand_dims(a, 0, s) : a;
  Array y = b.ndim() == 1 ? expand_dims(b, 1, s) : b;
  int64_t k1 = x.shape().back(), k2 = y.shape()[y.ndim() - 2];
  if (k1 != k2)
    throw_error("matmul: shapes ", a.shape(), " and ", b.shape(),
                " are not aligned: the last axis of the first (", k1,
                ") must equal the second-to-last axis of the second (", k2, ")");
  Shape bx(x.shape().begin(), x.shape().end() - 2), by(y.shape().begin(), y.shape().end() - 2);
  Shape batch = broadcast_shapes(bx, by, "matmul");
  Dtype d = promote_types(a.dtype(), b.dtype());
  Shape out = batch;
  out.push_back(x.shape()[x.ndim() - 2]);
  out.push_back(y.shape().back());
  Array r = make(out, d, Op::Matmul, {}, {cast_if(x, d, s), cast_if(y, d, s)}, s);
  std::vector<int> added;  // the axes 1-D promotion added, removed again
  if (a.ndim() == 1) added.push_back(r.ndim() - 2);
  if (b.ndim() == 1) added.push_back(r.ndim() - 1);
  if (!added.empty()) r = squeeze(r, added, s);
  return r;
}

// ---- composites ----

// Whether any of `axes` (normalized) has extent 0: composites then follow SciPy's special
// functions (softmax of nothing is nothing, logsumexp of nothing is -inf) instead of failing
// inside max.
bool reduces_nothing(const Array& a, const std::vector<int>& axes) {
  for (int ax : axes)
    if (a.shape()[ax] == 0) return true;
  return false;
}

Array softmax(const Array& a, const std::vector<int>& axes_in, StreamOrDevice s) {
  Array x = a.dtype().is_float() ? a : astype(a, float_result_type(a.dtype()), s);
  std::vector<int> axes = normalize_axes(axes_in, x.ndim(), "softmax");
  if (reduces_nothing(x, axes)) return exp(x, s);  // empty: the same empty shape
  Array m = max(x, axes, true, s);
  Array e = exp(subtract(x, m, s), s);
  return divide(e, sum(e, axes, true, s), s);
}
Array softmax(const Array& a, int axis, StreamOrDevice s) {
  return softmax(a, std::vector<int>{normalize_axis(axis, a.ndim(), "softmax")}, s);
}

Array logsumexp(const Array& a, const std::vector<int>& axes, bool keepdims, StreamOrDevice s) {
  Array x = a.dtype().is_float() ? a : astype(a, float_result_type(a.dtype()), s);
  std::vector<int> ax = normalize_axes(axes, x.ndim(), "logsumexp");
  if (reduces_nothing(x, ax)) {  // log of an empty sum: -inf
    Array r = log(sum(exp(x, s), ax, true, s), s);
    return keepdims ? r : squeeze(r, ax, s);
  }
  Array m = max(x, ax, true, s);
  // A row of -inf would give inf - inf = nan; shift by 0 there instead, as NumPy-based libraries
  // do.
  Array inf = scalar_constant(Scalar::of(INFINITY).cast(x.dtype()), s);
  Array zero = scalar_constant(Scalar::of(0.0).cast(x.dtype()), s);
  Array safe_m = where(equal(abs(m, s), inf, s), zero, m, s);
  Array r = add(log(sum(exp(subtract(x, safe_m, s), s), ax, true, s), s), safe_m, s);
  return keepdims ? r : squeeze(r, ax, s);
}
Array logsumexp(const Array& a, bool keepdims, StreamOrDevice s) {
  return logsumexp(a, all_axes(a.ndim()), keepdims, s);
}
Array logsumexp(const Array& a, int axis, bool keepdims, StreamOrDevice s) {
  return logsumexp(a, std::vector<int>{normalize_axis(axis, a.ndim(), "logsumexp")}, keepdims, s);
}

// ---- operators ----

Array scalar_constant(Scalar v, StreamOrDevice s) {
  unsigned char raw[8] = {};
  scalar::store(raw, v.dtype, 0, {v.f, v.i});
  return array_from_bytes(raw, v.dtype.size(), {}, v.dtype, std::move(s));
}

namespace {

// Whether the integer scalar v is a value of the integer dtype d (not just after wrapping).
bool int_fits(const Scalar& v, Dtype d) {
  Scalar there = v.cast(d);
  bool negative = v.dtype != uint64 && v.i < 0;
  bool negative_there = !d.is_unsigned() && there.i < 0;
  return there.cast(v.dtype).i == v.i && negative == negative_there;
}

const char* int_range(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Int8: return "-128 to 127";
    case Dtype::Kind::Int32: return "-2147483648 to 2147483647";
    case Dtype::Kind::Int64: return "-9223372036854775808 to 9223372036854775807";
    case Dtype::Kind::UInt8: return "0 to 255";
    case Dtype::Kind::UInt32: return "0 to 4294967295";
    case Dtype::Kind::UInt64: return "0 to 18446744073709551615";
    default: return "";
  }
}

}  // namespace

namespace {

// The constant for a C++ scalar operand. A loop that combines arrays with one scalar
// (`y = y + 1.0f`) makes one constant node per thread, not one per op: the last one this thread
// made is reused while its dtype, bits and stream match (a constant is an evaluated leaf; sharing
// it changes no value). Not while tracing or in a transform, whose recorded graphs keep what they
// make as they made it.
Array scalar_operand(const Scalar& v) {
  if (is_tracing() || in_transform()) return scalar_constant(v);
  unsigned char raw[8] = {};
  scalar::store(raw, v.dtype, 0, {v.f, v.i});
  ResolvedStream rs = resolve_stream({});
  struct Last {
    std::optional<Array> array;
    unsigned char raw[8] = {};
  };
  thread_local Last last;
  if (last.array) {
    const ArrayNode& n = *last.array->node();
    if (n.dtype == v.dtype && n.stream.origin == rs.origin && n.stream.stream == rs.stream &&
        std::memcmp(last.raw, raw, sizeof raw) == 0)
      return *last.array;
  }
  Array a = array_from_bytes(raw, v.dtype.size(), {}, v.dtype, {});
  last.array = a;
  std::memcpy(last.raw, raw, sizeof raw);
  return a;
}

}  // namespace

Array weak_scalar(Scalar v, const Array& like) {
  Dtype d = like.dtype();
  if (v.dtype.is_float() && !d.is_float()) {
    d = float32;
  } else if (!v.dtype.is_float() && d.is_bool()) {
    d = int32;
  } else if (!v.dtype.is_float() && !v.dtype.is_bool() && d.is_int() && !int_fits(v, d)) {
    throw_error("the scalar ", v.str(), " does not fit the ", d, " array it is combined with (", d,
                " holds ", int_range(d), "); widen the array with astype, or pass the scalar as ",
                "an array to promote");
  }
  return scalar_operand(v.cast(d));
}

Array weak_scalar(double v, bool is_float, const Array& like) {
  return is_float ? weak_scalar(Scalar::of(v), like)
                  : weak_scalar(Scalar::of(static_cast<int64_t>(v)), like);
}

Array operator-(const Array& a) { return negative(a); }
Array operator!(const Array& a) { return logical_not(a); }
Array operator+(const Array& a, const Array& b) { return add(a, b); }
Array operator-(const Array& a, const Array& b) { return subtract(a, b); }
Array operator*(const Array& a, const Array& b) { return multiply(a, b); }
Array operator/(const Array& a, const Array& b) { return divide(a, b); }
Array operator<(const Array& a, const Array& b) { return less(a, b); }
Array operator<=(const Array& a, const Array& b) { return less_equal(a, b); }
Array operator>(const Array& a, const Array& b) { return greater(a, b); }
Array operator>=(const Array& a, const Array& b) { return greater_equal(a, b); }
Array operator==(const Array& a, const Array& b) { return equal(a, b); }
Array operator!=(const Array& a, const Array& b) { return not_equal(a, b); }
Array operator&&(const Array& a, const Array& b) { return logical_and(a, b); }
Array operator||(const Array& a, const Array& b) { return logical_or(a, b); }
Array operator%(const Array& a, const Array& b) { return remainder(a, b); }
Array operator&(const Array& a, const Array& b) { return bitwise_and(a, b); }
Array operator|(const Array& a, const Array& b) { return bitwise_or(a, b); }
Array operator^(const Array& a, const Array& b) { return bitwise_xor(a, b); }
Array operator<<(const Array& a, const Array& b) { return left_shift(a, b); }
Array operator>>(const Array& a, const Array& b) { return right_shift(a, b); }
Array operator~(const Array& a) { return bitwise_invert(a); }

}  // namespace kiln
