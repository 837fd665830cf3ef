// The user-facing ops. Each checks its arguments (raising kiln::Error that names the op, the
// shapes/dtypes and what would be valid), infers shape and dtype with NumPy broadcasting and
// promotion, and records a lazy node. The last argument is always the stream or device to run on.
#pragma once

#include <initializer_list>
#include <type_traits>
#include <utility>
#include <vector>

#include "graph/array.h"
#include "graph/scalar.h"

namespace kiln {

// ---- creation ----
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Array array(T value, StreamOrDevice s = {});
template <typename T>
Array array(const std::vector<T>& values, Shape shape, StreamOrDevice s = {});
template <typename T>
Array array(const std::vector<T>& values, Shape shape, Dtype dtype, StreamOrDevice s = {});
template <typename T>
Array array(std::initializer_list<T> values, Shape shape, StreamOrDevice s = {}) {
  return array(std::vector<T>(values), std::move(shape), std::move(s));
}
// An evaluated array over raw row-major bytes (nbytes must be size * dtype.size()).
Array array_from_bytes(const void* data, size_t nbytes, Shape shape, Dtype dtype,
                       StreamOrDevice s = {});

Array full(Shape shape, Scalar value, StreamOrDevice s = {});
Array full(Shape shape, double value, Dtype dtype = float32, StreamOrDevice s = {});
Array zeros(Shape shape, Dtype dtype = float32, StreamOrDevice s = {});
Array ones(Shape shape, Dtype dtype = float32, StreamOrDevice s = {});
Array zeros_like(const Array& a, StreamOrDevice s = {});
Array ones_like(const Array& a, StreamOrDevice s = {});
// [start, stop) in steps of `step`, as NumPy's arange.
Array arange(double start, double stop, double step = 1, Dtype dtype = float32,
             StreamOrDevice s = {});
Array arange(int64_t stop, Dtype dtype = int64, StreamOrDevice s = {});

// ---- element-wise ----
Array negative(const Array& a, StreamOrDevice s = {});
Array abs(const Array& a, StreamOrDevice s = {});
Array exp(const Array& a, StreamOrDevice s = {});
Array log(const Array& a, StreamOrDevice s = {});
Array sqrt(const Array& a, StreamOrDevice s = {});
Array rsqrt(const Array& a, StreamOrDevice s = {});
Array sin(const Array& a, StreamOrDevice s = {});
Array cos(const Array& a, StreamOrDevice s = {});
Array tanh(const Array& a, StreamOrDevice s = {});
Array erf(const Array& a, StreamOrDevice s = {});
Array sigmoid(const Array& a, StreamOrDevice s = {});
Array floor(const Array& a, StreamOrDevice s = {});
Array ceil(const Array& a, StreamOrDevice s = {});
Array logical_not(const Array& a, StreamOrDevice s = {});
// ~x (MLX's name): bool and integer dtypes only; ~ of a bool is its negation.
Array bitwise_invert(const Array& a, StreamOrDevice s = {});

Array add(const Array& a, const Array& b, StreamOrDevice s = {});
Array subtract(const Array& a, const Array& b, StreamOrDevice s = {});
Array multiply(const Array& a, const Array& b, StreamOrDevice s = {});
Array divide(const Array& a, const Array& b, StreamOrDevice s = {});
Array power(const Array& a, const Array& b, StreamOrDevice s = {});
Array maximum(const Array& a, const Array& b, StreamOrDevice s = {});
Array minimum(const Array& a, const Array& b, StreamOrDevice s = {});
Array equal(const Array& a, const Array& b, StreamOrDevice s = {});
Array not_equal(const Array& a, const Array& b, StreamOrDevice s = {});
Array less(const Array& a, const Array& b, StreamOrDevice s = {});
Array less_equal(const Array& a, const Array& b, StreamOrDevice s = {});
Array greater(const Array& a, const Array& b, StreamOrDevice s = {});
Array greater_equal(const Array& a, const Array& b, StreamOrDevice s = {});
Array logical_and(const Array& a, const Array& b, StreamOrDevice s = {});
Array logical_or(const Array& a, const Array& b, StreamOrDevice s = {});
// NumPy's // and % (Python's, for arrays): floats give floor(a / b) and a - b * floor(a / b)
// (computed in double for float32 and narrower, rounded once); integers floor the quotient and
// give the remainder the divisor's sign. An integer zero divisor gives 0 for both (NumPy's
// value), INT_MIN // -1 wraps to INT_MIN: no kernel ever traps. Not defined for bool.
Array floor_divide(const Array& a, const Array& b, StreamOrDevice s = {});
Array remainder(const Array& a, const Array& b, StreamOrDevice s = {});
// Bitwise ops of bool and integer dtypes (kiln::Error for floats); on bools and, or and xor are
// logical, and shifts compute bools as uint8 (as MLX). A shift count is read as unsigned: one
// outside [0, bits of the dtype) shifts every bit out (0, or -1 for a right shift of a negative
// signed value, as NumPy). Right shifts of signed values are arithmetic.
Array bitwise_and(const Array& a, const Array& b, StreamOrDevice s = {});
Array bitwise_or(const Array& a, const Array& b, StreamOrDevice s = {});
Array bitwise_xor(const Array& a, const Array& b, StreamOrDevice s = {});
Array left_shift(const Array& a, const Array& b, StreamOrDevice s = {});
Array right_shift(const Array& a, const Array& b, StreamOrDevice s = {});
Array where(const Array& cond, const Array& x, const Array& y, StreamOrDevice s = {});
Array astype(const Array& a, Dtype dtype, StreamOrDevice s = {});

// ---- reductions (no axes: all axes) ----
Array sum(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array sum(const Array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
Array sum(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
Array max(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array max(const Array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
Array max(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
Array min(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array min(const Array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
Array min(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
Array prod(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array prod(const Array& a, const std::vector<int>& axes, bool keepdims = false,
           StreamOrDevice s = {});
Array prod(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
Array mean(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array mean(const Array& a, const std::vector<int>& axes, bool keepdims = false,
           StreamOrDevice s = {});
Array mean(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
// Index of the first maximum along `axis` (int64); without an axis, over the flattened array.
Array argmax(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array argmax(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
// Whether any / every element along `axes` (all when none) is nonzero: bool.
Array any(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array any(const Array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
Array any(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
Array all(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array all(const Array& a, const std::vector<int>& axes, bool keepdims = false,
          StreamOrDevice s = {});
Array all(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// ---- shape ----
Array reshape(const Array& a, Shape shape, StreamOrDevice s = {});  // one extent may be -1
// The shape reshape(a, shape) gives for an input of shape `in` (resolving -1), or kiln::Error.
Shape resolve_reshape(const Shape& in, Shape shape);
Array flatten(const Array& a, int start_axis = 0, int end_axis = -1, StreamOrDevice s = {});
Array squeeze(const Array& a, StreamOrDevice s = {});
Array squeeze(const Array& a, const std::vector<int>& axes, StreamOrDevice s = {});
Array expand_dims(const Array& a, int axis, StreamOrDevice s = {});
Array expand_dims(const Array& a, const std::vector<int>& axes, StreamOrDevice s = {});
Array transpose(const Array& a, StreamOrDevice s = {});  // reverses the axes
Array transpose(const Array& a, const std::vector<int>& axes, StreamOrDevice s = {});
// Axis `source` moved to position `destination`, the others in order (NumPy's moveaxis).
Array moveaxis(const Array& a, int source, int destination, StreamOrDevice s = {});
Array swapaxes(const Array& a, int axis1, int axis2, StreamOrDevice s = {});
Array broadcast_to(const Array& a, const Shape& shape, StreamOrDevice s = {});
// `a`'s value, through which grad, vjp and jvp see no dependence on `a` (MLX's and JAX's
// stop_gradient). Outside a transform or trace it is `a` itself.
Array stop_gradient(const Array& a, StreamOrDevice s = {});
// NumPy basic slicing with explicit start/stop (and step) per axis; negative indices count from
// the end and out-of-range bounds are clamped, as in NumPy.
Array slice(const Array& a, std::vector<int64_t> start, std::vector<int64_t> stop,
            StreamOrDevice s = {});
Array slice(const Array& a, std::vector<int64_t> start, std::vector<int64_t> stop,
            std::vector<int64_t> step, StreamOrDevice s = {});
Array concatenate(const std::vector<Array>& arrays, int axis = 0, StreamOrDevice s = {});

// ---- linear algebra ----
Array matmul(const Array& a, const Array& b, StreamOrDevice s = {});

// ---- composites ----
Array softmax(const Array& a, int axis = -1, StreamOrDevice s = {});
Array softmax(const Array& a, const std::vector<int>& axes, StreamOrDevice s = {});
Array logsumexp(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array logsumexp(const Array& a, const std::vector<int>& axes, bool keepdims = false,
                StreamOrDevice s = {});
Array logsumexp(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});

// ---- built from the primitives above (graph/ops_math.cpp, graph/ops_index.cpp): they run on
// every backend, fuse, and differentiate and batch through the primitives' rules ----

// log(1 + x) and exp(x) - 1, accurate near 0 (Goldberg's and Kahan's corrections).
Array log1p(const Array& a, StreamOrDevice s = {});
Array expm1(const Array& a, StreamOrDevice s = {});
// The inverse of erf on (-1, 1) (+-inf at +-1, NaN outside), as MLX's erfinv.
Array erfinv(const Array& a, StreamOrDevice s = {});
Array clip(const Array& a, const Array& low, const Array& high, StreamOrDevice s = {});
Array clip(const Array& a, double low, double high, StreamOrDevice s = {});
Array sign(const Array& a, StreamOrDevice s = {});   // -1, 0 or 1 (NaN stays NaN)
Array round(const Array& a, StreamOrDevice s = {});  // to nearest, ties to even (as NumPy)
// Variance and standard deviation over `axes` (all when empty or none), dividing by
// count - ddof; an int axis, a list of axes or none, as every reduction takes them.
// Call it kiln::std where `using namespace kiln` makes a bare `std` ambiguous.
Array var(const Array& a, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
Array var(const Array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
Array var(const Array& a, int axis, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
Array std(const Array& a, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
Array std(const Array& a, const std::vector<int>& axes, bool keepdims = false, int ddof = 0,
          StreamOrDevice s = {});
Array std(const Array& a, int axis, bool keepdims = false, int ddof = 0, StreamOrDevice s = {});
// Index of the first minimum along `axis` (int64); without an axis, over the flattened array.
Array argmin(const Array& a, bool keepdims = false, StreamOrDevice s = {});
Array argmin(const Array& a, int axis, bool keepdims = false, StreamOrDevice s = {});
// Scans along `axis` (MLX's names and arguments): `reverse` runs from the end, `inclusive`
// counts element i's own value at i (exclusive: the identity at the first place). cumsum and
// cumprod of bool, int8 and uint8 give int32 (uint32 for uint8); logcumsumexp gives a float
// type (as exp does); cummax/cummin keep the dtype (NaN propagates). Native primitives: O(n).
Array cumsum(const Array& a, int axis, StreamOrDevice s = {});
Array cumsum(const Array& a, int axis, bool reverse, bool inclusive = true, StreamOrDevice s = {});
Array cumprod(const Array& a, int axis, StreamOrDevice s = {});
Array cumprod(const Array& a, int axis, bool reverse, bool inclusive = true, StreamOrDevice s = {});
Array cummax(const Array& a, int axis, bool reverse = false, bool inclusive = true,
             StreamOrDevice s = {});
Array cummin(const Array& a, int axis, bool reverse = false, bool inclusive = true,
             StreamOrDevice s = {});
Array logcumsumexp(const Array& a, int axis, bool reverse = false, bool inclusive = true,
                   StreamOrDevice s = {});

// Indices (any integer dtype): negative ones count from the end (as NumPy); out-of-range ones
// are clamped to the nearest valid index, so no read or write is ever out of bounds.
// one_hot rows of out-of-range indices are all zero.
Array one_hot(const Array& indices, int64_t depth, Dtype dtype = float32, StreamOrDevice s = {});
// Elements of `a` at `indices` along `axis`: shape a[:axis] + indices + a[axis+1:].
Array take(const Array& a, const Array& indices, int axis, StreamOrDevice s = {});
// out[..., j, ...] = a[..., indices[..., j, ...], ...] along `axis`: indices of a's rank,
// broadcast against a on the other axes (NumPy's take_along_axis).
Array take_along_axis(const Array& a, const Array& indices, int axis, StreamOrDevice s = {});
// `a` with updates[j] added at indices[j] along `axis` (repeated indices accumulate; bool adds
// as logical or); `indices` is 1-D and `updates` has a's shape with extent len(indices) at
// `axis`.
Array scatter_add(const Array& a, const Array& indices, const Array& updates, int axis,
                  StreamOrDevice s = {});
// The scatter matching take_along_axis (JAX's a.at[...].add along one axis): updates[.., j, ..]
// is added at a[.., indices[.., j, ..], ..]; indices and updates have one shape, a's except at
// `axis`.
Array scatter_add_along_axis(const Array& a, const Array& indices, const Array& updates, int axis,
                             StreamOrDevice s = {});
// Sorted along `axis` (ascending, stable, NaN last, as NumPy) and the int64 permutation that
// sorts. Native primitives: radix sorts on cpu.
Array sort(const Array& a, int axis = -1, StreamOrDevice s = {});
Array argsort(const Array& a, int axis = -1, StreamOrDevice s = {});
// The k largest along the last axis, largest first (ties: the earlier first; NaN last), and
// their int64 indices.
std::pair<Array, Array> topk(const Array& a, int k, StreamOrDevice s = {});
// MLX's partition/argpartition: element `kth` of the result along `axis` is the one a sort
// would put there, those before it are not greater and those after not smaller. Computed by a
// full sort, which satisfies that (and orders the rest as well).
Array partition(const Array& a, int kth, int axis = -1, StreamOrDevice s = {});
Array argpartition(const Array& a, int kth, int axis = -1, StreamOrDevice s = {});

Array stack(const std::vector<Array>& arrays, int axis = 0, StreamOrDevice s = {});
// `sections` equal parts along `axis`, or the parts between `indices`.
std::vector<Array> split(const Array& a, int sections, int axis = 0, StreamOrDevice s = {});
std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis = 0,
                         StreamOrDevice s = {});
// `widths[i]` = (before, after) elements of `value` added along axis i.
Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& widths, double value = 0,
          StreamOrDevice s = {});
// Lower / upper triangle of the last two axes (k: diagonal offset, as NumPy); the rest zero.
Array tril(const Array& a, int k = 0, StreamOrDevice s = {});
Array triu(const Array& a, int k = 0, StreamOrDevice s = {});

// ---- operators; a C++ scalar operand is "weak": it takes the array's dtype when the kinds
// match (int with int, float with float), so x * 2.0 keeps float32 ----
Array operator-(const Array& a);
Array operator!(const Array& a);
Array operator+(const Array& a, const Array& b);
Array operator-(const Array& a, const Array& b);
Array operator*(const Array& a, const Array& b);
Array operator/(const Array& a, const Array& b);
Array operator<(const Array& a, const Array& b);
Array operator<=(const Array& a, const Array& b);
Array operator>(const Array& a, const Array& b);
Array operator>=(const Array& a, const Array& b);
Array operator==(const Array& a, const Array& b);
Array operator!=(const Array& a, const Array& b);
Array operator&&(const Array& a, const Array& b);
Array operator||(const Array& a, const Array& b);
Array operator%(const Array& a, const Array& b);  // remainder (floor_divide has no operator)
Array operator&(const Array& a, const Array& b);
Array operator|(const Array& a, const Array& b);
Array operator^(const Array& a, const Array& b);
Array operator<<(const Array& a, const Array& b);
Array operator>>(const Array& a, const Array& b);
Array operator~(const Array& a);

// An evaluated 0-d array holding `v` (no kernel runs to make it).
Array scalar_constant(Scalar v, StreamOrDevice s = {});
// A scalar as a 0-d array typed to combine with `like` without widening it: an int scalar
// takes an int or float array's dtype (raising kiln::Error when it is not a value of that int
// dtype: uint8 + 300, uint8 * -1, as NumPy 2 and MLX do), a float scalar a float array's.
// With a bool array an int scalar is int32; with a bool or int array a float scalar is float32.
Array weak_scalar(Scalar v, const Array& like);
Array weak_scalar(double v, bool is_float, const Array& like);

// Any C++ arithmetic value as a Scalar of the widest dtype of its kind (exact).
template <typename T>
Scalar scalar_of(T v) {
  if constexpr (std::is_same_v<T, bool>)
    return Scalar::of(v);
  else if constexpr (std::is_floating_point_v<T>)
    return Scalar::of(static_cast<double>(v));
  else if constexpr (std::is_signed_v<T>)
    return Scalar::of(static_cast<int64_t>(v));
  else
    return Scalar::of(static_cast<uint64_t>(v));
}

#define KILN_SCALAR_OPERATOR(OP)                                              \
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>> \
  Array operator OP(const Array& a, T v) {                                    \
    return a OP weak_scalar(scalar_of(v), a);                                 \
  }                                                                           \
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>> \
  Array operator OP(T v, const Array& a) {                                    \
    return weak_scalar(scalar_of(v), a) OP a;                                 \
  }
KILN_SCALAR_OPERATOR(+)
KILN_SCALAR_OPERATOR(-)
KILN_SCALAR_OPERATOR(*)
KILN_SCALAR_OPERATOR(/)
KILN_SCALAR_OPERATOR(<)
KILN_SCALAR_OPERATOR(<=)
KILN_SCALAR_OPERATOR(>)
KILN_SCALAR_OPERATOR(>=)
KILN_SCALAR_OPERATOR(==)
KILN_SCALAR_OPERATOR(!=)
KILN_SCALAR_OPERATOR(%)
KILN_SCALAR_OPERATOR(&)
KILN_SCALAR_OPERATOR(|)
KILN_SCALAR_OPERATOR(^)
KILN_SCALAR_OPERATOR(<<)
KILN_SCALAR_OPERATOR(>>)
#undef KILN_SCALAR_OPERATOR

}  // namespace kiln
