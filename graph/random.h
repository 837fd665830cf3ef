// Counter-based random numbers: element i of a draw is a pure function of (key, i), so every
// backend produces the same bits for the same key, and no generator state is shared between
// devices or threads. Without an explicit key, a draw takes the next key from a global sequence
// that random::seed() restarts.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "graph/array.h"

namespace kiln::random {

using Key = uint64_t;

void seed(uint64_t s);
Key key(uint64_t s);  // a key derived from a seed
Key next_key();       // the next key of the global sequence
// n new keys from k: key i is bits(k, i), the raw-bits draw of k (so split(array(k), n) holds
// the same keys, computed on a device).
std::vector<Key> split(Key k, int n);

// The 64 random bits of element `counter` under `key`; the function every backend implements.
uint64_t bits(Key key, uint64_t counter);

// The key of a draw: a Key value, a key array, or nothing (the next key of the global
// sequence). A key array is a uint64 array of one element (0-d, as key_array and split give
// them; shape (1,) is taken too), as MLX's keys are arrays: it may be a traced value inside
// compile, so a function that captures its random state (CompileOptions inputs/outputs) draws
// anew at every call. A draw with key array k gives the same values as a draw with the Key
// k.item<uint64_t>(), on every backend. Why 0-d uint64 rather than MLX's uint32 pair: Kiln's
// counter hash takes a 64-bit key, so the key array holds exactly the Key the value API uses.
class KeyArg {
 public:
  KeyArg() = default;
  KeyArg(std::nullopt_t) {}                    // NOLINT: implicit, like std::optional
  KeyArg(Key k) : value_(k) {}                 // NOLINT
  KeyArg(std::optional<Key> k) : value_(k) {}  // NOLINT
  KeyArg(Array k) : array_(std::move(k)) {}    // NOLINT
  const std::optional<Key>& value() const { return value_; }
  const std::optional<Array>& array() const { return array_; }

 private:
  std::optional<Key> value_;
  std::optional<Array> array_;
};

// ---- key arrays (MLX's mx.random.key and split) ----
// A 0-d uint64 array holding key(seed). array(k) makes one of any Key k.
Array key_array(uint64_t seed, StreamOrDevice s = {});
// `num` new keys from a key array, shape (num,) uint64: element i is bits(key, i), computed on
// the stream's device (a raw-bits draw); slice or index a row to draw with it.
Array split(const Array& key, int num = 2, StreamOrDevice s = {});
// Raw random bits, `width` bytes per element: 1 (uint8), 4 (uint32) or 8 (uint64), the low
// bytes of bits(key, i). Write the shape as Shape{...}: a braced {n} with a width also fits
// bits(Key, counter) above, and the call is ambiguous.
Array bits(const Shape& shape, int width = 4, KeyArg key = {}, StreamOrDevice s = {});

// Uniform in [low, high).
Array uniform(const Shape& shape, Dtype dtype = float32, KeyArg key = {}, StreamOrDevice s = {});
Array uniform(double low, double high, const Shape& shape, Dtype dtype = float32, KeyArg key = {},
              StreamOrDevice s = {});
// Normal with the given mean and standard deviation (Box-Muller over two counter draws).
Array normal(const Shape& shape, Dtype dtype = float32, KeyArg key = {}, StreamOrDevice s = {});
Array normal(const Shape& shape, double mean, double stddev, Dtype dtype = float32, KeyArg key = {},
             StreamOrDevice s = {});

// Integers uniform in [low, high) (low and high broadcast against `shape`), of an integer
// dtype: low + bits(key, i) mod (high - low), computed in 64-bit unsigned arithmetic (the
// modulo bias is below (high - low) / 2^64). Where high <= low the result is low.
Array randint(const Array& low, const Array& high, const Shape& shape, Dtype dtype = int32,
              KeyArg key = {}, StreamOrDevice s = {});
Array randint(int64_t low, int64_t high, const Shape& shape, Dtype dtype = int32, KeyArg key = {},
              StreamOrDevice s = {});
// true with probability p (a float array broadcast to `shape`; no shape: p's): uniform < p.
Array bernoulli(const Array& p, std::optional<Shape> shape = {}, KeyArg key = {},
                StreamOrDevice s = {});
Array bernoulli(double p = 0.5, const Shape& shape = {}, KeyArg key = {}, StreamOrDevice s = {});
// Standard normal values truncated to [lower, upper] (broadcast against `shape`; no shape:
// theirs), by inverting the normal CDF of a uniform draw between the bounds' CDFs (as MLX).
Array truncated_normal(const Array& lower, const Array& upper, std::optional<Shape> shape = {},
                       Dtype dtype = float32, KeyArg key = {}, StreamOrDevice s = {});
Array truncated_normal(double lower, double upper, const Shape& shape, Dtype dtype = float32,
                       KeyArg key = {}, StreamOrDevice s = {});
// Indices drawn from the categorical distribution of unnormalised log-probabilities `logits`
// along `axis` (uint32, as MLX), by the Gumbel-max trick: argmax(logits + gumbel noise). The
// result has logits' shape without `axis`; `shape` gives another (which that shape broadcasts
// to), `num_samples` adds a trailing axis of that many independent samples (as MLX's C++
// overloads; a braced `{n}` picks num_samples: write Shape{n} for a shape).
Array categorical(const Array& logits, int axis = -1, KeyArg key = {}, StreamOrDevice s = {});
Array categorical(const Array& logits, int axis, const Shape& shape, KeyArg key = {},
                  StreamOrDevice s = {});
Array categorical(const Array& logits, int axis, int num_samples, KeyArg key = {},
                  StreamOrDevice s = {});

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
