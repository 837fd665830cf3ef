#include "graph/dtype.h"

#include "graph/error.h"

namespace kiln {

namespace {

// What a dtype can hold. Integers: value bits (excluding the sign) and signedness. Floats:
// significand digits (with the implicit bit), the largest binary exponent and the smallest
// (subnormal) one.
struct Traits {
  size_t size;
  const char* name;
  int value_bits;  // ints: 7 for int8, 8 for uint8; bool: 1
  bool is_signed;
  int digits, max_exp, min_exp;  // floats only
};

constexpr Traits traits(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return {1, "bool", 1, false, 0, 0, 0};
    case Dtype::Kind::Int8: return {1, "int8", 7, true, 0, 0, 0};
    case Dtype::Kind::Int32: return {4, "int32", 31, true, 0, 0, 0};
    case Dtype::Kind::Int64: return {8, "int64", 63, true, 0, 0, 0};
    case Dtype::Kind::UInt8: return {1, "uint8", 8, false, 0, 0, 0};
    case Dtype::Kind::UInt32: return {4, "uint32", 32, false, 0, 0, 0};
    case Dtype::Kind::UInt64: return {8, "uint64", 64, false, 0, 0, 0};
    case Dtype::Kind::Float16: return {2, "float16", 0, true, 11, 16, -24};
    case Dtype::Kind::BFloat16: return {2, "bfloat16", 0, true, 8, 128, -133};
    case Dtype::Kind::Float32: return {4, "float32", 0, true, 24, 128, -149};
    case Dtype::Kind::Float64: return {8, "float64", 0, true, 53, 1024, -1074};
  }
  return {0, "?", 0, false, 0, 0, 0};
}

// Dtype::size() (inline in the header) and the table above agree.
constexpr bool sizes_agree() {
  for (int k = 0; k <= static_cast<int>(Dtype::Kind::BFloat16); ++k) {
    Dtype d(static_cast<Dtype::Kind>(k));
    if (traits(d).size != d.size()) return false;
  }
  return true;
}
static_assert(sizes_agree(), "Dtype::size() disagrees with the dtype traits");

}  // namespace

std::string Dtype::name() const { return traits(*this).name; }

std::ostream& operator<<(std::ostream& os, Dtype d) { return os << d.name(); }

Dtype dtype_from_name(const std::string& name) {
  std::string valid;
  for (Dtype d : kAllDtypes) {
    if (d.name() == name) return d;
    valid += valid.empty() ? d.name() : ", " + d.name();
  }
  throw_error("unknown dtype '", name, "'; valid: ", valid);
}

bool holds_exactly(Dtype to, Dtype from) {
  if (from == to || from.is_bool()) return true;
  if (to.is_bool()) return false;
  Traits f = traits(from), t = traits(to);
  if (from.is_float()) {
    return to.is_float() && t.digits >= f.digits && t.max_exp >= f.max_exp &&
           t.min_exp <= f.min_exp;
  }
  if (to.is_float()) return t.digits >= f.value_bits;  // every int of that many bits is exact
  if (f.is_signed && !t.is_signed) return false;
  return t.value_bits >= f.value_bits;
}

Dtype promote_types(Dtype a, Dtype b) {
  if (holds_exactly(a, b)) return a;
  if (holds_exactly(b, a)) return b;
  // The smallest type holding both: ints are tried only when both operands are ints (an int
  // never holds a float). Candidates go in size order, so int8 + uint8 gives int32 (no int16).
  for (Dtype c : {int8, int32, int64, float16, bfloat16, float32, float64})
    if (holds_exactly(c, a) && holds_exactly(c, b)) return c;
  return float64;  // int64/uint64 with uint64/int64 or a float: NumPy's answer
}

Dtype float_result_type(Dtype d) {
  if (d.is_float()) return d;
  if (d.is_bool() || d == int8 || d == uint8) return float32;
  return float64;
}

}  // namespace kiln
