// Python values -> Kiln values (kiln_py.h): scalars, nested sequences, array-likes, dtypes,
// streams and axes.
#include <nanobind/stl/string.h>

#include <cmath>

#include "kiln_py.h"
#include "numpy_bridge.h"

namespace kiln::py {
namespace {

Scalar python_scalar(nb::handle obj) {
  if (nb::isinstance<nb::bool_>(obj)) return Scalar::of(nb::cast<bool>(obj));
  if (nb::isinstance<nb::int_>(obj)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
    if (overflow > 0) {
      unsigned long long u = PyLong_AsUnsignedLongLong(obj.ptr());
      if (PyErr_Occurred()) {
        PyErr_Clear();
        throw nb::value_error("an int does not fit 64 bits (Kiln's widest integer is uint64)");
      }
      return Scalar::of(static_cast<uint64_t>(u));
    }
    if (overflow < 0) throw nb::value_error("an int is below int64's range");
    return Scalar::of(static_cast<int64_t>(v));
  }
  return Scalar::of(nb::cast<double>(obj));
}

// The default dtype of a lone Python scalar, as MLX: bool, int32 (int64 when needed), float32.
Dtype default_dtype(const Scalar& s) {
  if (s.dtype == bool_) return bool_;
  if (s.dtype == float64) return float32;
  if (s.dtype == uint64) return uint64;
  return (s.i >= INT32_MIN && s.i <= INT32_MAX) ? int32 : int64;
}

// Nested Python sequences of scalars: their shape, values and the kind that holds them all.
struct Nested {
  Shape shape;
  std::vector<double> f;
  std::vector<int64_t> i;
  bool any_float = false, any_int = false, any_bool = false, wide = false;
};

void walk(nb::handle x, size_t depth, Nested& n) {
  if (nb::isinstance<nb::list>(x) || nb::isinstance<nb::tuple>(x)) {
    int64_t len = static_cast<int64_t>(nb::len(x));
    if (depth == n.shape.size())
      n.shape.push_back(len);
    else if (depth > n.shape.size() || n.shape[depth] != len)
      throw nb::value_error(
          "array: the nested lists are ragged (every level must have one length)");
    for (nb::handle c : x) walk(c, depth + 1, n);
    return;
  }
  if (depth != n.shape.size())
    throw nb::value_error("array: the nested lists are ragged (every level must have one length)");
  if (!is_python_scalar(x)) {
    std::string type = nb::type_name(x.type()).c_str();
    throw nb::value_error(("array: a nested list holds a " + type +
                           "; expected bool, int, float or nested lists of them")
                              .c_str());
  }
  Scalar s = python_scalar(x);
  if (s.dtype == bool_) n.any_bool = true;
  if (s.dtype.is_int()) n.any_int = true;
  if (s.dtype.is_float()) n.any_float = true;
  if (s.dtype.is_int() && default_dtype(s) != int32) n.wide = true;
  n.f.push_back(s.dtype.is_float() ? s.f : static_cast<double>(s.i));
  n.i.push_back(s.dtype.is_float() ? 0 : s.i);
}

bool holds_arrays(nb::handle x) {
  if (nb::isinstance<Array>(x)) return true;
  if (nb::isinstance<nb::list>(x) || nb::isinstance<nb::tuple>(x))
    for (nb::handle c : x)
      if (holds_arrays(c)) return true;
  return false;
}

Array from_sequence(nb::handle x, std::optional<Dtype> dtype) {
  if (holds_arrays(x)) {  // a list of arrays (or of lists of them) stacks, as in MLX
    std::vector<Array> parts;
    for (nb::handle c : x) parts.push_back(to_array(c, dtype));
    if (parts.empty()) return zeros({0}, dtype.value_or(float32));
    return stack(parts, 0);
  }
  Nested n;
  walk(x, 0, n);
  Dtype d = dtype         ? *dtype
            : n.any_float ? float32
            : n.any_int   ? (n.wide ? int64 : int32)
            : n.any_bool  ? bool_
                          : float32;
  if (n.any_float || d.is_float()) return array(n.f, n.shape, d);
  return array(n.i, n.shape, d);
}

}  // namespace

bool is_python_scalar(nb::handle obj) {
  return nb::isinstance<nb::bool_>(obj) || nb::isinstance<nb::int_>(obj) ||
         nb::isinstance<nb::float_>(obj);
}

Array to_array(nb::handle obj, std::optional<Dtype> dtype) {
  if (nb::isinstance<Array>(obj)) {
    Array a = nb::cast<Array>(obj);
    return dtype && *dtype != a.dtype() ? astype(a, *dtype) : a;
  }
  if (is_python_scalar(obj)) {
    Scalar s = python_scalar(obj);
    return scalar_constant(s.cast(dtype.value_or(default_dtype(s))));
  }
  if (nb::isinstance<nb::list>(obj) || nb::isinstance<nb::tuple>(obj))
    return from_sequence(obj, dtype);
  if (auto a = from_array_like(obj)) return dtype && *dtype != a->dtype() ? astype(*a, *dtype) : *a;
  std::string type = nb::type_name(obj.type()).c_str();
  throw nb::type_error(("cannot make a kiln array from a " + type +
                        "; expected an array, a bool/int/float, nested lists of them, or an "
                        "object with __dlpack__ or the buffer protocol (NumPy arrays)")
                           .c_str());
}

Array operand(nb::handle obj, const Array* like) {
  if (nb::isinstance<Array>(obj)) return nb::cast<Array>(obj);
  if (like && is_python_scalar(obj)) return weak_scalar(python_scalar(obj), *like);
  return to_array(obj);
}

std::pair<Array, Array> operands(nb::handle a, nb::handle b) {
  bool a_arr = nb::isinstance<Array>(a), b_arr = nb::isinstance<Array>(b);
  if (a_arr || !is_python_scalar(a)) {
    Array x = operand(a, nullptr);
    return {x, operand(b, &x)};
  }
  if (b_arr || !is_python_scalar(b)) {
    Array y = operand(b, nullptr);
    return {operand(a, &y), y};
  }
  Array x = to_array(a);
  Array y = to_array(b);
  return {x, y};
}

StreamOrDevice to_stream_or_device(nb::handle obj) {
  if (obj.is_none()) return std::monostate{};
  if (nb::isinstance<Stream>(obj)) return nb::cast<Stream>(obj);
  if (nb::isinstance<Device>(obj)) return nb::cast<Device>(obj);
  if (nb::isinstance<nb::str>(obj)) return device(nb::cast<std::string>(obj));
  std::string type = nb::type_name(obj.type()).c_str();
  throw nb::type_error(
      ("stream= takes None, a kiln.Stream, a kiln.Device or a device name; got a " + type).c_str());
}

Dtype to_dtype(nb::handle obj) {
  if (nb::isinstance<Dtype>(obj)) return nb::cast<Dtype>(obj);
  if (nb::isinstance<nb::str>(obj)) return dtype_from_name(nb::cast<std::string>(obj));
  // Python's own types, as NumPy accepts them: bool, int, float.
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return bool_;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return int32;
  if (obj.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return float32;
  if (nb::hasattr(obj, "name") && nb::hasattr(obj, "itemsize"))  // a NumPy dtype or type
    return dtype_from_name(nb::cast<std::string>(obj.attr("name")));
  std::string type = nb::type_name(obj.type()).c_str();
  throw nb::type_error(("expected a kiln dtype (kiln.float32, ...); got a " + type).c_str());
}

std::optional<Dtype> optional_dtype(nb::handle obj) {
  if (obj.is_none()) return std::nullopt;
  return to_dtype(obj);
}

std::vector<int> to_axes(nb::handle obj) {
  if (nb::isinstance<nb::int_>(obj)) return {nb::cast<int>(obj)};
  std::vector<int> axes;
  for (nb::handle h : obj) axes.push_back(nb::cast<int>(h));
  return axes;
}

}  // namespace kiln::py
