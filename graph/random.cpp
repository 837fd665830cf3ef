#include "graph/random.h"

#include <atomic>

#include "graph/array_node.h"
#include "graph/ops.h"

namespace kiln::random {

namespace {
std::atomic<uint64_t> g_seed{0x4b494c4eULL};  // "KILN"
std::atomic<uint64_t> g_counter{0};

// SplitMix64's finaliser: a bijective mixer with full avalanche.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The key input of a draw: a uint64 array of one element, as a 0-d array.
Array key_input(const Array& k, const StreamOrDevice& s, const char* op) {
  if (k.dtype() != uint64 || k.size() != 1)
    throw_error(op,
                ": a key array must be a uint64 array of one element (from random::key_array "
                "or a row of random::split), got ",
                k.dtype(), " of shape ", k.shape());
  return k.ndim() == 0 ? k : reshape(k, {}, s);
}

// A Random node: with a key array as its input, else with its key value (or the next key).
Array raw_draw(RandomDist dist, const Shape& shape, Dtype dtype, const KeyArg& k,
               const StreamOrDevice& s, const char* op) {
  checked_nbytes(shape, dtype, op);  // a draw too large to address is refused here
  Params p;
  p.dist = dist;
  std::vector<Array> inputs;
  if (k.array())
    inputs.push_back(key_input(*k.array(), s, op));
  else
    p.key = k.value() ? *k.value() : next_key();
  return make_array(shape, dtype, Op::Random, p, std::move(inputs), resolve_stream(s));
}

Array draw(RandomDist dist, const Shape& shape, Dtype dtype, const KeyArg& k,
           const StreamOrDevice& s, const char* op) {
  checked_nbytes(shape, dtype, op);  // a made-up dtype or an unaddressable size first
  if (!dtype.is_float())
    throw_error(op, ": dtype ", dtype,
                " is not valid (random draws need a float dtype: float16, bfloat16, float32, "
                "float64)");
  return raw_draw(dist, shape, dtype, k, s, op);
}
}  // namespace

void seed(uint64_t s) {
  g_seed.store(s);
  g_counter.store(0);
}

Key key(uint64_t s) { return mix(s ^ 0x6a09e667f3bcc908ULL); }

Key next_key() { return mix(key(g_seed.load()) + g_counter.fetch_add(1)); }

std::vector<Key> split(Key k, int n) {
  if (n < 0) throw_error("random::split: n = ", n, " must be >= 0");
  std::vector<Key> out;
  for (int i = 0; i < n; ++i) out.push_back(bits(k, static_cast<uint64_t>(i)));
  return out;
}

Array key_array(uint64_t seed, StreamOrDevice s) { return array(key(seed), std::move(s)); }

Array split(const Array& key, int num, StreamOrDevice s) {
  if (num < 0) throw_error("random::split: num = ", num, " must be >= 0");
  return raw_draw(RandomDist::Bits, {num}, uint64, key, s, "random::split");
}

Array bits(const Shape& shape, int width, KeyArg key, StreamOrDevice s) {
  if (width != 1 && width != 4 && width != 8)
    throw_error("random::bits: width ", width,
                " is not valid (1, 4 or 8 bytes: uint8, uint32, uint64; Kiln has no 16-bit "
                "integer dtype)");
  Array b = raw_draw(RandomDist::Bits, shape, uint64, key, s, "random::bits");
  return width == 8 ? b : astype(b, width == 4 ? uint32 : uint8, s);
}

uint64_t bits(Key key, uint64_t counter) {
  return mix(key + (counter + 1) * 0x9e3779b97f4a7c15ULL);
}

Array uniform(const Shape& shape, Dtype dtype, KeyArg key, StreamOrDevice s) {
  return draw(RandomDist::Uniform, shape, dtype, key, s, "random::uniform");
}

Array uniform(double low, double high, const Shape& shape, Dtype dtype, KeyArg key,
              StreamOrDevice s) {
  if (!(low <= high)) throw_error("random::uniform: low ", low, " must not exceed high ", high);
  Array u = uniform(shape, dtype, key, s);
  if (low == 0 && high == 1) return u;
  return add(multiply(u, scalar_constant(Scalar::of(high - low).cast(dtype), s), s),
             scalar_constant(Scalar::of(low).cast(dtype), s), s);
}

Array normal(const Shape& shape, Dtype dtype, KeyArg key, StreamOrDevice s) {
  return draw(RandomDist::Normal, shape, dtype, key, s, "random::normal");
}

Array normal(const Shape& shape, double mean, double stddev, Dtype dtype, KeyArg key,
             StreamOrDevice s) {
  if (!(stddev >= 0)) throw_error("random::normal: stddev ", stddev, " must be >= 0");
  Array z = normal(shape, dtype, key, s);
  if (mean == 0 && stddev == 1) return z;
  return add(multiply(z, scalar_constant(Scalar::of(stddev).cast(dtype), s), s),
             scalar_constant(Scalar::of(mean).cast(dtype), s), s);
}

}  // namespace kiln::random
