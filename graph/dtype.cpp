#include "graph/dtype.h"

#include "graph/error.h"

namespace kiln {

size_t Dtype::size() const {
  switch (kind) {
    case Kind::Bool: return 1;
    case Kind::Int32: return 4;
    case Kind::Int64: return 8;
    case Kind::Float32: return 4;
    case Kind::Float64: return 8;
  }
  return 0;
}

std::string Dtype::name() const {
  switch (kind) {
    case Kind::Bool: return "bool";
    case Kind::Int32: return "int32";
    case Kind::Int64: return "int64";
    case Kind::Float32: return "float32";
    case Kind::Float64: return "float64";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, Dtype d) { return os << d.name(); }

Dtype dtype_from_name(const std::string& name) {
  for (Dtype d : {bool_, int32, int64, float32, float64})
    if (d.name() == name) return d;
  throw_error("unknown dtype '", name, "'; valid: bool, int32, int64, float32, float64");
}

Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  if (a.is_bool()) return b;
  if (b.is_bool()) return a;
  if (a.is_int() && b.is_int()) return int64;
  if (a.is_float() && b.is_float()) return float64;
  // One int, one float: NumPy gives float64 even for float32, which cannot hold every int32.
  return float64;
}

Dtype float_result_type(Dtype d) {
  if (d.is_float()) return d;
  if (d.is_bool()) return float32;
  return float64;
}

}  // namespace kiln
