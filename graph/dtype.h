// Element types and NumPy-style type promotion. A Dtype is a small value type; the constants
// below are the whole set Kiln supports: bool, int8/32/64, uint8/32/64, float16, bfloat16,
// float32, float64.
//
// Promotion (promote_types) is NumPy's "safe cast" lattice: the result is the smallest Kiln type
// that holds every value of both operands exactly.
//  - Kiln has no int16 or uint16: where NumPy's answer is one of them (int8 + uint8 -> int16),
//    Kiln gives the next larger type it has (int32).
//  - A signed and an unsigned integer with no common integer type (int64 + uint64, any int +
//    uint64) give float64, as NumPy does.
//  - An integer with a float gives the smallest float that holds both: int8/uint8 keep float16
//    or bfloat16 (their values are exact there), int32/uint32/int64/uint64 give float64 (float32
//    cannot hold every int32).
//  - float16 + bfloat16 -> float32 (neither holds the other; JAX and MLX do the same; NumPy with
//    ml_dtypes refuses to combine them).
//  - Operands that are C++ scalars are weak (graph/ops.h): x * 2.0 keeps x's float16.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace kiln {

struct Dtype {
  // New kinds are appended: the numeric values take part in Kernel IR hashes (the disk cache).
  enum class Kind : uint8_t {
    Bool,
    Int32,
    Int64,
    Float32,
    Float64,
    Int8,
    UInt8,
    UInt32,
    UInt64,
    Float16,
    BFloat16,
  };
  Kind kind = Kind::Float32;

  constexpr Dtype() = default;
  constexpr Dtype(Kind k) : kind(k) {}  // NOLINT: implicit so switch-on-kind reads naturally
  constexpr bool operator==(const Dtype& o) const { return kind == o.kind; }
  constexpr bool operator!=(const Dtype& o) const { return kind != o.kind; }

  // Bytes per element (0 for a kind outside the set); inline, as launches ask it per buffer.
  constexpr size_t size() const {
    constexpr uint8_t kBytes[] = {1, 4, 8, 4, 8, 1, 1, 4, 8, 2, 2};  // in Kind's order
    auto k = static_cast<size_t>(kind);
    return k < sizeof(kBytes) ? kBytes[k] : 0;
  }
  std::string name() const;  // "float32"
  bool is_float() const {
    return kind == Kind::Float32 || kind == Kind::Float64 || kind == Kind::Float16 ||
           kind == Kind::BFloat16;
  }
  // float16 and bfloat16: stored in 2 bytes, computed in float32 (see backends/scalar_ops.h).
  bool is_half() const { return kind == Kind::Float16 || kind == Kind::BFloat16; }
  bool is_int() const { return !is_float() && !is_bool(); }  // signed or unsigned
  bool is_unsigned() const {
    return kind == Kind::UInt8 || kind == Kind::UInt32 || kind == Kind::UInt64;
  }
  bool is_bool() const { return kind == Kind::Bool; }
};

inline constexpr Dtype bool_{Dtype::Kind::Bool};
inline constexpr Dtype int8{Dtype::Kind::Int8};
inline constexpr Dtype int32{Dtype::Kind::Int32};
inline constexpr Dtype int64{Dtype::Kind::Int64};
inline constexpr Dtype uint8{Dtype::Kind::UInt8};
inline constexpr Dtype uint32{Dtype::Kind::UInt32};
inline constexpr Dtype uint64{Dtype::Kind::UInt64};
inline constexpr Dtype float16{Dtype::Kind::Float16};
inline constexpr Dtype bfloat16{Dtype::Kind::BFloat16};
inline constexpr Dtype float32{Dtype::Kind::Float32};
inline constexpr Dtype float64{Dtype::Kind::Float64};

// Every dtype, in promotion order within each family (bool, ints, uints, floats).
inline constexpr Dtype kAllDtypes[] = {bool_,  int8,    int32,    int64,   uint8,  uint32,
                                       uint64, float16, bfloat16, float32, float64};

std::ostream& operator<<(std::ostream& os, Dtype d);

// Parses "float32" etc.; raises kiln::Error listing the valid names otherwise.
Dtype dtype_from_name(const std::string& name);

// Whether every value of `from` is exactly a value of `to` (bool fits everywhere; int8 fits
// float16; int32 fits float64 but not float32; float16 and bfloat16 fit float32).
bool holds_exactly(Dtype to, Dtype from);

// NumPy's result_type for two arrays (see the rules at the top of this file).
Dtype promote_types(Dtype a, Dtype b);

// The float type an op that needs floats (exp, divide, mean) computes non-float inputs in.
// Float dtypes are kept. int32/int64/uint32/uint64 give float64, as NumPy does. bool, int8 and
// uint8 give float32, as MLX and JAX do, where NumPy gives float16: a 16-bit float is never
// chosen implicitly (it holds 3 significant digits; mean of a uint8 image in float16 loses
// precision silently). Ask for float16 with astype.
Dtype float_result_type(Dtype d);

template <typename T>
constexpr Dtype dtype_of();
template <>
constexpr Dtype dtype_of<bool>() {
  return bool_;
}
template <>
constexpr Dtype dtype_of<int8_t>() {
  return int8;
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
constexpr Dtype dtype_of<uint8_t>() {
  return uint8;
}
template <>
constexpr Dtype dtype_of<uint32_t>() {
  return uint32;
}
template <>
constexpr Dtype dtype_of<uint64_t>() {
  return uint64;
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
