// Counter-based random numbers: element i of a draw is a pure function of (key, i), so every
// backend produces the same bits for the same key, and no generator state is shared between
// devices or threads. Without an explicit key, a draw takes the next key from a global sequence
// that random::seed() restarts.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

#include "graph/array.h"

namespace kiln::random {

using Key = uint64_t;

void seed(uint64_t s);
Key key(uint64_t s);  // a key derived from a seed
Key next_key();       // the next key of the global sequence
std::vector<Key> split(Key k, int n);

// The 64 random bits of element `counter` under `key`; the function every backend implements.
uint64_t bits(Key key, uint64_t counter);

// Uniform in [low, high).
Array uniform(const Shape& shape, Dtype dtype = float32, std::optional<Key> key = {},
              StreamOrDevice s = {});
Array uniform(double low, double high, const Shape& shape, Dtype dtype = float32,
              std::optional<Key> key = {}, StreamOrDevice s = {});
// Normal with the given mean and standard deviation (Box-Muller over two counter draws).
Array normal(const Shape& shape, Dtype dtype = float32, std::optional<Key> key = {},
             StreamOrDevice s = {});
Array normal(const Shape& shape, double mean, double stddev, Dtype dtype = float32,
             std::optional<Key> key = {}, StreamOrDevice s = {});

}  // namespace kiln::random

namespace kiln::random {
// How every backend turns bits into values (written once here; codegens mirror it):
// uniform = the top p bits as a fraction, (bits >> (64 - p)) * 2^-p in [0, 1), p = the dtype's
// significand digits: 53 float64, 24 float32, 11 float16, 8 bfloat16 (exact in the dtype, so
// never rounded up to 1; a float16 draw is the float32 draw truncated to float16);
// normal element i = sqrt(-2 log(1 - u(2i))) * cos(2 pi u(2i+1)) with float64 uniforms for
// float64 and float32 uniforms otherwise, computed in that type and rounded to the dtype.
inline double unit_from_bits(uint64_t b, bool is_f64) {
  return is_f64 ? static_cast<double>(b >> 11) * 0x1.0p-53
                : static_cast<double>(b >> 40) * 0x1.0p-24;
}
inline int unit_digits(Dtype d) {
  return d == float64 ? 53 : d == float16 ? 11 : d == bfloat16 ? 8 : 24;
}
inline double unit_from_bits(uint64_t b, Dtype d) {
  int p = unit_digits(d);
  return std::ldexp(static_cast<double>(b >> (64 - p)), -p);
}
// The dtype of the uniforms a normal draw of dtype d is computed from.
inline Dtype normal_compute_dtype(Dtype d) { return d == float64 ? float64 : float32; }
}  // namespace kiln::random
