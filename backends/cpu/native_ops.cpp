// Sorting: every dtype maps to an unsigned key whose integer order is the sort order (signed
// integers flip the sign bit; floats flip all bits when negative and the sign bit otherwise,
// -0 keys as +0 so the two tie as they compare, every NaN keys as the largest; descending
// complements non-NaN keys, so NaN stays last). An LSD radix sort on 8-bit digits is stable,
// so it gives the reference's order exactly. A long row is split by its top 11 bits across
// threads (per-chunk counts), then each bucket sorted by LSD in cache; passes whose digit is
// the same for every key are skipped. Values
// are moved as their keys, a bijection of their bits, so -0 and NaN payloads survive.
//
// Scans: a long row is cut into one chunk per thread, each scanned from its carry, the fold of
// fixed 8192-element block totals (summed by every thread) before it; with two threads the
// second sums only part of the first's chunk while the first scans it; float32/float64 sums
// scan 16/8 lanes a vector with AVX-512, 8/4 with AVX2 (backends/cpu/scan_vectors.h).
// Gathers copy element bits; scatter_add splits the destination range between threads, each
// reading every index in order, so each destination adds its updates in index order (the
// reference's order: float results agree bitwise).
#include "backends/cpu/native_ops.h"

#include <tbb/blocked_range.h>
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "backends/cpu/scan_vectors.h"
#include "backends/native.h"
#include "graph/error.h"
#include "graph/float16.h"

namespace kiln::cpu {

namespace {

int threads() { return std::max(1, tbb::this_task_arena::max_concurrency()); }

// Spins until `done()` holds: for waits of a few microseconds on work another running thread
// is doing. Yields the core after the first thousand checks, should that thread be preempted.
template <class F>
void wait_until(F done) {
  for (int i = 0; !done(); ++i) {
    if (i < 1000)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

// Rows of at least this many elements are split across threads.
constexpr int64_t kParallelRow = int64_t(1) << 15;

// ---- keys

enum class KeyKind { Unsigned, Signed, Float };

// Order-preserving unsigned keys of elements stored as U. `total` (sort's values) is a
// bijection: -0 keys below +0 and NaNs (any sign) above +inf by payload, so the values come
// back from their keys. Otherwise (argsort) -0 and +0 share a key and every NaN keys as the
// largest, so ties keep their positions exactly as the reference's comparison says.
template <class U>
struct KeyFn {
  KeyKind kind = KeyKind::Unsigned;
  bool total = false;
  U inf = 0;   // Float: the bits of +inf (anything above, without the sign, is NaN)
  U flip = 0;  // xored into every non-NaN key: the sign bit for Signed, ~0 more when descending
  static constexpr int top = 8 * sizeof(U) - 1;
  static constexpr U sign = U(1) << top;
  // Branch-free but for NaN and (argsort) zeros: this runs twice per element in a long row.
  U operator()(U b) const {
    if (kind == KeyKind::Float) {
      U mag = b & U(~sign);
      if (mag > inf) [[unlikely]]
        return total ? U(mag | sign) : U(~U(0));  // NaN: last both ways
      if (!total && mag == 0) b = 0;
      U negative = U(U(0) - U(b >> top));  // all ones for a negative value
      return U(b ^ (negative | sign) ^ flip);
    }
    return U(b ^ flip);
  }
  // The element bits of a `total` key.
  U bits(U k) const {
    if (kind == KeyKind::Float) {
      if (k > U(inf | sign)) [[unlikely]]
        return U(k ^ sign);  // NaN (a canonical positive sign)
      k ^= flip;
      U positive = U(U(0) - U(k >> top));  // all ones when the key's top bit is set
      return U(k ^ (U(~positive) | sign));
    }
    return U(k ^ flip);
  }
};

template <class U>
KeyFn<U> key_fn(Dtype d, bool descending, bool total) {
  KeyFn<U> f;
  f.total = total;
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
    f.flip = KeyFn<U>::sign;
  }
  if (descending) f.flip = U(~f.flip);
  return f;
}

// ---- radix sort of items by their keys (stable)

template <class U>
struct Keyed {
  U key;
  uint32_t index;
};
template <class U>
U key_of(U k) {
  return k;
}
template <class U>
U key_of(const Keyed<U>& k) {
  return k.key;
}

// Counts digits 0 .. P-1 of the keys of a[0, n) into count (P tables of 2^width), the digits
// of one key unrolled (a loop over a run-time number of digits costs twice as much here).
template <int P, class Item>
void count_digits(const Item* a, int64_t n, int width, uint32_t* count) {
  uint64_t mask = (uint64_t(1) << width) - 1;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t k = key_of(a[i]);
    for (int p = 0; p < P; ++p) ++count[(p << width) + ((k >> (width * p)) & mask)];
  }
}

// LSD passes over digits 0 .. bits-1 of a[0, n) (n < 2^32), one thread, ping-ponging between a
// and tmp; returns where the result is. Counts every digit in one read and skips digits all
// keys share; `width` bits a digit (8 for rows in memory: more write streams than that cost
// more than a pass; up to 11 for buckets in cache). The result is then read in order by the
// caller: writing it straight to a cold output from the last pass's scattered stores was
// slower than this extra, sequential pass.
template <class Item>
Item* lsd(Item* a, Item* tmp, int64_t n, int bits, int width) {
  int passes = (bits + width - 1) / width, buckets = 1 << width;
  thread_local std::vector<uint32_t> counts;
  std::vector<uint32_t>& count = counts;
  count.assign(static_cast<size_t>(passes) * buckets, 0);
  uint64_t mask = buckets - 1;
  switch (passes) {
    case 1: count_digits<1>(a, n, width, count.data()); break;
    case 2: count_digits<2>(a, n, width, count.data()); break;
    case 3: count_digits<3>(a, n, width, count.data()); break;
    default:
      for (int64_t i = 0; i < n; ++i) {
        uint64_t k = key_of(a[i]);
        for (int p = 0; p < passes; ++p) ++count[p * buckets + ((k >> (width * p)) & mask)];
      }
  }
  Item* src = a;
  Item* dst = tmp;
  for (int p = 0; p < passes; ++p) {
    uint32_t* c = count.data() + p * buckets;
    if (std::any_of(c, c + buckets, [&](uint32_t t) { return t == n; })) continue;
    uint32_t at = 0;
    for (int b = 0; b < buckets; ++b) {
      uint32_t k = c[b];
      c[b] = at;
      at += k;
    }
    int shift = width * p;
    for (int64_t i = 0; i < n; ++i) dst[c[(uint64_t(key_of(src[i])) >> shift) & mask]++] = src[i];
    std::swap(src, dst);
  }
  return src;
}

// Rows shorter than this take a stable comparison sort on the same keys.
constexpr int64_t kRadixRow = 256;

// Sorts the items make(0) .. make(n - 1) (0 < n < 2^32) through a and tmp (n items each), and
// hands each item with its position in the sorted row to emit(position, item). A long row,
// when `parallel`: its top 11 bits split it across threads (counted in one read of the row,
// the items made again as they are moved, so a holds nothing), then each top-digit bucket is
// sorted on its own, in parallel, ping-ponging with a per-thread scratch row that stays in
// cache (float32 normal data: ~100K items the largest bucket), and handed over in order.
template <class Item, class Make, class Emit>
void sort_items(Item* a, Item* tmp, int64_t n, int bits, bool parallel, Make make, Emit emit) {
  bool split = parallel && n >= kParallelRow && bits > 16;
  if (!split) {
    for (int64_t i = 0; i < n; ++i) a[i] = make(i);
    if (n < kRadixRow) {
      std::stable_sort(a, a + n,
                       [](const Item& x, const Item& y) { return key_of(x) < key_of(y); });
      for (int64_t i = 0; i < n; ++i) emit(i, a[i]);
      return;
    }
    Item* r = lsd(a, tmp, n, bits, 8);
    for (int64_t i = 0; i < n; ++i) emit(i, r[i]);
    return;
  }
  constexpr int kTop = 11, kBuckets = 1 << kTop;
  int chunks = threads(), shift = bits - kTop;
  int passes = (shift + kTop - 1) / kTop, width = (shift + passes - 1) / passes;
  std::vector<std::array<uint32_t, kBuckets>> count(chunks);
  auto bounds = [&](int c) { return std::make_pair(n * c / chunks, n * (c + 1) / chunks); };
  tbb::parallel_for(0, chunks, [&](int c) {
    auto [lo, hi] = bounds(c);
    count[c].fill(0);
    for (int64_t i = lo; i < hi; ++i) ++count[c][(key_of(make(i)) >> shift) & (kBuckets - 1)];
  });
  std::vector<int64_t> start(kBuckets + 1);
  uint32_t at = 0;
  for (int b = 0; b < kBuckets; ++b) {
    start[b] = at;
    for (int c = 0; c < chunks; ++c) {
      uint32_t k = count[c][b];
      count[c][b] = at;
      at += k;
    }
  }
  start[kBuckets] = n;
  tbb::parallel_for(0, chunks, [&](int c) {
    auto [lo, hi] = bounds(c);
    std::array<uint32_t, kBuckets>& off = count[c];
    auto put = [&](const Item& it) { tmp[off[(key_of(it) >> shift) & (kBuckets - 1)]++] = it; };
    int64_t i = lo;
    for (; i + 4 <= hi; i += 4) {  // four keys made ahead of their stores: ~10% here
      Item i0 = make(i), i1 = make(i + 1), i2 = make(i + 2), i3 = make(i + 3);
      put(i0), put(i1), put(i2), put(i3);
    }
    for (; i < hi; ++i) put(make(i));
  });
  tbb::parallel_for(0, kBuckets, [&](int b) {
    int64_t lo = start[b], k = start[b + 1] - lo;
    if (k == 0) return;
    auto at_lo = [&](int64_t i, const Item& it) { emit(lo + i, it); };
    if (k < kRadixRow) {
      std::stable_sort(tmp + lo, tmp + lo + k,
                       [](const Item& x, const Item& y) { return key_of(x) < key_of(y); });
      for (int64_t i = 0; i < k; ++i) at_lo(i, tmp[lo + i]);
      return;
    }
    // Digits no wider than the bucket is long (a small bucket's counts would cost more than
    // its keys).
    thread_local std::vector<Item> scratch_tl;
    std::vector<Item>& scratch = scratch_tl;
    if (static_cast<int64_t>(scratch.size()) < k) scratch.resize(k);
    int w = std::clamp(static_cast<int>(std::bit_width(static_cast<uint64_t>(k))) - 2, 4, width);
    Item* r = lsd(tmp + lo, scratch.data(), k, shift, std::min(w, shift));
    for (int64_t i = 0; i < k; ++i) at_lo(i, r[i]);
  });
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
  if (a.n > UINT32_MAX) throw_error(native_name(a), ": rows of more than 2^32 elements");
  int bits = 8 * sizeof(U);
  if (a.op == Op::Argsort) {
    KeyFn<U> key = key_fn<U>(a.dtype, a.descending, false);
    int64_t* out = static_cast<int64_t*>(a.buffers[1]->host_ptr());
    for_rows(a, [&](int64_t o, int64_t q, bool parallel) {
      // Per-thread scratch, named through references: a lambda running on another thread
      // would otherwise see that thread's own (empty) thread_local vectors.
      thread_local std::vector<Keyed<U>> items_tl, tmp_tl;
      std::vector<Keyed<U>>& items = items_tl;
      std::vector<Keyed<U>>& tmp = tmp_tl;
      items.resize(a.n);
      tmp.resize(a.n);
      const U* row = in + o * a.n * a.inner + q;
      int64_t* dst = out + o * a.n * a.inner + q;
      auto make = [&](int64_t i) {
        return Keyed<U>{key(row[i * a.inner]), static_cast<uint32_t>(i)};
      };
      sort_items(items.data(), tmp.data(), a.n, bits, parallel, make,
                 [&](int64_t i, const Keyed<U>& it) { dst[i * a.inner] = it.index; });
    });
    return;
  }
  KeyFn<U> key = key_fn<U>(a.dtype, a.descending, true);
  U* out = static_cast<U*>(a.buffers[1]->host_ptr());
  for_rows(a, [&](int64_t o, int64_t q, bool parallel) {
    thread_local std::vector<U> keys_tl, tmp_tl;
    std::vector<U>& keys = keys_tl;
    std::vector<U>& tmp = tmp_tl;
    keys.resize(a.n);
    tmp.resize(a.n);
    const U* row = in + o * a.n * a.inner + q;
    U* dst = out + o * a.n * a.inner + q;
    auto make = [&](int64_t i) { return key(row[i * a.inner]); };
    sort_items(keys.data(), tmp.data(), a.n, bits, parallel, make,
               [&](int64_t i, U k) { dst[i * a.inner] = key.bits(k); });
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
  static C sum(C acc, C x) {
    if constexpr (std::is_floating_point_v<C>)
      return acc + x;
    else
      return static_cast<C>(static_cast<std::make_unsigned_t<C>>(acc) +
                            static_cast<std::make_unsigned_t<C>>(x));
  }
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

// Long rows split into one chunk per thread, each scanned from the row's value before it (its
// carry). The carries fold, in order, the totals of fixed blocks of this many elements, which
// every thread sums a contiguous run of, one task per thread (the input before the last chunk
// is then read twice: once here, once by the scan). Measured against scanning each chunk from
// zero and then adding the carries to the later chunks (docs/performance.md): no faster at
// 2^20 floats in cache, ~10% slower at 2^24 from memory, so the totals come first.
constexpr int64_t kScanBlock = 8192;

template <class Stored, class E, class C>
void scan_typed(const NativeArgs& a, Combine<C> f) {
  const Stored* in = static_cast<const Stored*>(a.buffers[0]->host_ptr());
  Stored* out = static_cast<Stored*>(a.buffers[1]->host_ptr());
  int64_t n = a.n, st = a.inner;
  // Element k of the scan order of the row at base (reverse walks from the end).
  auto at = [&](int64_t base, int64_t k) { return base + (a.reverse ? n - 1 - k : k) * st; };
  constexpr bool kVectorType = std::is_same_v<Stored, C> && std::is_floating_point_v<C>;
  bool contiguous_sum = f.op == ScanOp::Sum && !a.reverse && st == 1;
  ScanIsa isa = host_scan_isa();
  // Scans the run [lo, hi) of the scan order. A float32/float64 inclusive sum on a vector
  // host: each output is carry + the run's local prefix (vectors of 16 or 8 lanes, else 8 or
  // 4); otherwise the running value starts at carry and takes the elements one by one.
  auto run = [&](int64_t base, int64_t lo, int64_t hi, C carry) {
    if constexpr (kVectorType) {
      if (contiguous_sum && a.inclusive && isa != ScanIsa::None)
        return sum_scan(in + base + lo, out + base + lo, hi - lo, carry, isa);
    }
    C acc = carry;
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
    if constexpr (kVectorType) {
      if (contiguous_sum && isa != ScanIsa::None) return sum_total(in + base + lo, hi - lo, isa);
    }
    C acc = f.identity;
    for (int64_t k = lo; k < hi; ++k) acc = f(acc, E::load(in[at(base, k)]));
    return acc;
  };
  // Two threads (a common small host): the first scans [0, h) at once, publishing its running
  // value at m on the way; the second sums [m, h) meanwhile, then scans [h, n) from that value
  // and its sum. No totals pass before the scan and no barrier. h = 3n/5 and m = n/5 end both
  // threads together where a total runs ~2.4x a scan's rate per element and the second thread
  // starts a few microseconds late (measured on a Zen 5 host, docs/performance.md); a ratio of
  // 2 would end the second ~5% later. They are fixed fractions of the row, so the result does
  // not depend on timing. Each side is claimed by a running task, so the second never waits for
  // a task that has not started.
  auto scan_in_two = [&](int64_t base) {
    int64_t h = n * 3 / 5 / 64 * 64, m = n / 5 / 64 * 64;
    std::atomic<int> sides{0};
    std::atomic<bool> published{false};
    C head = f.identity;
    tbb::parallel_for(0, 2, [&](int) {
      if (sides.fetch_add(1, std::memory_order_relaxed) == 0) {
        head = run(base, 0, m, f.identity);
        published.store(true, std::memory_order_release);
        run(base, m, h, head);
      } else {
        C tail = total(base, m, h);
        wait_until([&] { return published.load(std::memory_order_acquire); });
        run(base, h, n, f(head, tail));
      }
    });
  };
  for_rows(a, [&](int64_t o, int64_t q, bool parallel) {
    int64_t base = o * n * st + q;
    int chunks = threads();
    if (!parallel || n < kParallelRow || f.op == ScanOp::LogAddExp || chunks == 1) {
      run(base, 0, n, f.identity);
      return;
    }
    if (chunks == 2) return scan_in_two(base);
    // Chunk c is blocks [c * per, (c + 1) * per); the totals of the blocks before the last
    // chunk, summed in parallel, fold into each chunk's carry.
    int64_t per = ((n + kScanBlock - 1) / kScanBlock + chunks - 1) / chunks;
    int64_t counted = per * (chunks - 1);
    std::vector<C> totals(counted);
    tbb::parallel_for(0, chunks, [&](int t) {
      for (int64_t b = counted * t / chunks; b < counted * (t + 1) / chunks; ++b)
        totals[b] = total(base, std::min(n, b * kScanBlock), std::min(n, (b + 1) * kScanBlock));
    });
    std::vector<C> carry(chunks, f.identity);
    C acc = f.identity;
    for (int64_t b = 0; b < counted; ++b) {
      acc = b == 0 ? totals[0] : f(acc, totals[b]);
      if ((b + 1) % per == 0) carry[(b + 1) / per] = acc;
    }
    tbb::parallel_for(0, chunks, [&](int c) {
      int64_t lo = std::min(n, c * per * kScanBlock), hi = std::min(n, (c + 1) * per * kScanBlock);
      if (lo < hi) run(base, lo, hi, carry[c]);
    });
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
  // Blocks of (o, j) pairs, each pair a run of `inner` elements; no division per element.
  int64_t grain = std::max<int64_t>(1, 8192 / in);
  tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, a.outer, 1, 0, m, grain),
                    [&](const tbb::blocked_range2d<int64_t>& r) {
                      for (int64_t o = r.rows().begin(); o < r.rows().end(); ++o) {
                        const U* row = src + o * n * in;
                        int64_t j0 = r.cols().begin(), j1 = r.cols().end();
                        U* dst = out + (o * m + j0) * in;
                        if (a.shared_index && in == 1) {
                          for (int64_t j = j0; j < j1; ++j)
                            dst[j - j0] = row[clamp_index(idx[j], n)];
                        } else if (a.shared_index) {
                          for (int64_t j = j0; j < j1; ++j)
                            std::memcpy(dst + (j - j0) * in, row + clamp_index(idx[j], n) * in,
                                        sizeof(U) * in);
                        } else {
                          const int64_t* ix = idx + (o * m + j0) * in;
                          for (int64_t j = 0; j < j1 - j0; ++j)
                            for (int64_t q = 0; q < in; ++q)
                              dst[j * in + q] = row[clamp_index(ix[j * in + q], n) * in + q];
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

// Adds into acc (the compute type) the updates of rows [o0, o1) x inner positions [q0, q1), in
// index order (the reference's order, so float results agree bitwise).
template <class Stored, class E, class C>
void scatter_rows(const NativeArgs& a, C* acc, int64_t o0, int64_t o1, int64_t q0, int64_t q1) {
  const int64_t* idx = static_cast<const int64_t*>(a.buffers[1]->host_ptr());
  const Stored* upd = static_cast<const Stored*>(a.buffers[2]->host_ptr());
  Combine<C> add{ScanOp::Sum, C(0)};
  int64_t n = a.n, m = a.m, in = a.inner;
  for (int64_t o = o0; o < o1; ++o) {
    C* row = acc + o * n * in;
    const Stored* u = upd + o * m * in;
    for (int64_t j = 0; j < m; ++j) {
      const int64_t* ix = a.shared_index ? nullptr : idx + (o * m + j) * in;
      int64_t shared = a.shared_index ? clamp_index(idx[j], n) * in : 0;
      for (int64_t q = q0; q < q1; ++q) {
        int64_t e = a.shared_index ? shared + q : clamp_index(ix[q], n) * in + q;
        C v = E::load(u[j * in + q]);
        if constexpr (std::is_same_v<C, uint8_t>)
          row[e] = row[e] | v;  // bool
        else
          row[e] = add(row[e], v);
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
  // Rows (and inner positions) are independent; one row's updates run in order.
  if (a.outer >= threads())
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, a.outer),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        scatter_rows<Stored, E, C>(a, acc, r.begin(), r.end(), 0, a.inner);
                      });
  else if (a.inner >= 64 * threads())
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, a.inner, 64),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        scatter_rows<Stored, E, C>(a, acc, 0, a.outer, r.begin(), r.end());
                      });
  else
    scatter_rows<Stored, E, C>(a, acc, 0, a.outer, 0, a.inner);
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
  if (!is_native(a.op)) throw_error("internal: ", op_name(a.op), " is not a native primitive");
  // Isolated: a thread waiting inside these parallel loops must not pick up other work of the
  // arena (another plan's sort would reuse this thread's scratch rows).
  tbb::this_task_arena::isolate([&] {
    switch (a.op) {
      case Op::Sort:
      case Op::Argsort: return sort(a);
      case Op::Scan: return scan(a);
      case Op::Gather: return gather(a);
      default: return scatter_add(a);
    }
  });
}

}  // namespace kiln::cpu
