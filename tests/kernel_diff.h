// Differential testing of a backend against the reference interpreter through the Backend
// interface: run a Kernel with given buffer contents, compare outputs per dtype with a stated
// tolerance, build small kernels by hand, sample interesting values of every dtype. Shared by
// the cpu and opencl backend tests.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>

#include "backends/extension.h"
#include "backends/scalar_ops.h"
#include "kiln.h"

namespace kiln::kdiff {

using Bytes = std::vector<uint8_t>;

// ---- running kernels ------------------------------------------------------------------------

inline Backend& ref_backend() { return backend_for(device("reference")); }

// Runs `k` with the given initial buffer contents; returns every buffer's final bytes.
inline std::vector<Bytes> run(Backend& be, const Kernel& k, const std::vector<Bytes>& init,
                              const std::vector<int64_t>& params = {}) {
  auto ck = be.compile(0, k);
  std::vector<std::shared_ptr<Buffer>> bufs;
  KernelArgs args;
  for (const Bytes& b : init) {
    bufs.push_back(be.allocate(0, std::max<size_t>(b.size(), 1)));
    if (!b.empty()) bufs.back()->write(b.data(), 0, b.size());
    args.buffers.push_back(bufs.back().get());
  }
  args.params = params;
  auto q = be.create_queue(0);
  q->enqueue_kernel(*ck, args);
  q->finish();
  std::vector<Bytes> out;
  for (size_t i = 0; i < bufs.size(); ++i) {
    Bytes b(init[i].size());
    if (!b.empty()) bufs[i]->read(b.data(), 0, b.size());
    out.push_back(std::move(b));
  }
  return out;
}

template <typename T>
inline Bytes to_bytes(const std::vector<T>& v) {
  Bytes b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <typename T>
inline std::vector<T> from_bytes(const Bytes& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), b.size());
  return v;
}

// ---- comparison -----------------------------------------------------------------------------

struct Tolerance {
  // Value: numeric equality (-0 == +0, any NaN == any NaN), for vectorised float max/min.
  enum Kind { Exact, Value, Ulp, Rel } kind = Exact;
  double ulps = 0, rtol = 0, atol = 0;
};

// v's position in the sorted sequence of values of float dtype d (adjacent values differ by 1).
inline int64_t ordered(double v, Dtype d) {
  if (d == float64) {
    int64_t i = std::bit_cast<int64_t>(v);
    return i < 0 ? std::numeric_limits<int64_t>::min() - i : i;
  }
  if (d.is_half()) {
    uint16_t h = d == float16 ? float_to_half_bits(static_cast<float>(v))
                              : float_to_bfloat16_bits(static_cast<float>(v));
    int64_t m = h & 0x7fff;
    return h & 0x8000 ? -m : m;
  }
  int32_t i = std::bit_cast<int32_t>(static_cast<float>(v));
  return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : i;
}

inline double ulp_diff(double a, double b, Dtype d) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INFINITY;
  if (a == b) return 0;
  if (std::isinf(a) || std::isinf(b)) return INFINITY;
  return std::fabs(static_cast<double>(ordered(a, d) - ordered(b, d)));
}

// The relative tolerance of a reassociated float sum or product of dtype d.
inline double sum_rtol(Dtype d) {
  return d == float64 ? 1e-12 : d == float16 ? 0x1.0p-10 : d == bfloat16 ? 0x1.0p-7 : 1e-6;
}

template <typename T>
inline T element(const Bytes& b, size_t i) {
  T v;
  std::memcpy(&v, b.data() + i * sizeof(T), sizeof(T));
  return v;
}

inline double get(const Bytes& b, Dtype d, size_t i) {
  return scalar::to_double(scalar::load(b.data(), d, static_cast<int64_t>(i)), d);
}

// Empty string when equal within tolerance, else the first difference.
inline std::string compare(const Bytes& got, const Bytes& want, Dtype d, const Tolerance& tol) {
  if (got.size() != want.size()) return "size differs";
  size_t n = got.size() / d.size();
  for (size_t i = 0; i < n; ++i) {
    bool ok;
    double g = get(got, d, i), w = get(want, d, i);
    if (!d.is_float() || tol.kind == Tolerance::Exact) {
      if (d.is_float())
        ok = (std::isnan(g) && std::isnan(w)) ||
             std::memcmp(got.data() + i * d.size(), want.data() + i * d.size(), d.size()) == 0;
      else
        ok = std::memcmp(got.data() + i * d.size(), want.data() + i * d.size(), d.size()) == 0;
    } else if (tol.kind == Tolerance::Value) {
      ok = (std::isnan(g) && std::isnan(w)) || g == w;
    } else if (tol.kind == Tolerance::Ulp) {
      ok = ulp_diff(g, w, d) <= tol.ulps || std::fabs(g - w) <= 1e-37;
    } else {
      ok = (std::isnan(g) && std::isnan(w)) || g == w ||
           std::fabs(g - w) <= tol.rtol * std::fabs(w) + tol.atol;
    }
    if (!ok) {
      std::ostringstream os;
      os.precision(17);
      os << "element " << i << ": got " << g << " vs reference " << w;
      if (!d.is_float())
        os << " (bits " << scalar::load(got.data(), d, static_cast<int64_t>(i)).i << " vs "
           << scalar::load(want.data(), d, static_cast<int64_t>(i)).i << ")";
      return os.str();
    }
  }
  return "";
}

// ---- building kernels by hand ---------------------------------------------------------------

inline IndexMap map_of(std::vector<int64_t> strides, int64_t offset = 0) {
  IndexMap m;
  for (int64_t s : strides) m.strides.push_back(Dim::constant(s));
  m.offset = Dim::constant(offset);
  return m;
}

inline int add(Kernel& k, Value v) {
  k.body.push_back(v);
  return static_cast<int>(k.body.size()) - 1;
}
inline int load(Kernel& k, Dtype d, IndexMap m) {
  k.buffers.push_back({d, false, std::move(m)});
  Value v;
  v.kind = ValueKind::Load, v.dtype = d, v.buffer = static_cast<int>(k.buffers.size()) - 1;
  return add(k, v);
}
inline void store(Kernel& k, Dtype d, IndexMap m, int value) {
  k.buffers.push_back({d, true, std::move(m)});
  k.stores.push_back({static_cast<int>(k.buffers.size()) - 1, value});
}

// `op` over `axes` of a contiguous input of `shape` into a contiguous output of the kept axes.
inline Kernel reduce_kernel(Dtype d, ReduceOp op, std::vector<int64_t> shape,
                            std::vector<int> axes) {
  std::vector<int64_t> st(shape.size());
  int64_t s = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) st[i] = s, s *= shape[i];
  Kernel k;
  k.name = std::string("reduce_") + op_name(op) + "_" + d.name();
  std::vector<int64_t> in_strides, kept_shape;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      k.domain.push_back(Dim::constant(shape[i]));
      in_strides.push_back(st[i]);
      kept_shape.push_back(shape[i]);
    }
  for (int a : axes) k.domain.push_back(Dim::constant(shape[a])), in_strides.push_back(st[a]);
  int x = load(k, d, map_of(in_strides));
  Value r;
  r.kind = ValueKind::Reduce, r.dtype = op == ReduceOp::Argmax ? int64 : d, r.a = x;
  int rv = add(k, r);
  k.reduce = Reduction{op, static_cast<int>(axes.size()), rv};
  std::vector<int64_t> out(k.domain.size(), 0);
  int64_t o = 1;
  for (int i = static_cast<int>(kept_shape.size()) - 1; i >= 0; --i) out[i] = o, o *= kept_shape[i];
  store(k, r.dtype, map_of(out), rv);
  return k;
}

// A 1-D kernel: out[i] = f(in_0[i], in_1[i], ...).
inline Kernel elementwise(const std::vector<Dtype>& ins, std::function<Value(std::vector<int>)> f,
                          int64_t n) {
  Kernel k;
  k.name = "elementwise";
  k.domain = {Dim::constant(n)};
  std::vector<int> loads;
  for (Dtype d : ins) loads.push_back(load(k, d, map_of({1})));
  Value v = f(loads);
  int r = add(k, v);
  store(k, v.dtype, map_of({1}), r);
  return k;
}

// A 1-D float32 kernel over n points: out[i] = in[i] + 1, buffers {in, out}.
inline Kernel plus_one(int64_t n) {
  Kernel k;
  k.name = "plus_one";
  k.domain = {Dim::constant(n)};
  int x = load(k, float32, map_of({1}));
  Value c;
  c.kind = ValueKind::Constant, c.dtype = float32, c.constant.f = 1.0;
  int one = add(k, c);
  Value v;
  v.kind = ValueKind::Binary, v.binary = BinaryOp::Add, v.dtype = float32, v.a = x, v.b = one;
  store(k, float32, map_of({1}), add(k, v));
  return k;
}

// A 1-D kernel: out[i] = op(in[i]), in and out of dtype d.
inline Kernel unary_kernel(Dtype d, UnaryOp op, int64_t n) {
  return elementwise(
      {d},
      [&](std::vector<int> in) {
        Value v;
        v.kind = ValueKind::Unary, v.unary = op, v.dtype = d, v.a = in[0];
        return v;
      },
      n);
}

// Interesting values of each dtype, `n` of them, deterministic in `seed`.
inline Bytes sample(Dtype d, size_t n, uint64_t seed, bool wild = true) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-4, 4);
  const double specials[] = {0.0,   -0.0,  INFINITY, -INFINITY, NAN,  1e30, -1e30,
                             1e-40, 0.5,   -0.5,     1.0,       -1.0, 2.0,  3.0,
                             100.5, -7.25, 1e-3,     65504.0,   3e9,  -3e9, 1e19};
  const int64_t ispecials[] = {0,         1,         -1,        2,  3,  -7, 100, INT32_MAX,
                               INT32_MIN, INT64_MAX, INT64_MIN, 31, 63, 64, -64, 1LL << 40};
  Bytes b(n * d.size());
  for (size_t i = 0; i < n; ++i) {
    bool special = wild && rng() % 4 == 0;
    double f = special ? specials[rng() % std::size(specials)]
                       : std::round(u(rng) * 64) / 64 + (rng() % 3 == 0 ? u(rng) * 1e-3 : 0);
    int64_t iv =
        special ? ispecials[rng() % std::size(ispecials)] : static_cast<int64_t>(rng() % 17) - 8;
    if (d.is_bool())
      b[i] = rng() % 2;
    else  // ints wrap to their width, floats round to their type (inf when out of range)
      scalar::store(b.data(), d, static_cast<int64_t>(i), {scalar::round_to(f, d), iv});
  }
  return b;
}

// Runs k on `be` and on reference with the same inputs and compares every output buffer.
inline void differential_on(Backend& be, const Kernel& k, const std::vector<Bytes>& init,
                            const Tolerance& tol, const std::string& what,
                            const std::vector<int64_t>& params = {}) {
  std::vector<Bytes> got = run(be, k, init, params);
  std::vector<Bytes> want = run(ref_backend(), k, init, params);
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (!k.buffers[b].output) continue;
    std::string diff = compare(got[b], want[b], k.buffers[b].dtype, tol);
    ASSERT_EQ(diff, "") << what << ": buffer " << b << "\n" << k.str();
  }
}

inline const Dtype kAll[] = {bool_,  int8,    int32,    int64,   uint8,  uint32,
                             uint64, float16, bfloat16, float32, float64};

// Whether Kernel IR defines the op on operands of dtype d: bitwise ops take bools and
// integers, floor_divide and remainder every dtype but bool (ops never build the others).
inline bool ir_defined(UnaryOp op, Dtype d) {
  return op != UnaryOp::BitwiseInvert || !d.is_float();
}
inline bool ir_defined(BinaryOp op, Dtype d) {
  if (is_bitwise(op)) return !d.is_float();
  if (op == BinaryOp::FloorDivide || op == BinaryOp::Remainder) return !d.is_bool();
  return true;
}

inline bool approx_f32(UnaryOp op) {
  switch (op) {
    case UnaryOp::Exp:
    case UnaryOp::Log:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Tanh:
    case UnaryOp::Erf:
    case UnaryOp::Sigmoid: return true;
    default: return false;
  }
}

}  // namespace kiln::kdiff
