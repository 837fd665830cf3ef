// Every op of kiln.h as a module function with mlx.core's name, positional-or-keyword arguments
// and keyword-only `stream=`. Array arguments accept anything kiln.array does; Python scalars in
// binary ops are weak (x * 2.0 keeps x's float16).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln_py.h"

namespace kiln::py {
namespace {

using namespace nb::literals;
using Unary = Array (*)(const Array&, StreamOrDevice);
using Binary = Array (*)(const Array&, const Array&, StreamOrDevice);

Array A(nb::handle h) { return to_array(h); }
StreamOrDevice S(nb::handle h) { return to_stream_or_device(h); }

Shape to_shape(nb::handle h) {
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  Shape s;
  for (nb::handle x : h) s.push_back(nb::cast<int64_t>(x));
  return s;
}

void def_unary(nb::module_& m, const char* name, Unary f) {
  m.def(
      name, [f](nb::handle a, nb::handle stream) { return f(A(a), S(stream)); }, "a"_a,
      nb::kw_only(), "stream"_a = nb::none());
}

void def_binary(nb::module_& m, const char* name, Binary f) {
  m.def(
      name,
      [f](nb::handle a, nb::handle b, nb::handle stream) {
        auto [x, y] = operands(a, b);
        return f(x, y, S(stream));
      },
      "a"_a, "b"_a, nb::kw_only(), "stream"_a = nb::none());
}

// MLX reductions: axis None (every axis), an int or a sequence of ints.
// MLX's `axis=None` for reductions and softmax: every axis.
std::vector<int> axes_or_all(const Array& a, nb::handle axis) {
  if (!axis.is_none()) return to_axes(axis);
  std::vector<int> axes(static_cast<size_t>(a.ndim()));
  for (int i = 0; i < a.ndim(); ++i) axes[static_cast<size_t>(i)] = i;
  return axes;
}

using Reduce = Array (*)(const Array&, const std::vector<int>&, bool, StreamOrDevice);

void def_reduce(nb::module_& m, const char* name, Reduce f) {
  m.def(
      name,
      [f](nb::handle a, nb::handle axis, bool keepdims, nb::handle stream) {
        Array x = A(a);
        return f(x, axes_or_all(x, axis), keepdims, S(stream));
      },
      "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(), "stream"_a = nb::none());
}

Array arg_reduce(bool is_max, const Array& a, nb::handle axis, bool keepdims, StreamOrDevice s) {
  if (axis.is_none()) {
    Array flat = reshape(a, {-1}, s);
    Array r = is_max ? argmax(flat, 0, false, s) : argmin(flat, 0, false, s);
    if (!keepdims) return r;
    return reshape(r, Shape(static_cast<size_t>(a.ndim()), 1), s);
  }
  int ax = nb::cast<int>(axis);
  return is_max ? argmax(a, ax, keepdims, s) : argmin(a, ax, keepdims, s);
}

// Ops with an optional axis that flatten first when it is None (take, sort, cumsum, ...).
std::pair<Array, int> flat_or_axis(const Array& a, nb::handle axis, const StreamOrDevice& s) {
  if (axis.is_none()) return {reshape(a, {-1}, s), 0};
  return {a, nb::cast<int>(axis)};
}

void def_creation(nb::module_& m) {
  // kiln.array itself is the class (array.cpp); asarray is the same conversion.
  m.def(
      "asarray", [](nb::handle v, nb::handle dtype) { return to_array(v, optional_dtype(dtype)); },
      "val"_a, "dtype"_a = nb::none());
  m.def(
      "zeros",
      [](nb::handle shape, nb::handle dtype, nb::handle s) {
        return zeros(to_shape(shape), dtype.is_none() ? float32 : to_dtype(dtype), S(s));
      },
      "shape"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "ones",
      [](nb::handle shape, nb::handle dtype, nb::handle s) {
        return ones(to_shape(shape), dtype.is_none() ? float32 : to_dtype(dtype), S(s));
      },
      "shape"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "full",
      [](nb::handle shape, nb::handle vals, nb::handle dtype, nb::handle s) {
        std::optional<Dtype> d;
        if (!dtype.is_none()) d = to_dtype(dtype);
        Array v = to_array(vals, d);
        return broadcast_to(v, to_shape(shape), S(s));
      },
      "shape"_a, "vals"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "zeros_like", [](nb::handle a, nb::handle s) { return zeros_like(A(a), S(s)); }, "a"_a,
      nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "ones_like", [](nb::handle a, nb::handle s) { return ones_like(A(a), S(s)); }, "a"_a,
      nb::kw_only(), "stream"_a = nb::none());
  // arange(stop), arange(start, stop[, step]); ints give int32 as in MLX, floats float32.
  m.def(
      "arange",
      [](nb::handle start, nb::handle stop, nb::handle step, nb::handle dtype, nb::handle s) {
        bool any_float = nb::isinstance<nb::float_>(start) || nb::isinstance<nb::float_>(stop) ||
                         nb::isinstance<nb::float_>(step);
        double lo = 0, hi, st = step.is_none() ? 1 : nb::cast<double>(step);
        if (stop.is_none())
          hi = nb::cast<double>(start);
        else
          lo = nb::cast<double>(start), hi = nb::cast<double>(stop);
        Dtype d = !dtype.is_none() ? to_dtype(dtype) : any_float ? float32 : int32;
        return arange(lo, hi, st, d, S(s));
      },
      "start"_a, "stop"_a = nb::none(), "step"_a = nb::none(), "dtype"_a = nb::none(),
      nb::kw_only(), "stream"_a = nb::none());
}

void def_elementwise(nb::module_& m) {
  def_unary(m, "negative", negative);
  def_unary(m, "abs", abs);
  def_unary(m, "exp", exp);
  def_unary(m, "log", log);
  def_unary(m, "sqrt", sqrt);
  def_unary(m, "rsqrt", rsqrt);
  def_unary(m, "sin", sin);
  def_unary(m, "cos", cos);
  def_unary(m, "tanh", tanh);
  def_unary(m, "erf", erf);
  def_unary(m, "sigmoid", sigmoid);
  def_unary(m, "floor", floor);
  def_unary(m, "ceil", ceil);
  def_unary(m, "logical_not", logical_not);
  def_unary(m, "log1p", log1p);
  def_unary(m, "expm1", expm1);
  def_unary(m, "sign", sign);
  m.def(
      "round",
      [](nb::handle a, int decimals, nb::handle s) {
        if (decimals == 0) return round(A(a), S(s));
        Array x = A(a);
        double scale = std::pow(10.0, decimals);
        return divide(round(multiply(x, weak_scalar(scale, true, x), S(s)), S(s)),
                      weak_scalar(scale, true, x), S(s));
      },
      "a"_a, "decimals"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  def_binary(m, "add", add);
  def_binary(m, "subtract", subtract);
  def_binary(m, "multiply", multiply);
  def_binary(m, "divide", divide);
  def_binary(m, "power", power);
  def_binary(m, "maximum", maximum);
  def_binary(m, "minimum", minimum);
  def_binary(m, "equal", equal);
  def_binary(m, "not_equal", not_equal);
  def_binary(m, "less", less);
  def_binary(m, "less_equal", less_equal);
  def_binary(m, "greater", greater);
  def_binary(m, "greater_equal", greater_equal);
  def_binary(m, "logical_and", logical_and);
  def_binary(m, "logical_or", logical_or);
  def_binary(m, "floor_divide", floor_divide);
  def_binary(m, "remainder", remainder);
  def_binary(m, "bitwise_and", bitwise_and);
  def_binary(m, "bitwise_or", bitwise_or);
  def_binary(m, "bitwise_xor", bitwise_xor);
  def_binary(m, "left_shift", left_shift);
  def_binary(m, "right_shift", right_shift);
  def_unary(m, "bitwise_invert", bitwise_invert);
  m.def(
      "divmod",
      [](nb::handle a, nb::handle b, nb::handle s) {
        auto [x, y] = operands(a, b);
        return nb::make_tuple(floor_divide(x, y, S(s)), remainder(x, y, S(s)));
      },
      "a"_a, "b"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "where",
      [](nb::handle c, nb::handle x, nb::handle y, nb::handle s) {
        auto [a, b] = operands(x, y);
        return where(A(c), a, b, S(s));
      },
      "condition"_a, "x"_a, "y"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "astype",
      [](nb::handle a, nb::handle dtype, nb::handle s) {
        return astype(A(a), to_dtype(dtype), S(s));
      },
      "a"_a, "dtype"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "clip",
      [](nb::handle a, nb::handle lo, nb::handle hi, nb::handle s) {
        Array x = A(a);
        Array r = x;
        if (!lo.is_none()) r = maximum(r, operand(lo, &x), S(s));
        if (!hi.is_none()) r = minimum(r, operand(hi, &x), S(s));
        return r;
      },
      "a"_a, "a_min"_a, "a_max"_a, nb::kw_only(), "stream"_a = nb::none());
}

void def_reductions(nb::module_& m) {
  def_reduce(m, "sum", [](const Array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) {
    return sum(a, ax, k, std::move(s));
  });
  def_reduce(m, "max", [](const Array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) {
    return max(a, ax, k, std::move(s));
  });
  def_reduce(m, "min", [](const Array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) {
    return min(a, ax, k, std::move(s));
  });
  def_reduce(m, "prod", [](const Array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) {
    return prod(a, ax, k, std::move(s));
  });
  def_reduce(m, "mean", [](const Array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) {
    return mean(a, ax, k, std::move(s));
  });
  def_reduce(m, "logsumexp",
             [](const Array& a, const std::vector<int>& ax, bool k, StreamOrDevice s) {
               return logsumexp(a, ax, k, std::move(s));
             });
  for (bool is_std : {false, true})
    m.def(
        is_std ? "std" : "var",
        [is_std](nb::handle a, nb::handle axis, bool keepdims, int ddof, nb::handle s) {
          Array x = A(a);
          std::vector<int> axes = axes_or_all(x, axis);
          return is_std ? kiln::std(x, axes, keepdims, ddof, S(s))
                        : var(x, axes, keepdims, ddof, S(s));
        },
        "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, "ddof"_a = 0, nb::kw_only(),
        "stream"_a = nb::none());
  for (bool is_max : {true, false})
    m.def(
        is_max ? "argmax" : "argmin",
        [is_max](nb::handle a, nb::handle axis, bool keepdims, nb::handle s) {
          return arg_reduce(is_max, A(a), axis, keepdims, S(s));
        },
        "a"_a, "axis"_a = nb::none(), "keepdims"_a = false, nb::kw_only(), "stream"_a = nb::none());
}

void def_shapes(nb::module_& m) {
  m.def(
      "reshape",
      [](nb::handle a, nb::handle shape, nb::handle s) {
        return reshape(A(a), to_shape(shape), S(s));
      },
      "a"_a, "shape"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "flatten",
      [](nb::handle a, int start, int end, nb::handle s) {
        return flatten(A(a), start, end, S(s));
      },
      "a"_a, "start_axis"_a = 0, "end_axis"_a = -1, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "squeeze",
      [](nb::handle a, nb::handle axis, nb::handle s) {
        return axis.is_none() ? squeeze(A(a), S(s)) : squeeze(A(a), to_axes(axis), S(s));
      },
      "a"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "expand_dims",
      [](nb::handle a, nb::handle axis, nb::handle s) {
        return expand_dims(A(a), to_axes(axis), S(s));
      },
      "a"_a, "axis"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "transpose",
      [](nb::handle a, nb::handle axes, nb::handle s) {
        return axes.is_none() ? transpose(A(a), S(s)) : transpose(A(a), to_axes(axes), S(s));
      },
      "a"_a, "axes"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "moveaxis",
      [](nb::handle a, int src, int dst, nb::handle s) { return moveaxis(A(a), src, dst, S(s)); },
      "a"_a, "source"_a, "destination"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "swapaxes",
      [](nb::handle a, int a1, int a2, nb::handle s) { return swapaxes(A(a), a1, a2, S(s)); },
      "a"_a, "axis1"_a, "axis2"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "broadcast_to",
      [](nb::handle a, nb::handle shape, nb::handle s) {
        return broadcast_to(A(a), to_shape(shape), S(s));
      },
      "a"_a, "shape"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "stop_gradient", [](nb::handle a, nb::handle s) { return stop_gradient(A(a), S(s)); }, "a"_a,
      nb::kw_only(), "stream"_a = nb::none());
  auto arrays_of = [](nb::handle seq) {
    std::vector<Array> v;
    for (nb::handle h : seq) v.push_back(A(h));
    return v;
  };
  m.def(
      "concatenate",
      [arrays_of](nb::handle arrays, nb::handle axis, nb::handle s) {
        std::vector<Array> v = arrays_of(arrays);
        if (axis.is_none()) {
          for (Array& a : v) a = reshape(a, {-1}, S(s));
          return concatenate(v, 0, S(s));
        }
        return concatenate(v, nb::cast<int>(axis), S(s));
      },
      "arrays"_a, "axis"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "stack",
      [arrays_of](nb::handle arrays, int axis, nb::handle s) {
        return stack(arrays_of(arrays), axis, S(s));
      },
      "arrays"_a, "axis"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "split",
      [](nb::handle a, nb::handle idx, int axis, nb::handle s) {
        if (nb::isinstance<nb::int_>(idx)) return split(A(a), nb::cast<int>(idx), axis, S(s));
        std::vector<int64_t> ind;
        for (nb::handle h : idx) ind.push_back(nb::cast<int64_t>(h));
        return split(A(a), ind, axis, S(s));
      },
      "a"_a, "indices_or_sections"_a, "axis"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "pad",
      [](nb::handle a, nb::handle width, const std::string& mode, double value, nb::handle s) {
        if (mode != "constant") throw nb::value_error("pad: only mode='constant' is supported");
        Array x = A(a);
        std::vector<std::pair<int64_t, int64_t>> w;
        auto pair_of = [](nb::handle h) -> std::pair<int64_t, int64_t> {
          if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h), nb::cast<int64_t>(h)};
          nb::sequence seq = nb::borrow<nb::sequence>(h);
          if (nb::len(seq) == 1) return {nb::cast<int64_t>(seq[0]), nb::cast<int64_t>(seq[0])};
          return {nb::cast<int64_t>(seq[0]), nb::cast<int64_t>(seq[1])};
        };
        bool one = nb::isinstance<nb::int_>(width) ||
                   (nb::len(width) > 0 && nb::isinstance<nb::int_>(width[0]));
        for (int i = 0; i < x.ndim(); ++i) w.push_back(one ? pair_of(width) : pair_of(width[i]));
        return pad(x, w, value, S(s));
      },
      "a"_a, "pad_width"_a, "mode"_a = "constant", "constant_values"_a = 0.0, nb::kw_only(),
      "stream"_a = nb::none());
  m.def(
      "tril", [](nb::handle a, int k, nb::handle s) { return tril(A(a), k, S(s)); }, "x"_a,
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "triu", [](nb::handle a, int k, nb::handle s) { return triu(A(a), k, S(s)); }, "x"_a,
      "k"_a = 0, nb::kw_only(), "stream"_a = nb::none());
}

void def_composites(nb::module_& m) {
  m.def(
      "matmul", [](nb::handle a, nb::handle b, nb::handle s) { return matmul(A(a), A(b), S(s)); },
      "a"_a, "b"_a, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "softmax",
      [](nb::handle a, nb::handle axis, bool precise, nb::handle s) {
        Array x = A(a);
        (void)precise;  // Kiln computes half types in float32 already
        return softmax(x, axes_or_all(x, axis), S(s));
      },
      "a"_a, "axis"_a = nb::none(), nb::kw_only(), "precise"_a = false, "stream"_a = nb::none());
  // The scans are native primitives with MLX's reverse and inclusive.
  using ScanFn = Array (*)(const Array&, int, bool, bool, StreamOrDevice);
  static const std::pair<const char*, ScanFn> scans[] = {
      {"cumsum", [](const Array& x, int ax, bool r, bool i,
                    StreamOrDevice s) { return cumsum(x, ax, r, i, s); }},
      {"cumprod", [](const Array& x, int ax, bool r, bool i,
                     StreamOrDevice s) { return cumprod(x, ax, r, i, s); }},
      {"cummax", cummax},
      {"cummin", cummin},
      {"logcumsumexp", logcumsumexp}};
  for (const auto& [name, fn] : scans)
    m.def(
        name,
        [fn = fn](nb::handle a, nb::handle axis, bool reverse, bool inclusive, nb::handle s) {
          auto sod = S(s);
          auto [x, ax] = flat_or_axis(A(a), axis, sod);
          return fn(x, ax, reverse, inclusive, sod);
        },
        "a"_a, "axis"_a = nb::none(), nb::kw_only(), "reverse"_a = false, "inclusive"_a = true,
        "stream"_a = nb::none());
  m.def(
      "take",
      [](nb::handle a, nb::handle idx, nb::handle axis, nb::handle s) {
        auto sod = S(s);
        auto [x, ax] = flat_or_axis(A(a), axis, sod);
        return take(x, A(idx), ax, sod);
      },
      "a"_a, "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "take_along_axis",
      [](nb::handle a, nb::handle idx, nb::handle axis, nb::handle s) {
        auto sod = S(s);
        Array i = A(idx);
        if (axis.is_none())
          return take_along_axis(reshape(A(a), {-1}, sod), reshape(i, {-1}, sod), 0, sod);
        return take_along_axis(A(a), i, nb::cast<int>(axis), sod);
      },
      "a"_a, "indices"_a, "axis"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
  for (bool arg : {false, true})
    m.def(
        arg ? "argsort" : "sort",
        [arg](nb::handle a, nb::handle axis, nb::handle s) {
          auto sod = S(s);
          auto [x, ax] = flat_or_axis(A(a), axis, sod);
          return arg ? argsort(x, ax, sod) : sort(x, ax, sod);
        },
        "a"_a, "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none());
  // MLX's topk returns the k largest values only; Kiln's are ordered largest first.
  m.def(
      "topk",
      [](nb::handle a, int k, nb::handle axis, nb::handle s) {
        auto sod = S(s);
        Array x = A(a);
        int ax = axis.is_none() ? -1 : nb::cast<int>(axis);
        if (axis.is_none()) x = reshape(x, {-1}, sod);
        int last = x.ndim() - 1;
        if (ax != -1 && ax != last) x = swapaxes(x, ax, last, sod);
        Array v = topk(x, k, sod).first;
        if (ax != -1 && ax != last) v = swapaxes(v, ax, last, sod);
        return v;
      },
      "a"_a, "k"_a, "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "scatter_add",
      [](nb::handle a, nb::handle idx, nb::handle upd, int axis, nb::handle s) {
        return scatter_add(A(a), A(idx), A(upd), axis, S(s));
      },
      "a"_a, "indices"_a, "updates"_a, "axis"_a = 0, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "scatter_add_along_axis",
      [](nb::handle a, nb::handle idx, nb::handle upd, int axis, nb::handle s) {
        return scatter_add_along_axis(A(a), A(idx), A(upd), axis, S(s));
      },
      "a"_a, "indices"_a, "updates"_a, "axis"_a, nb::kw_only(), "stream"_a = nb::none());
  for (bool arg : {false, true})
    m.def(
        arg ? "argpartition" : "partition",
        [arg](nb::handle a, int kth, nb::handle axis, nb::handle s) {
          auto sod = S(s);
          auto [x, ax] = flat_or_axis(A(a), axis, sod);
          return arg ? argpartition(x, kth, ax, sod) : partition(x, kth, ax, sod);
        },
        "a"_a, "kth"_a, "axis"_a = -1, nb::kw_only(), "stream"_a = nb::none());
  m.def(
      "one_hot",
      [](nb::handle idx, int64_t depth, nb::handle dtype, nb::handle s) {
        return one_hot(A(idx), depth, dtype.is_none() ? float32 : to_dtype(dtype), S(s));
      },
      "indices"_a, "depth"_a, "dtype"_a = nb::none(), nb::kw_only(), "stream"_a = nb::none());
}

}  // namespace

void init_ops(nb::module_& m) {
  def_creation(m);
  def_elementwise(m);
  def_reductions(m);
  def_shapes(m);
  def_composites(m);
}

}  // namespace kiln::py
