// Sorting: every dtype maps to an unsigned key whose integer order is the sort order (signed
// integers flip the sign bit; floats flip all bits when negative and the sign bit otherwise,
// -0 keys as +0 so the two tie as they compare, every NaN keys as the largest; descending
// complements non-NaN keys, so NaN stays last). An LSD radix sort on 8-bit digits is stable,
// so it gives the reference's order exactly. A long row splits into one chunk per thread with
// per-chunk digit counts; passes whose digit is the same for every key are skipped. Values
// are moved as their own bits (keys recomputed per pass), so -0 and NaN payloads survive.
//
// Scans: a long row is cut into one chunk per thread; each chunk's total, the totals' prefix,
// then each chunk scanned from its carry (float32/float64 sums eight or four lanes at a time).
// Gathers copy element bits; scatter_add splits the destination range between threads, each
// reading every index in order, so each destination adds its updates in index order (the
// reference's order: float results agree bitwise).
#include "backends/cpu/native_ops.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/native.h"
#include "graph/error.h"
#include "graph/float16.h"

namespace kiln::cpu {

namespace {

int threads() { return std::max(1, tbb::this_task_arena::max_concurrency()); }

// Rows of at least this many elements are split across threads.
constexpr int64_t kParallelRow = int64_t(1) << 15;

// ---- keys

enum class KeyKind { Unsigned, Signed, Float };

template <class U>
struct KeyFn {
  KeyKind kind;
  bool descending;
  U inf;  // Float: the bits of +inf (anything above, without the sign, is NaN)
  static constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  U operator()(U b) const {
    U k;
    if (kind == KeyKind::Float) {
      U mag = b & U(~sign);
      if (mag > inf) return U(~U(0));  // NaN: last in both directions
      k = mag == 0 ? sign : ((b & sign) ? U(~b) : U(b | sign));
    } else {
      k = kind == KeyKind::Signed ? U(b ^ sign) : b;
    }
    return descending ? U(~k) : k;
  }
};

template <class U>
KeyFn<U> key_fn(Dtype d, bool descending) {
  KeyFn<U> f{KeyKind::Unsigned, descending, 0};
  if (d.is_float()) {
    f.kind = KeyKind::Float;
    if (d == float16)
      f.inf = U(0x7C00);
    else if (d == bfloat16)
      f.inf = U(0x7F80);
    else if (d == float32)
      f.inf = U(0x7F800000u);
    else
      f.inf = U(0x7FF0000000000000ull);
  } else if (d.is_int() && !d.is_unsigned()) {
    f.kind = KeyKind::Signed;
  }
  return f;
}

// ---- radix sort of items by key(item)

// Sorts a[0, n) stably by get_key (an unsigned key of `bytes` bytes), using tmp (n items).
// Leaves the result in a.
template <class Item, class GetKey>
void radix_sort(Item* a, Item* tmp, int64_t n, int bytes, GetKey get_key, bool parallel) {
  int chunks = parallel && n >= kParallelRow ? threads() : 1;
  std::vector<std::array<int64_t, 256>> count(chunks);
  auto bounds = [&](int c) { return std::make_pair(n * c / chunks, n * (c + 1) / chunks); };
  auto each_chunk = [&](auto&& f) {
    if (chunks == 1) return f(0);
    tbb::parallel_for(0, chunks, [&](int c) { f(c); });
  };
  Item* src = a;
  Item* dst = tmp;
  for (int pass = 0; pass < bytes; ++pass) {
    int shift = 8 * pass;
    each_chunk([&](int c) {
      auto [lo, hi] = bounds(c);
      std::array<int64_t, 256>& h = count[c];
      h.fill(0);
      for (int64_t i = lo; i < hi; ++i) ++h[(get_key(src[i]) >> shift) & 0xFF];
    });
    int64_t total[256] = {};
    for (int c = 0; c < chunks; ++c)
      for (int b = 0; b < 256; ++b) total[b] += count[c][b];
    if (std::any_of(total, total + 256, [&](int64_t t) { return t == n; })) continue;
    int64_t at = 0;  // bucket-major, chunk-minor: stable across chunks
    for (int b = 0; b < 256; ++b)
      for (int c = 0; c < chunks; ++c) {
        int64_t k = count[c][b];
        count[c][b] = at;
        at += k;
      }
    each_chunk([&](int c) {
      auto [lo, hi] = bounds(c);
      std::array<int64_t, 256>& off = count[c];
      for (int64_t i = lo; i < hi; ++i) dst[off[(get_key(src[i]) >> shift) & 0xFF]++] = src[i];
    });
    std::swap(src, dst);
  }
  if (src != a) std::memcpy(a, src, sizeof(Item) * n);
}

template <class U>
struct Keyed {
  U key;
  uint32_t index;
};

// Short rows: a stable comparison sort on the same keys.
constexpr int64_t kRadixRow = 256;

template <class U>
void sort_row_values(U* row, U* tmp, int64_t n, const KeyFn<U>& key, bool parallel) {
  if (n < kRadixRow) {
    std::stable_sort(row, row + n, [&](U x, U y) { return key(x) < key(y); });
    return;
  }
  radix_sort(row, tmp, n, sizeof(U), key, parallel);
}

template <class U>
void sort_row_indices(const U* row, int64_t stride, int64_t n, int64_t* out, int64_t out_stride,
                      std::vector<Keyed<U>>& items, std::vector<Keyed<U>>& tmp, const KeyFn<U>& key,
                      bool parallel) {
  items.resize(n);
  tmp.resize(n);
  auto fill = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) items[i] = {key(row[i * stride]), static_cast<uint32_t>(i)};
  };
  if (parallel && n >= kParallelRow)
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 14),
                      [&](const tbb::blocked_range<int64_t>& r) { fill(r.begin(), r.end()); });
  else
    fill(0, n);
  auto get = [](const Keyed<U>& k) { return k.key; };
  if (n < kRadixRow)
    std::stable_sort(items.begin(), items.end(),
                     [](const Keyed<U>& x, const Keyed<U>& y) { return x.key < y.key; });
  else
    radix_sort(items.data(), tmp.data(), n, sizeof(U), get, parallel);
  auto write = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i * out_stride] = items[i].index;
  };
  if (parallel && n >= kParallelRow)
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1 << 14),
                      [&](const tbb::blocked_range<int64_t>& r) { write(r.begin(), r.end()); });
  else
    write(0, n);
}

// Runs f(row) for every (outer, inner) row, in parallel across rows when there are many;
// `parallel` tells f whether to split its own row instead.
template <class F>
void for_rows(const NativeArgs& a, F f) {
  int64_t rows = a.outer * a.inner;
  bool one_at_a_time = rows < threads() * 2;
  if (one_at_a_time) {
    for (int64_t r = 0; r < rows; ++r) f(r / a.inner, r % a.inner, true);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      for (int64_t i = r.begin(); i < r.end(); ++i)
                        f(i / a.inner, i % a.inner, false);
                    });
}

template <class U>
void sort_typed(const NativeArgs& a) {
  const U* in = static_cast<const U*>(a.buffers[0]->host_ptr());
  KeyFn<U> key = key_fn<U>(a.dtype, a.descending);
  if (a.n > UINT32_MAX) throw_error(native_name(a), ": rows of more than 2^32 elements");
  if (a.op == Op::Argsort) {
    int64_t* out = static_cast<int64_t*>(a.buffers[1]->host_ptr());
    for_rows(a, [&](int64_t o, int64_t q, bool parallel) {
      thread_local std::vector<Keyed<U>> items, tmp;
      int64_t base = o * a.n * a.inner + q;
      sort_row_indices(in + base, a.inner, a.n, out + base, a.inner, items, tmp, key, parallel);
    });
    return;
  }
  U* out = static_cast<U*>(a.buffers[1]->host_ptr());
  for_rows(a, [&](int64_t o, int64_t q, bool parallel) {
    thread_local std::vector<U> row, tmp;
    int64_t base = o * a.n * a.inner + q;
    tmp.resize(a.n);
    if (a.inner == 1) {
      std::memcpy(out + base, in + base, sizeof(U) * a.n);
      sort_row_values(out + base, tmp.data(), a.n, key, parallel);
      return;
    }
    row.resize(a.n);
    for (int64_t i = 0; i < a.n; ++i) row[i] = in[base + i * a.inner];
    sort_row_values(row.data(), tmp.data(), a.n, key, parallel);
    for (int64_t i = 0; i < a.n; ++i) out[base + i * a.inner] = row[i];
  });
}

void sort(const NativeArgs& a) {
  switch (a.dtype.size()) {
    case 1: return sort_typed<uint8_t>(a);
    case 2: return sort_typed<uint16_t>(a);
    case 4: return sort_typed<uint32_t>(a);
    default: return sort_typed<uint64_t>(a);
  }
}

// ---- scans

// How a dtype is held while scanning: Stored in memory, Compute in registers.
template <class Stored, class Compute>
struct Elem {
  static Compute load(Stored s) { return static_cast<Compute>(s); }
  static Stored store(Compute c) { return static_cast<Stored>(c); }
};
struct HalfElem {
  static float load(uint16_t s) { return half_bits_to_float(s); }
  static uint16_t store(float c) { return float_to_half_bits(c); }
};
struct BFloatElem {
  static float load(uint16_t s) { return bfloat16_bits_to_float(s); }
  static uint16_t store(float c) { return float_to_bfloat16_bits(c); }
};

// The combining function and identity in the compute type (integers wrap as unsigned).
template <class C>
struct Combine {
  ScanOp op;
  C identity;
  C operator()(C acc, C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      switch (op) {
        case ScanOp::Sum: return acc + x;
        case ScanOp::Prod: return acc * x;
        case ScanOp::Max: return std::isnan(acc) || acc > x ? acc : x;
        case ScanOp::Min: return std::isnan(acc) || acc < x ? acc : x;
        case ScanOp::LogAddExp: {
          double a = acc, b = x, m = std::max(a, b);
          if (std::isnan(a) || std::isnan(b)) return NAN;
          if (std::isinf(m)) return static_cast<C>(m);
          return static_cast<C>(m + std::log1p(std::exp(std::min(a, b) - m)));
        }
      }
    } else {
      using W = std::make_unsigned_t<C>;
      switch (op) {
        case ScanOp::Sum: return static_cast<C>(static_cast<W>(acc) + static_cast<W>(x));
        case ScanOp::Prod: return static_cast<C>(static_cast<W>(acc) * static_cast<W>(x));
        case ScanOp::Max: return acc < x ? x : acc;
        case ScanOp::Min: return x < acc ? x : acc;
        case ScanOp::LogAddExp: break;
      }
    }
    return acc;
  }
};

// An inclusive running sum of x[0, n) into out from `carry`, eight (float) or four (double)
// lanes at a time: a log-step scan inside each vector, then the carry added. Returns the last
// sum. Compiled for AVX2 where the host has it.
template <class T, int L>
__attribute__((always_inline)) inline T vector_sum_scan(const T* x, T* out, int64_t n, T carry) {
  typedef T V __attribute__((vector_size(sizeof(T) * L)));
  int64_t i = 0;
  V c;
  for (int l = 0; l < L; ++l) c[l] = carry;
  for (; i + L <= n; i += L) {
    V v;
    std::memcpy(&v, x + i, sizeof(V));
    for (int s = 1; s < L; s *= 2) {
      V t{};
      for (int l = s; l < L; ++l) t[l] = v[l - s];
      v += t;
    }
    v += c;
    std::memcpy(out + i, &v, sizeof(V));
    for (int l = 0; l < L; ++l) c[l] = v[L - 1];
  }
  T acc = c[0];
  for (; i < n; ++i) out[i] = acc = acc + x[i];
  return acc;
}

__attribute__((target("avx2"))) float sum_scan_avx2(const float* x, float* out, int64_t n,
                                                    float carry) {
  return vector_sum_scan<float, 8>(x, out, n, carry);
}
__attribute__((target("avx2"))) double sum_scan_avx2(const double* x, double* out, int64_t n,
                                                     double carry) {
  return vector_sum_scan<double, 4>(x, out, n, carry);
}
template <class T>
T sum_scan_plain(const T* x, T* out, int64_t n, T carry) {
  return vector_sum_scan<T, 16 / sizeof(T)>(x, out, n, carry);
}

bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}

template <class Stored, class E, class C>
void scan_typed(const NativeArgs& a, Combine<C> f) {
  const Stored* in = static_cast<const Stored*>(a.buffers[0]->host_ptr());
  Stored* out = static_cast<Stored*>(a.buffers[1]->host_ptr());
  int64_t n = a.n, st = a.inner;
  // Element k of the scan order of the row at base (reverse walks from the end).
  auto at = [&](int64_t base, int64_t k) { return base + (a.reverse ? n - 1 - k : k) * st; };
  // Scans the run [lo, hi) of the scan order from carry; returns the combined value after it.
  auto run = [&](int64_t base, int64_t lo, int64_t hi, C acc) {
    if constexpr (std::is_same_v<Stored, C> && std::is_floating_point_v<C>) {
      if (f.op == ScanOp::Sum && a.inclusive && !a.reverse && st == 1)
        return have_avx2() ? sum_scan_avx2(in + base + lo, out + base + lo, hi - lo, acc)
                           : sum_scan_plain(in + base + lo, out + base + lo, hi - lo, acc);
    }
    for (int64_t k = lo; k < hi; ++k) {
      int64_t i = at(base, k);
      C x = E::load(in[i]);
      if (a.inclusive) {
        acc = f(acc, x);
        out[i] = E::store(acc);
      } else {
        out[i] = E::store(acc);
        acc = f(acc, x);
      }
    }
    return acc;
  };
  auto total = [&](int64_t base, int64_t lo, int64_t hi) {
    C acc = f.identity;
    for (int64_t k = lo; k < hi; ++k) acc = f(acc, E::load(in[at(base, k)]));
    return acc;
  };
  for_rows(a, [&](int64_t o, int64_t q, bool parallel) {
    int64_t base = o * n * st + q;
    int chunks = parallel && n >= kParallelRow && f.op != ScanOp::LogAddExp ? threads() : 1;
    if (chunks == 1) {
      run(base, 0, n, f.identity);
      return;
    }
    std::vector<C> carry(chunks, f.identity);
    tbb::parallel_for(0, chunks - 1, [&](int c) {
      carry[c + 1] = total(base, n * c / chunks, n * (c + 1) / chunks);
    });
    for (int c = 1; c < chunks; ++c) carry[c] = f(carry[c - 1], carry[c]);
    tbb::parallel_for(0, chunks,
                      [&](int c) { run(base, n * c / chunks, n * (c + 1) / chunks, carry[c]); });
  });
}

template <class Stored, class E, class C>
void scan_with(const NativeArgs& a) {
  scalar::Val id = scalar::scan_identity(a.scan, a.dtype);
  C identity = a.dtype.is_float() ? static_cast<C>(id.f) : static_cast<C>(id.i);
  scan_typed<Stored, E, C>(a, Combine<C>{a.scan, identity});
}

void scan(const NativeArgs& a) {
  switch (a.dtype.kind) {
    case Dtype::Kind::Bool:
    case Dtype::Kind::UInt8: return scan_with<uint8_t, Elem<uint8_t, uint8_t>, uint8_t>(a);
    case Dtype::Kind::Int8: return scan_with<int8_t, Elem<int8_t, int8_t>, int8_t>(a);
    case Dtype::Kind::Int32: return scan_with<int32_t, Elem<int32_t, int32_t>, int32_t>(a);
    case Dtype::Kind::UInt32: return scan_with<uint32_t, Elem<uint32_t, uint32_t>, uint32_t>(a);
    case Dtype::Kind::Int64: return scan_with<int64_t, Elem<int64_t, int64_t>, int64_t>(a);
    case Dtype::Kind::UInt64: return scan_with<uint64_t, Elem<uint64_t, uint64_t>, uint64_t>(a);
    case Dtype::Kind::Float16: return scan_with<uint16_t, HalfElem, float>(a);
    case Dtype::Kind::BFloat16: return scan_with<uint16_t, BFloatElem, float>(a);
    case Dtype::Kind::Float32: return scan_with<float, Elem<float, float>, float>(a);
    case Dtype::Kind::Float64: return scan_with<double, Elem<double, double>, double>(a);
  }
}

// ---- gathers and scatters

inline int64_t clamp_index(int64_t i, int64_t n) {
  i += i < 0 ? n : 0;
  return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

template <class U>
void gather_typed(const NativeArgs& a) {
  const U* src = static_cast<const U*>(a.buffers[0]->host_ptr());
  const int64_t* idx = static_cast<const int64_t*>(a.buffers[1]->host_ptr());
  U* out = static_cast<U*>(a.buffers[2]->host_ptr());
  int64_t n = a.n, m = a.m, in = a.inner;
  int64_t total = a.outer * m;  // (o, j) pairs, each a run of `inner` elements
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, total, std::max<int64_t>(1, 4096 / in)),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      for (int64_t p = r.begin(); p < r.end(); ++p) {
                        int64_t o = p / m, j = p % m;
                        U* dst = out + p * in;
                        const U* row = src + o * n * in;
                        if (a.shared_index) {
                          const U* from = row + clamp_index(idx[j], n) * in;
                          if (in == 1)
                            *dst = *from;
                          else
                            std::memcpy(dst, from, sizeof(U) * in);
                        } else {
                          const int64_t* ix = idx + p * in;
                          for (int64_t q = 0; q < in; ++q)
                            dst[q] = row[clamp_index(ix[q], n) * in + q];
                        }
                      }
                    });
}

void gather(const NativeArgs& a) {
  if (a.outer * a.m * a.inner == 0) return;
  switch (a.dtype.size()) {
    case 1: return gather_typed<uint8_t>(a);
    case 2: return gather_typed<uint16_t>(a);
    case 4: return gather_typed<uint32_t>(a);
    default: return gather_typed<uint64_t>(a);
  }
}

// Adds into acc (the compute type) the updates whose destination element lies in [lo, hi)
// (flat indices of the output), in index order.
template <class Stored, class E, class C>
void scatter_range(const NativeArgs& a, C* acc, int64_t lo, int64_t hi) {
  const int64_t* idx = static_cast<const int64_t*>(a.buffers[1]->host_ptr());
  const Stored* upd = static_cast<const Stored*>(a.buffers[2]->host_ptr());
  Combine<C> add{ScanOp::Sum, C(0)};
  int64_t n = a.n, m = a.m, in = a.inner;
  for (int64_t o = 0; o < a.outer; ++o) {
    int64_t row = o * n * in;
    if (row + n * in <= lo || row >= hi) continue;
    for (int64_t j = 0; j < m; ++j)
      for (int64_t q = 0; q < in; ++q) {
        int64_t u = (o * m + j) * in + q;
        int64_t e = row + clamp_index(a.shared_index ? idx[j] : idx[u], n) * in + q;
        if (e >= lo && e < hi) {
          if constexpr (std::is_same_v<C, uint8_t>)
            acc[e] = acc[e] | E::load(upd[u]);  // bool
          else
            acc[e] = add(acc[e], E::load(upd[u]));
        }
      }
  }
}

template <class Stored, class E, class C>
void scatter_typed(const NativeArgs& a) {
  const Stored* base = static_cast<const Stored*>(a.buffers[0]->host_ptr());
  Stored* out = static_cast<Stored*>(a.buffers[3]->host_ptr());
  int64_t total = a.outer * a.n * a.inner;
  // Half types accumulate in float32 and round once, as the reference does.
  std::vector<C> wide;
  C* acc;
  if constexpr (std::is_same_v<Stored, C>) {
    if (out != base) std::memcpy(out, base, sizeof(Stored) * total);
    acc = out;
  } else {
    wide.resize(total);
    for (int64_t e = 0; e < total; ++e) wide[e] = E::load(base[e]);
    acc = wide.data();
  }
  int parts = a.outer * a.m * a.inner >= kParallelRow ? threads() : 1;
  if (parts == 1)
    scatter_range<Stored, E, C>(a, acc, 0, total);
  else
    tbb::parallel_for(0, parts, [&](int p) {
      scatter_range<Stored, E, C>(a, acc, total * p / parts, total * (p + 1) / parts);
    });
  if constexpr (!std::is_same_v<Stored, C>)
    for (int64_t e = 0; e < total; ++e) out[e] = E::store(wide[e]);
}

void scatter_add(const NativeArgs& a) {
  switch (a.dtype.kind) {
    case Dtype::Kind::Bool: return scatter_typed<uint8_t, Elem<uint8_t, uint8_t>, uint8_t>(a);
    case Dtype::Kind::UInt8: return scatter_typed<uint8_t, Elem<uint8_t, uint16_t>, uint16_t>(a);
    case Dtype::Kind::Int8: return scatter_typed<int8_t, Elem<int8_t, int8_t>, int8_t>(a);
    case Dtype::Kind::Int32: return scatter_typed<int32_t, Elem<int32_t, int32_t>, int32_t>(a);
    case Dtype::Kind::UInt32: return scatter_typed<uint32_t, Elem<uint32_t, uint32_t>, uint32_t>(a);
    case Dtype::Kind::Int64: return scatter_typed<int64_t, Elem<int64_t, int64_t>, int64_t>(a);
    case Dtype::Kind::UInt64: return scatter_typed<uint64_t, Elem<uint64_t, uint64_t>, uint64_t>(a);
    case Dtype::Kind::Float16: return scatter_typed<uint16_t, HalfElem, float>(a);
    case Dtype::Kind::BFloat16: return scatter_typed<uint16_t, BFloatElem, float>(a);
    case Dtype::Kind::Float32: return scatter_typed<float, Elem<float, float>, float>(a);
    case Dtype::Kind::Float64: return scatter_typed<double, Elem<double, double>, double>(a);
  }
}

}  // namespace

void run_native(const NativeArgs& a) {
  std::vector<size_t> bytes;
  for (Buffer* b : a.buffers) {
    if (!b || !b->host_ptr())
      throw_error("cpu backend: ", native_name(a), " got a missing or non-host buffer");
    bytes.push_back(b->bytes());
  }
  check_native_args(a, bytes);
  if (a.outer * a.inner == 0) return;
  switch (a.op) {
    case Op::Sort:
    case Op::Argsort: return sort(a);
    case Op::Scan: return scan(a);
    case Op::Gather: return gather(a);
    case Op::ScatterAdd: return scatter_add(a);
    default: throw_error("internal: ", op_name(a.op), " is not a native primitive");
  }
}

}  // namespace kiln::cpu
