#include "graph/scalar.h"

#include <cstring>
#include <sstream>

#include "graph/element.h"

namespace kiln {

Scalar Scalar::cast(Dtype to) const {
  scalar::Val v = scalar::cast({f, i}, dtype, to);
  Scalar r;
  r.dtype = to;
  r.f = v.f;
  r.i = v.i;
  return r;
}

double Scalar::as_double() const { return scalar::to_double({f, i}, dtype); }

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
  else if (dtype == uint64)
    os << static_cast<uint64_t>(i);
  else
    os << i;
  return os.str();
}

}  // namespace kiln
