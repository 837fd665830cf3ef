// A typed scalar value, used for constants in the graph (full, arange) and in Kernel IR.
// Floats live in `f`, integers and bools in `i`, so int64 values keep every bit.
#pragma once

#include <cstdint>
#include <string>

#include "graph/dtype.h"

namespace kiln {

struct Scalar {
  Dtype dtype = float32;
  double f = 0;
  int64_t i = 0;

  template <typename T>
  static Scalar of(T v) {
    Scalar s;
    s.dtype = dtype_of<T>();
    if constexpr (std::is_floating_point_v<T>)
      s.f = v;
    else
      s.i = static_cast<int64_t>(v);
    return s;
  }
  // The value converted to `to` with C++ conversion rules (float->int truncates).
  Scalar cast(Dtype to) const;
  double as_double() const { return dtype.is_float() ? f : static_cast<double>(i); }
  int64_t as_int() const { return dtype.is_float() ? static_cast<int64_t>(f) : i; }
  bool operator==(const Scalar& o) const;
  std::string str() const;
};

}  // namespace kiln
