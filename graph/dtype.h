// Element types and NumPy-style type promotion. A Dtype is a small value type; the five
// constants below are the whole set Kiln supports.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

struct Dtype {
  enum class Kind : uint8_t { Bool, Int32, Int64, Float32, Float64 };
  Kind kind = Kind::Float32;

  constexpr Dtype() = default;
  constexpr Dtype(Kind k) : kind(k) {}  // NOLINT: implicit so switch-on-kind reads naturally
  constexpr bool operator==(const Dtype& o) const { return kind == o.kind; }
  constexpr bool operator!=(const Dtype& o) const { return kind != o.kind; }

  size_t size() const;
  std::string name() const;  // "float32"
  bool is_float() const { return kind == Kind::Float32 || kind == Kind::Float64; }
  bool is_int() const { return kind == Kind::Int32 || kind == Kind::Int64; }
  bool is_bool() const { return kind == Kind::Bool; }
};

inline constexpr Dtype bool_{Dtype::Kind::Bool};
inline constexpr Dtype int32{Dtype::Kind::Int32};
inline constexpr Dtype int64{Dtype::Kind::Int64};
inline constexpr Dtype float32{Dtype::Kind::Float32};
inline constexpr Dtype float64{Dtype::Kind::Float64};

std::ostream& operator<<(std::ostream& os, Dtype d);

// Parses "float32" etc.; raises kiln::Error listing the valid names otherwise.
Dtype dtype_from_name(const std::string& name);

// NumPy's result_type for two arrays: bool < int32 < int64, and any int with float32 gives
// float64 (NumPy's rule, since float32 cannot hold every int32 exactly).
Dtype promote_types(Dtype a, Dtype b);

// The float type an op that needs floats (exp, divide, mean) computes int/bool inputs in:
// float64 for int32/int64, as NumPy does; float dtypes are kept; bool gives float32 (NumPy: float16
// which Kiln does not have, so the next smallest float).
Dtype float_result_type(Dtype d);

template <typename T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<bool>() {
  return bool_;
}
template <>
constexpr Dtype dtype_of<int32_t>() {
  return int32;
}
template <>
constexpr Dtype dtype_of<int64_t>() {
  return int64;
}
template <>
constexpr Dtype dtype_of<float>() {
  return float32;
}
template <>
constexpr Dtype dtype_of<double>() {
  return float64;
}

}  // namespace kiln
