#include "graph/scalar.h"

#include <cstring>
#include <sstream>

namespace kiln {

Scalar Scalar::cast(Dtype to) const {
  Scalar r;
  r.dtype = to;
  switch (to.kind) {
    case Dtype::Kind::Bool: r.i = dtype.is_float() ? (f != 0) : (i != 0); break;
    case Dtype::Kind::Int32:
      r.i = static_cast<int32_t>(dtype.is_float() ? static_cast<int64_t>(f) : i);
      break;
    case Dtype::Kind::Int64: r.i = dtype.is_float() ? static_cast<int64_t>(f) : i; break;
    case Dtype::Kind::Float32: r.f = static_cast<float>(as_double()); break;
    case Dtype::Kind::Float64: r.f = as_double(); break;
  }
  return r;
}

bool Scalar::operator==(const Scalar& o) const {
  // Bitwise for floats so that NaN constants compare equal to themselves (CSE, hashing).
  return dtype == o.dtype && i == o.i && std::memcmp(&f, &o.f, sizeof f) == 0;
}

std::string Scalar::str() const {
  std::ostringstream os;
  os.precision(17);
  if (dtype.is_float())
    os << f;
  else if (dtype.is_bool())
    os << (i ? "true" : "false");
  else
    os << i;
  return os.str();
}

}  // namespace kiln
