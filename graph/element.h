// One element of any dtype as a scalar in flight, and the conversions every part of Kiln shares:
// reading and writing it in memory, rounding and wrapping to a dtype, and casting between
// dtypes. backends/scalar_ops.h builds Kiln's op semantics on these; Scalar::cast, to_vector,
// array() and the reference backend all use them, so a value converts the same way everywhere.
//
// Representation (Val): floats in f (a double), integers and bools in i, sign- or zero-extended
// to 64 bits (uint64 as its bits). A float32 or float64 value is exact in its dtype. float16
// and bfloat16 are storage types computed in float32: a value of theirs inside a kernel is a
// float32 value (round_to), made a value of the 16-bit type (narrow) only where it is stored
// to memory or cast (astype). So a fused kernel rounds a chain of float16 ops once, at its
// store; evaluated op by op, each op's result is stored, hence rounded.
// Rules:
//  - narrow to float16/bfloat16 rounds the float32 value (nearest, ties to even); from float64
//    or an integer, through float32 first (two roundings, as MLX's bfloat16 does; they differ
//    from one only within 2^-24 relative of a tie).
//  - Integers wrap (two's complement) to their width.
//  - float -> int truncates toward zero and saturates to the type's range; NaN gives 0.
//  - x -> bool is x != 0 (NaN is true).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "graph/dtype.h"
#include "graph/float16.h"

namespace kiln::scalar {

struct Val {
  double f = 0;
  int64_t i = 0;
};

inline int64_t wrap(int64_t v, Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return v != 0;
    case Dtype::Kind::Int8: return static_cast<int8_t>(static_cast<uint8_t>(v));
    case Dtype::Kind::Int32: return static_cast<int32_t>(static_cast<uint32_t>(v));
    case Dtype::Kind::UInt8: return static_cast<uint8_t>(v);
    case Dtype::Kind::UInt32: return static_cast<uint32_t>(v);
    default: return v;  // int64, uint64 (bits)
  }
}

// A float result of an op on dtype d as the kernel holds it: float32 precision for float32,
// float16 and bfloat16; float64 unchanged.
inline double round_to(double v, Dtype d) { return d == float64 ? v : static_cast<float>(v); }

// A value of float dtype d itself (what a store or a cast to d gives).
inline double narrow(double v, Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Float32: return static_cast<float>(v);
    case Dtype::Kind::Float16: return round_to_half(static_cast<float>(v));
    case Dtype::Kind::BFloat16: return round_to_bfloat16(static_cast<float>(v));
    default: return v;
  }
}

// An integer element's value as a double (uint64 read as unsigned).
inline double int_to_double(int64_t i, Dtype d) {
  return d == uint64 ? static_cast<double>(static_cast<uint64_t>(i)) : static_cast<double>(i);
}

inline double to_double(Val v, Dtype d) { return d.is_float() ? v.f : int_to_double(v.i, d); }

// Truncates toward zero and clamps to [lo, hi] (as doubles); NaN gives 0.
inline int64_t saturate(double v, Dtype to) {
  if (std::isnan(v)) return 0;
  switch (to.kind) {
    case Dtype::Kind::UInt64:
      if (v <= 0) return 0;
      if (v >= 0x1.0p64) return static_cast<int64_t>(std::numeric_limits<uint64_t>::max());
      return static_cast<int64_t>(static_cast<uint64_t>(v));
    case Dtype::Kind::Int64:
      if (v <= -0x1.0p63) return std::numeric_limits<int64_t>::min();
      if (v >= 0x1.0p63) return std::numeric_limits<int64_t>::max();
      return static_cast<int64_t>(v);
    default: {
      double lo = 0, hi = 0;
      switch (to.kind) {
        case Dtype::Kind::Int8: lo = -128, hi = 127; break;
        case Dtype::Kind::Int32: lo = -2147483648.0, hi = 2147483647.0; break;
        case Dtype::Kind::UInt8: lo = 0, hi = 255; break;
        case Dtype::Kind::UInt32: lo = 0, hi = 4294967295.0; break;
        default: break;
      }
      return static_cast<int64_t>(std::trunc(std::fmin(std::fmax(v, lo), hi)));
    }
  }
}

inline Val cast(Val v, Dtype from, Dtype to) {
  Val r;
  if (to.is_float()) {
    r.f = narrow(to_double(v, from), to);  // 16-bit floats: through float32 (see above)
  } else if (to.is_bool()) {
    r.i = from.is_float() ? (v.f != 0 || std::isnan(v.f)) : (v.i != 0);
  } else if (from.is_float()) {
    r.i = saturate(v.f, to);
  } else {
    r.i = wrap(v.i, to);
  }
  return r;
}

// Element `idx` of a buffer of dtype d.
inline Val load(const void* base, Dtype d, int64_t idx) {
  Val v;
  const char* p = static_cast<const char*>(base) + idx * static_cast<int64_t>(d.size());
  auto get = [p](auto x) {
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (d.kind) {
    case Dtype::Kind::Bool: v.i = get(uint8_t{}) != 0; break;
    case Dtype::Kind::Int8: v.i = get(int8_t{}); break;
    case Dtype::Kind::Int32: v.i = get(int32_t{}); break;
    case Dtype::Kind::Int64: v.i = get(int64_t{}); break;
    case Dtype::Kind::UInt8: v.i = get(uint8_t{}); break;
    case Dtype::Kind::UInt32: v.i = get(uint32_t{}); break;
    case Dtype::Kind::UInt64: v.i = static_cast<int64_t>(get(uint64_t{})); break;
    case Dtype::Kind::Float16: v.f = half_bits_to_float(get(uint16_t{})); break;
    case Dtype::Kind::BFloat16: v.f = bfloat16_bits_to_float(get(uint16_t{})); break;
    case Dtype::Kind::Float32: v.f = get(float{}); break;
    case Dtype::Kind::Float64: v.f = get(double{}); break;
  }
  return v;
}

// Writes v as element `idx` of dtype d: floats narrowed to d, ints truncated.
inline void store(void* base, Dtype d, int64_t idx, Val v) {
  char* p = static_cast<char*>(base) + idx * static_cast<int64_t>(d.size());
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (d.kind) {
    case Dtype::Kind::Bool: put(static_cast<uint8_t>(v.i != 0)); break;
    case Dtype::Kind::Int8: put(static_cast<int8_t>(v.i)); break;
    case Dtype::Kind::Int32: put(static_cast<int32_t>(v.i)); break;
    case Dtype::Kind::Int64: put(v.i); break;
    case Dtype::Kind::UInt8: put(static_cast<uint8_t>(v.i)); break;
    case Dtype::Kind::UInt32: put(static_cast<uint32_t>(v.i)); break;
    case Dtype::Kind::UInt64: put(static_cast<uint64_t>(v.i)); break;
    case Dtype::Kind::Float16: put(float_to_half_bits(static_cast<float>(v.f))); break;
    case Dtype::Kind::BFloat16: put(float_to_bfloat16_bits(static_cast<float>(v.f))); break;
    case Dtype::Kind::Float32: put(static_cast<float>(v.f)); break;
    case Dtype::Kind::Float64: put(v.f); break;
  }
}

}  // namespace kiln::scalar
