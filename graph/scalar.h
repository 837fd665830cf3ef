// A typed scalar value, used for constants in the graph (full, arange) and in Kernel IR.
// Floats live in `f`, integers and bools in `i` (uint64 as its bits), so 64-bit integers keep
// every bit. A Scalar of a float dtype holds a value exact in that dtype (cast() rounds).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

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
  // The value converted to `to` by Kiln's cast rules (graph/element.h: float->int truncates and
  // saturates, NaN -> 0; ints wrap; 16-bit floats round to nearest even).
  Scalar cast(Dtype to) const;
  double as_double() const;  // uint64 read as unsigned
  bool operator==(const Scalar& o) const;
  std::string str() const;
};

}  // namespace kiln
