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

Array draw(RandomDist dist, const Shape& shape, Dtype dtype, std::optional<Key> k,
           const StreamOrDevice& s, const char* op) {
  checked_nbytes(shape, dtype, op);  // a draw too large to address is refused here
  if (!dtype.is_float())
    throw_error(op, ": dtype ", dtype,
                " is not valid (random draws need a float dtype: float16, bfloat16, float32, "
                "float64)");
  Params p;
  p.dist = dist;
  p.key = k ? *k : next_key();
  return make_array(shape, dtype, Op::Random, p, {}, resolve_stream(s));
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
  for (int i = 0; i < n; ++i) out.push_back(mix(k ^ mix(static_cast<uint64_t>(i) + 1)));
  return out;
}

uint64_t bits(Key key, uint64_t counter) {
  return mix(key + (counter + 1) * 0x9e3779b97f4a7c15ULL);
}

Array uniform(const Shape& shape, Dtype dtype, std::optional<Key> key, StreamOrDevice s) {
  return draw(RandomDist::Uniform, shape, dtype, key, s, "random::uniform");
}

Array uniform(double low, double high, const Shape& shape, Dtype dtype, std::optional<Key> key,
              StreamOrDevice s) {
  if (!(low <= high)) throw_error("random::uniform: low ", low, " must not exceed high ", high);
  Array u = uniform(shape, dtype, key, s);
  if (low == 0 && high == 1) return u;
  return add(multiply(u, scalar_constant(Scalar::of(high - low).cast(dtype), s), s),
             scalar_constant(Scalar::of(low).cast(dtype), s), s);
}

Array normal(const Shape& shape, Dtype dtype, std::optional<Key> key, StreamOrDevice s) {
  return draw(RandomDist::Normal, shape, dtype, key, s, "random::normal");
}

Array normal(const Shape& shape, double mean, double stddev, Dtype dtype, std::optional<Key> key,
             StreamOrDevice s) {
  if (!(stddev >= 0)) throw_error("random::normal: stddev ", stddev, " must be >= 0");
  Array z = normal(shape, dtype, key, s);
  if (mean == 0 && stddev == 1) return z;
  return add(multiply(z, scalar_constant(Scalar::of(stddev).cast(dtype), s), s),
             scalar_constant(Scalar::of(mean).cast(dtype), s), s);
}

}  // namespace kiln::random
