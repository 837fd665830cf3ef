// The cpu backend's split of a long scan across threads by look-back
// (backends/cpu/scan_lookback.h): on 1, 2, 3 and 8 threads, rows across the blocks' and chunks'
// edges, forward and reversed, inclusive and exclusive, contiguous, strided and starting off a
// vector's alignment, against a sequential scan of values whose every partial result is exact in
// the dtype (small integers), so any order of additions gives the same bits and a carry off by one
// block's total, or one element, fails. And a thread that runs late: the look-back does not wait
// for it but folds back to the row's start.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "backends/cpu/scan_lookback.h"
#include "backends/native.h"
#include "device_native.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using cpu::kLookbackBlock;

// Small integers in [-8, 8] (>= 0 for unsigned; -1 and 1 for products).
std::vector<int64_t> small_values(int64_t count, ScanOp op, bool is_unsigned, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> v(is_unsigned ? 0 : -8, 8), sign(0, 1);
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t& x : out) x = op == ScanOp::Prod ? (sign(rng) ? 1 : -1) : v(rng);
  return out;
}

template <class T>
std::vector<T> as(const std::vector<int64_t>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The scan of every (outer, inner) row of x, element by element, as int64 (exact here).
std::vector<int64_t> sequential(const std::vector<int64_t>& x, const NativeArgs& a) {
  std::vector<int64_t> out(x.size());
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t q = 0; q < a.inner; ++q) {
      int64_t acc = a.scan == ScanOp::Prod ? 1 : a.scan == ScanOp::Max ? INT64_MIN : 0;
      for (int64_t k = 0; k < a.n; ++k) {
        int64_t i = o * a.n * a.inner + (a.reverse ? a.n - 1 - k : k) * a.inner + q;
        int64_t before = acc;
        acc = a.scan == ScanOp::Sum    ? acc + x[i]
              : a.scan == ScanOp::Prod ? acc * x[i]
                                       : std::max(acc, x[i]);
        out[i] = a.inclusive ? acc : before;
      }
    }
  return out;
}

template <class T>
void expect_scan(Dtype d, NativeArgs a, int threads, uint64_t seed) {
  a.op = Op::Scan;
  a.dtype = d;
  int64_t count = a.outer * a.n * a.inner;
  std::vector<int64_t> x = small_values(count, a.scan, d.is_unsigned(), seed);
  std::vector<T> in = as<T>(x);
  kdiff::Bytes bytes(reinterpret_cast<const uint8_t*>(in.data()),
                     reinterpret_cast<const uint8_t*>(in.data() + in.size()));
  kdiff::Bytes got;
  tbb::task_arena arena(threads);
  arena.execute(
      [&] { got = test::run_native(backend_for(device("cpu")), a, {bytes}, bytes.size()); });
  std::vector<T> want = as<T>(sequential(x, a)), g(want.size());
  std::memcpy(g.data(), got.data(), got.size());
  for (size_t i = 0; i < want.size(); ++i)
    if (g[i] != want[i]) {
      ADD_FAILURE() << op_name(a.scan) << " " << d.name() << (a.inclusive ? "" : " exclusive")
                    << (a.reverse ? " reverse" : "") << " n " << a.n << " inner " << a.inner
                    << " on " << threads << " threads: element " << i << " is " << +g[i]
                    << ", want " << +want[i] << " (block " << i / a.inner / kLookbackBlock << ")";
      return;
    }
}

NativeArgs row(int64_t n, ScanOp op = ScanOp::Sum, bool inclusive = true, bool reverse = false,
               int64_t inner = 1) {
  NativeArgs a;
  a.scan = op, a.n = n, a.inner = inner, a.inclusive = inclusive, a.reverse = reverse;
  return a;
}

// Rows of 2^15 (the shortest split: 8 blocks), 2^15 + 1, 13 blocks and 1 or all but 1 more,
// and 100,003; float32 and float64 sums take the vector loops, the rest element by element.
TEST(ScanLookback, CarriesAreExactOnEveryThreadCount) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "no cpu backend";
  const int64_t lengths[] = {int64_t(1) << 15, (int64_t(1) << 15) + 1, 13 * kLookbackBlock + 1,
                             14 * kLookbackBlock - 1, 100003};
  uint64_t seed = 0;
  for (int threads : {1, 2, 3, 8})
    for (int64_t n : lengths) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " n " + std::to_string(n));
      expect_scan<float>(float32, row(n), threads, ++seed);
      expect_scan<double>(float64, row(n), threads, ++seed);
      expect_scan<float>(float32, row(n, ScanOp::Sum, false), threads, ++seed);
      expect_scan<float>(float32, row(n, ScanOp::Sum, true, true), threads, ++seed);
      expect_scan<int32_t>(int32, row(n, ScanOp::Sum, false, true), threads, ++seed);
      expect_scan<int64_t>(int64, row(n, ScanOp::Max), threads, ++seed);
      expect_scan<double>(float64, row(n, ScanOp::Prod, false), threads, ++seed);
      expect_scan<uint32_t>(uint32, row(n, ScanOp::Sum), threads, ++seed);
    }
  // Strided rows (inner 2: every other element, one row split at a time) and two rows of them.
  for (int threads : {2, 3}) {
    expect_scan<float>(float32, row(40001, ScanOp::Sum, true, false, 2), threads, ++seed);
    expect_scan<float>(float32, row(40001, ScanOp::Sum, false, true, 2), threads, ++seed);
  }
  // Rows that start off a vector's alignment, split and not.
  for (int64_t n : {(int64_t(1) << 15) + 3, int64_t(1001)}) {
    NativeArgs three = row(n);
    three.outer = 3;
    expect_scan<float>(float32, three, 2, ++seed);
    expect_scan<double>(float64, three, 2, ++seed);
  }
}

// Chunk 0's thread stalls in its first block until the look-back has folded that block: the
// later chunk's thread must not wait for it, and its carry is then the whole row before it.
TEST(ScanLookback, ALateThreadIsNotWaitedFor) {
  const int64_t n = 5 * kLookbackBlock + 7;
  std::vector<int64_t> x = small_values(n, ScanOp::Sum, false, 5), out(n);
  std::atomic<bool> first_block_summed{false};
  std::atomic<int> stalls{0};
  tbb::task_arena arena(2);
  arena.execute([&] {
    cpu::scan_with_lookback<int64_t>(
        n, 2, 1.0, 0,
        [&](int64_t lo, int64_t hi, int64_t carry) {
          if (lo == 0) {  // at most 10 s, so that a broken look-back fails rather than hangs
            auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (!first_block_summed.load() && std::chrono::steady_clock::now() < until)
              std::this_thread::yield();
            stalls += first_block_summed.load() ? 1 : 0;
          }
          for (int64_t i = lo; i < hi; ++i) out[i] = carry += x[i];
          return carry;
        },
        [&](int64_t lo, int64_t hi) {
          if (lo == 0) first_block_summed = true;
          int64_t t = 0;
          for (int64_t i = lo; i < hi; ++i) t += x[i];
          return t;
        },
        [](int64_t a, int64_t b) { return a + b; });
  });
  EXPECT_EQ(stalls.load(), 1) << "the look-back never reached the row's first block";
  int64_t acc = 0;
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], acc += x[i]) << "element " << i;
}

// Chunk 0 weighs 1 and every later chunk `later`; a split into more chunks than blocks leaves
// some empty.
TEST(ScanLookback, ChunkStartsFollowTheWeights) {
  EXPECT_EQ(cpu::lookback_starts(100, 3, 0.5), (std::vector<int64_t>{0, 50, 75, 100}));
  EXPECT_EQ(cpu::lookback_starts(100, 2, 1.0), (std::vector<int64_t>{0, 50, 100}));
  EXPECT_EQ(cpu::lookback_starts(7, 1, 0.5), (std::vector<int64_t>{0, 7}));
  std::vector<int64_t> s = cpu::lookback_starts(3, 8, 0.7);
  ASSERT_EQ(s.size(), 9u);
  EXPECT_EQ(s.front(), 0);
  EXPECT_EQ(s.back(), 3);
  for (size_t c = 1; c < s.size(); ++c) EXPECT_LE(s[c - 1], s[c]);
}

}  // namespace
}  // namespace kiln
