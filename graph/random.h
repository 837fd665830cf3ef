// Counter-based random numbers: element i of a draw is a pure function of (key, i), so every
// backend produces the same bits for the same key, and no generator state is shared between
// devices or threads. Without an explicit key, a draw takes the next key from a global sequence
// that random::seed() restarts.
#pragma once

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
// uniform float32 = (bits >> 40) * 2^-24, float64 = (bits >> 11) * 2^-53, both in [0, 1);
// normal element i = sqrt(-2 log(1 - u(2i))) * cos(2 pi u(2i+1)), computed in the dtype.
inline double unit_from_bits(uint64_t b, bool is_f64) {
  return is_f64 ? static_cast<double>(b >> 11) * 0x1.0p-53
                : static_cast<double>(b >> 40) * 0x1.0p-24;
}
}  // namespace kiln::random
