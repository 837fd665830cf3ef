// The `kiln.array` class and `kiln.Dtype`: properties, conversion to Python values, operators
// and the methods MLX's array has. NumPy interop is numpy.cpp, indexing indexing.cpp.
#include <nanobind/operators.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <sstream>

#include "numpy_bridge.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

nb::object element(const Array& flat_cpu, Dtype d, int64_t i, const std::vector<double>& f,
                   const std::vector<int64_t>& n) {
  (void)flat_cpu;
  if (d == bool_) return nb::bool_(n[i] != 0);
  if (d.is_float()) return nb::float_(f[i]);
  if (d == uint64) return nb::steal(PyLong_FromUnsignedLongLong(static_cast<uint64_t>(n[i])));
  return nb::int_(n[i]);
}

// Nested lists of Python scalars for the whole array (tolist).
nb::object nested(const Shape& shape, size_t axis, int64_t& next, Dtype d,
                  const std::vector<double>& f, const std::vector<int64_t>& n, const Array& a) {
  if (axis == shape.size()) return element(a, d, next++, f, n);
  nb::list out;
  for (int64_t i = 0; i < shape[axis]; ++i) out.append(nested(shape, axis + 1, next, d, f, n, a));
  return out;
}

nb::object to_python(const Array& a) {
  wait_for({a});
  std::vector<double> f;
  std::vector<int64_t> n;
  if (a.dtype().is_float())
    f = a.to_vector<double>();
  else if (a.dtype() == uint64) {
    for (uint64_t v : a.to_vector<uint64_t>()) n.push_back(static_cast<int64_t>(v));
  } else
    n = a.to_vector<int64_t>();
  int64_t next = 0;
  return nested(a.shape(), 0, next, a.dtype(), f, n, a);
}

// MLX's repr: array([[1, 2],\n       [3, 4]], dtype=int32).
std::string format_element(nb::handle v, Dtype d) {
  if (d == bool_) return nb::cast<bool>(v) ? "true" : "false";
  if (!d.is_float()) return nb::cast<std::string>(nb::str(v));
  double x = nb::cast<double>(v);
  std::ostringstream os;
  os.precision(d == float64 ? 15 : d.is_half() ? 4 : 7);
  os << x;
  return os.str();
}

void format_nested(nb::handle v, size_t depth, size_t ndim, Dtype d, std::string& out) {
  if (depth == ndim) {
    out += format_element(v, d);
    return;
  }
  out += "[";
  size_t n = nb::len(v), i = 0;
  bool elide = n > 12;
  for (nb::handle c : v) {
    if (elide && i == 3) out += "..., ";
    if (!elide || i < 3 || i >= n - 3) {
      format_nested(c, depth + 1, ndim, d, out);
      if (i + 1 < n) out += depth + 1 == ndim ? ", " : ",\n" + std::string(7 + depth, ' ');
    }
    ++i;
  }
  out += "]";
}

std::string repr(const Array& a) {
  if (a.is_placeholder())
    return "array(shape=" + nb::cast<std::string>(nb::str(nb::cast(a.shape()))) +
           ", dtype=" + a.dtype().name() + ", traced)";
  std::string body;
  format_nested(to_python(a), 0, static_cast<size_t>(a.ndim()), a.dtype(), body);
  return "array(" + body + ", dtype=" + a.dtype().name() + ")";
}

nb::tuple shape_tuple(const Array& a) {
  nb::list l;
  for (int64_t n : a.shape()) l.append(n);
  return nb::tuple(l);
}

nb::object item(const Array& a) {
  if (a.size() != 1)
    throw nb::value_error(("item(): the array has " + std::to_string(a.size()) +
                           " elements; item() needs exactly one (tolist() reads them all)")
                              .c_str());
  nb::object l = to_python(reshape(a, {}));
  return l;
}

std::vector<int> axes_args(const nb::args& args) {
  if (args.size() == 1 && !nb::isinstance<nb::int_>(args[0])) return to_axes(args[0]);
  std::vector<int> axes;
  for (nb::handle h : args) axes.push_back(nb::cast<int>(h));
  return axes;
}

// Binary operators: `a op b` and the reflected `b op a`.
template <Array (*F)(const Array&, const Array&, StreamOrDevice)>
void def_operator(nb::class_<Array>& cls, const char* name, const char* rname) {
  cls.def(name, [](nb::handle a, nb::handle b) {
    auto [x, y] = operands(a, b);
    return F(x, y, {});
  });
  if (rname)
    cls.def(rname, [](nb::handle a, nb::handle b) {
      auto [x, y] = operands(b, a);
      return F(x, y, {});
    });
}

}  // namespace

// Methods that forward to the module function of the same name, so that defaults and keyword
// arguments are exactly the function's (MLX's array methods mirror its functions the same way).
void init_array_methods(nb::module_& m) {
  static const char* names[] = {
      "abs",       "exp",     "log",     "sqrt",       "rsqrt",    "sin",    "cos",     "sum",
      "max",       "min",     "prod",    "mean",       "argmax",   "argmin", "var",     "std",
      "logsumexp", "flatten", "squeeze", "swapaxes",   "moveaxis", "cumsum", "cumprod", "round",
      "split",     "log1p",   "expm1",   "tanh",       "sigmoid",  "floor",  "ceil",    "sort",
      "argsort",   "take",    "square",  "reciprocal", "all",      "any",    "cummax",  "cummin"};
  nb::handle cls = nb::type<Array>();
  for (const char* name : names) {
    if (!nb::hasattr(m, name)) continue;  // bound by a later part of the module, or not at all
    nb::object f = m.attr(name);
    nb::object method = nb::cpp_function(
        [f](nb::handle self, nb::args args, nb::kwargs kwargs) { return f(self, *args, **kwargs); },
        nb::is_method(), nb::name(name), nb::scope(cls));
    nb::setattr(cls, name, method);
  }
}

void init_dtypes(nb::module_& m) {
  nb::class_<Dtype>(m, "Dtype")
      .def_prop_ro("size", &Dtype::size)
      .def_prop_ro("name", &Dtype::name)
      .def("__repr__", [](Dtype d) { return "kiln." + d.name(); })
      .def(
          "__eq__",
          [](Dtype a, nb::handle b) { return nb::isinstance<Dtype>(b) && nb::cast<Dtype>(b) == a; })
      .def("__hash__", [](Dtype d) { return static_cast<int>(d.kind); });
  for (Dtype d : kAllDtypes) m.attr(d == bool_ ? "bool_" : d.name().c_str()) = d;
}

void init_array(nb::module_& m) {
  nb::class_<Array> cls(m, "array", nb::is_weak_referenceable(),
                        nb::type_slots(array_buffer_slots));
  cls.def(
      "__init__",
      [](Array* self, nb::handle val, nb::handle dtype) {
        new (self) Array(to_array(val, optional_dtype(dtype)));
      },
      "val"_a, "dtype"_a = nb::none());
  cls.def_prop_ro("shape", shape_tuple)
      .def_prop_ro("dtype", [](const Array& a) { return a.dtype(); })
      .def_prop_ro("ndim", [](const Array& a) { return a.ndim(); })
      .def_prop_ro("size", [](const Array& a) { return a.size(); })
      .def_prop_ro("nbytes", [](const Array& a) { return a.nbytes(); })
      .def_prop_ro("itemsize", [](const Array& a) { return a.dtype().size(); })
      .def_prop_ro("stream", [](const Array& a) { return a.stream(); })
      .def_prop_ro("device", [](const Array& a) { return a.device(); })
      .def_prop_ro("T", [](const Array& a) { return transpose(a); })
      .def("item", item)
      .def("tolist", to_python)
      .def("__repr__", repr)
      .def("__len__",
           [](const Array& a) {
             if (a.ndim() == 0) throw nb::type_error("len() of a 0-d array");
             return a.shape(0);
           })
      .def("__bool__",
           [](const Array& a) {
             if (a.size() != 1)
               throw nb::value_error(
                   "the truth value of an array with more than one element is ambiguous");
             return nb::cast<bool>(nb::bool_(item(a)));
           })
      .def("__float__", [](const Array& a) { return nb::cast<double>(nb::float_(item(a))); })
      .def("__int__", [](const Array& a) { return nb::int_(item(a)); })
      .def("__index__",
           [](const Array& a) {
             if (!a.dtype().is_int() && !a.dtype().is_bool())
               throw nb::type_error("only integer arrays can be used as an index");
             return nb::int_(item(a));
           })
      .def("__hash__", [](const Array& a) { return static_cast<int64_t>(a.id()); })
      .def(
          "astype",
          [](const Array& a, nb::handle dtype, nb::handle s) {
            return astype(a, to_dtype(dtype), to_stream_or_device(s));
          },
          "dtype"_a, "stream"_a = nb::none())
      .def(
          "reshape",
          [](const Array& a, nb::args args, nb::handle s) {
            Shape shape;
            if (args.size() == 1 && !nb::isinstance<nb::int_>(args[0]))
              for (nb::handle h : args[0]) shape.push_back(nb::cast<int64_t>(h));
            else
              for (nb::handle h : args) shape.push_back(nb::cast<int64_t>(h));
            return reshape(a, shape, to_stream_or_device(s));
          },
          "shape"_a, "stream"_a = nb::none())
      .def(
          "transpose",
          [](const Array& a, nb::args args, nb::handle s) {
            if (args.size() == 0) return transpose(a, to_stream_or_device(s));
            return transpose(a, axes_args(args), to_stream_or_device(s));
          },
          "axes"_a, "stream"_a = nb::none())
      .def("__neg__", [](const Array& a) { return negative(a); })
      .def("__abs__", [](const Array& a) { return abs(a); })
      .def("__pos__", [](const Array& a) { return a; })
      .def("__matmul__", [](const Array& a, nb::handle b) { return matmul(a, to_array(b)); })
      .def("__rmatmul__", [](const Array& a, nb::handle b) { return matmul(to_array(b), a); })
      .def("__pow__",
           [](nb::handle a, nb::handle b) {
             auto [x, y] = operands(a, b);
             return power(x, y);
           })
      .def("__rpow__", [](nb::handle a, nb::handle b) {
        auto [x, y] = operands(b, a);
        return power(x, y);
      });
  def_operator<add>(cls, "__add__", "__radd__");
  def_operator<subtract>(cls, "__sub__", "__rsub__");
  def_operator<multiply>(cls, "__mul__", "__rmul__");
  def_operator<divide>(cls, "__truediv__", "__rtruediv__");
  def_operator<equal>(cls, "__eq__", nullptr);
  def_operator<not_equal>(cls, "__ne__", nullptr);
  def_operator<less>(cls, "__lt__", nullptr);
  def_operator<less_equal>(cls, "__le__", nullptr);
  def_operator<greater>(cls, "__gt__", nullptr);
  def_operator<greater_equal>(cls, "__ge__", nullptr);
  def_operator<floor_divide>(cls, "__floordiv__", "__rfloordiv__");
  def_operator<remainder>(cls, "__mod__", "__rmod__");
  def_operator<bitwise_and>(cls, "__and__", "__rand__");
  def_operator<bitwise_or>(cls, "__or__", "__ror__");
  def_operator<bitwise_xor>(cls, "__xor__", "__rxor__");
  def_operator<left_shift>(cls, "__lshift__", "__rlshift__");
  def_operator<right_shift>(cls, "__rshift__", "__rrshift__");
  cls.def("__invert__", [](const Array& a) { return bitwise_invert(a); });
  cls.def("__divmod__", [](nb::handle a, nb::handle b) {
    auto [x, y] = operands(a, b);
    return nb::make_tuple(floor_divide(x, y), remainder(x, y));
  });
  // In-place forms rebind the name to a new array, as MLX's do (arrays are immutable values).
  def_operator<add>(cls, "__iadd__", nullptr);
  def_operator<subtract>(cls, "__isub__", nullptr);
  def_operator<multiply>(cls, "__imul__", nullptr);
  def_operator<divide>(cls, "__itruediv__", nullptr);
  def_operator<floor_divide>(cls, "__ifloordiv__", nullptr);
  def_operator<remainder>(cls, "__imod__", nullptr);
  def_operator<bitwise_and>(cls, "__iand__", nullptr);
  def_operator<bitwise_or>(cls, "__ior__", nullptr);
  def_operator<bitwise_xor>(cls, "__ixor__", nullptr);
  def_operator<left_shift>(cls, "__ilshift__", nullptr);
  def_operator<right_shift>(cls, "__irshift__", nullptr);
  cls.def("__iter__", [](nb::handle self) {
    const Array& a = nb::cast<const Array&>(self);
    if (a.ndim() == 0) throw nb::type_error("iteration over a 0-d array");
    nb::list parts;
    for (int64_t i = 0; i < a.shape(0); ++i) parts.append(self.attr("__getitem__")(i));
    return nb::iter(parts);
  });
  init_numpy(m, cls);
  init_indexing(cls);
}

}  // namespace kiln::py
