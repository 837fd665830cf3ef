// The two 16-bit float formats as bits: IEEE binary16 (float16) and bfloat16 (the upper half of a
// float32). Conversions from float32 round to nearest, ties to even; overflow gives infinity;
// NaN stays a (quiet) NaN with its sign. Conversions to float32 are exact. Written with integer
// operations so every platform gives the same bits; code generators must agree with them (the
// differential tests check it).
#pragma once

#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_half_bits(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  uint32_t h, rem, half;
  if (a >= 0x38800000u) {  // normal in float16: rebias the exponent, drop 13 mantissa bits
    uint32_t r = a - 0x38000000u;
    h = r >> 13, rem = r & 0x1fffu, half = 0x1000u;
  } else {  // subnormal (or zero) in float16: units of 2^-24
    uint32_t e = a >> 23;
    if (e < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to zero
    uint32_t m = (a & 0x7fffffu) | 0x800000u, s = 126 - e;
    h = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  }
  if (rem > half || (rem == half && (h & 1))) ++h;  // a carry moves into the exponent: correct
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t h) {
  uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    float v = static_cast<float>(m) * 0x1.0p-24f;  // exact
    return sign ? -v : v;
  }
  return bits_float(sign | ((e + 112) << 23) | (m << 13));
}

inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t x = float_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float bfloat16_bits_to_float(uint16_t b) {
  return bits_float(static_cast<uint32_t>(b) << 16);
}

// float32 values rounded to the nearest float16 / bfloat16 value.
inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }
inline float round_to_bfloat16(float f) {
  return bfloat16_bits_to_float(float_to_bfloat16_bits(f));
}

}  // namespace kiln
