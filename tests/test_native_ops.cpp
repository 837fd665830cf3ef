// The native primitives (sort, argsort, topk, partition, the five scans, take,
// take_along_axis, scatter_add): values against NumPy's on small cases (NaN last, stable ties,
// -0, out-of-range and negative indices, empty arrays), every dtype and axis on cpu against the
// reference at sizes that cross the radix, chunk and parallel thresholds, and the device
// backends (Kernel IR lowering) against the reference as a sweep.
#include <gtest/gtest.h>
#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "backends/native_kernels.h"
#include "graph/array_node.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::values;

namespace {

void expect_values(const Array& a, const std::vector<double>& want, double tol = 0) {
  std::vector<double> got = values(a);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(want[i]) || tol == 0)
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

const std::vector<Dtype> kDtypes = {bool_,  int8,    int32,    int64,   uint8,  uint32,
                                    uint64, float16, bfloat16, float32, float64};

}  // namespace

TEST(NativeOps, SortAndArgsortMatchNumpy) {
  Array x = array<float>({3, NAN, -1, 0, -0.0f, 3, -INFINITY, 2, NAN, -1}, {10});
  // NumPy: np.sort puts NaN last; argsort(kind='stable') keeps ties (and -0 == 0) in order.
  expect_values(sort(x), {-INFINITY, -1, -1, 0, 0, 2, 3, 3, NAN, NAN});
  expect_values(argsort(x), {6, 2, 9, 3, 4, 7, 0, 5, 1, 8});
  // sort orders -0 before +0 (a total order, as its radix keys do); argsort keeps them as
  // ties in position order (3 before 4), as a stable comparison does.
  EXPECT_TRUE(std::signbit(sort(x).to_vector<float>()[3]));
  EXPECT_FALSE(std::signbit(sort(x).to_vector<float>()[4]));
  auto [top, at] = topk(x, 4);  // largest first, ties by position, NaN last
  expect_values(top, {3, 3, 2, 0});
  expect_values(at, {0, 5, 7, 3});
  Array m = array<int32_t>({5, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, {3, 4});
  expect_values(sort(m, 0), {5, 1, 2, 1, 5, 3, 4, 6, 5, 9, 5, 8});
  expect_values(argsort(m, 0), {0, 0, 1, 0, 1, 2, 0, 1, 2, 1, 2, 2});
  expect_values(argsort(m, 1), {1, 3, 2, 0, 2, 0, 3, 1, 1, 0, 2, 3});
  expect_values(partition(m, 2, 1), {1, 1, 4, 5, 2, 5, 6, 9, 3, 5, 5, 8});
  expect_values(argpartition(array<uint8_t>({200, 3, 255, 0}, {4}), 1), {3, 1, 0, 2});
  expect_values(sort(array<int8_t>({-128, 127, 0, -1}, {4})), {-128, -1, 0, 127});
  expect_values(sort(array<uint64_t>({~0ull, 1, 0}, {3})), {0, 1, 1.8446744073709552e19});
  expect_values(sort(array<bool>({true, false, true, false}, {4})), {0, 0, 1, 1});
  EXPECT_EQ(sort(zeros({0})).shape(), (Shape{0}));
  EXPECT_EQ(argsort(zeros({3, 0}), 1).shape(), (Shape{3, 0}));
  EXPECT_EQ(argsort(m).dtype(), int64);
}

TEST(NativeOps, ScansMatchNumpy) {
  Array x = array<double>({1, 2, 3, 4}, {4});
  expect_values(cumsum(x, 0), {1, 3, 6, 10});
  expect_values(cumsum(x, 0, true), {10, 9, 7, 4});
  expect_values(cumsum(x, 0, false, false), {0, 1, 3, 6});
  expect_values(cumsum(x, 0, true, false), {9, 7, 4, 0});
  expect_values(cumprod(x, 0, false, false), {1, 1, 2, 6});
  Array y = array<float>({1, NAN, 0, 5}, {4});
  expect_values(cummax(y, 0), {1, NAN, NAN, NAN});
  expect_values(cummin(array<int32_t>({3, 1, 2, 0}, {4}), 0, true), {0, 0, 0, 0});
  expect_values(cummax(array<int32_t>({3, 1, 4, 0}, {4}), 0, false, false),
                {-2147483648.0, 3, 3, 4});
  expect_values(
      logcumsumexp(x, 0),
      {1, std::log(std::exp(1) + std::exp(2)), std::log(std::exp(1) + std::exp(2) + std::exp(3)),
       std::log(std::exp(1) + std::exp(2) + std::exp(3) + std::exp(4))},
      1e-12);
  expect_values(logcumsumexp(array<double>({-INFINITY, -INFINITY, INFINITY, 0}, {4}), 0),
                {-INFINITY, -INFINITY, INFINITY, INFINITY});
  EXPECT_EQ(logcumsumexp(array<int32_t>({1, 2}, {2}), 0).dtype(), float64);
  EXPECT_EQ(cumsum(array<bool>({true, true}, {2}), 0).dtype(), int32);
  EXPECT_EQ(cumsum(array<uint8_t>({200, 100}, {2}), 0).dtype(), uint32);
  expect_values(cumsum(array<uint8_t>({200, 100}, {2}), 0), {200, 300});
  Array m = array<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(cumsum(m, 0), {1, 2, 3, 5, 7, 9});
  expect_values(cumprod(m, 1, true), {6, 6, 3, 120, 30, 6});
  EXPECT_EQ(cumsum(zeros({2, 0}), 1).shape(), (Shape{2, 0}));
}

// Scans and sorts of one input that differ only in their parameters (cumsum and cumprod,
// reverse, inclusive) stay distinct inside compile: the CSE pass once merged them
// (its key left those parameters out), so a compiled cumprod returned the cumsum.
TEST(NativeOps, CompiledScansWithOtherParametersStayDistinct) {
  Array x = array<float>({1, 2, 3, 4}, {4});
  auto f = compile([](const std::vector<Array>& in) -> std::vector<Array> {
    const Array& a = in[0];
    return {cumsum(a, 0), cumprod(a, 0), cumsum(a, 0, true), cumsum(a, 0, false, false)};
  });
  std::vector<Array> got = f({x});
  std::vector<Array> want{cumsum(x, 0), cumprod(x, 0), cumsum(x, 0, true),
                          cumsum(x, 0, false, false)};
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << "output " << i;
}

TEST(NativeOps, GathersAndScattersFollowTheIndexRule) {
  Array a = array<float>({10, 11, 12, 13, 14, 15}, {3, 2});
  // -1 is the last row; 7 clamps to it; -9 clamps to the first.
  expect_values(take(a, array<int32_t>({2, 0, -1, 7, -9}, {5}), 0),
                {14, 15, 10, 11, 14, 15, 14, 15, 10, 11});
  EXPECT_EQ(take(a, array<int64_t>({1, 0, 1, 1}, {2, 2}), 1).shape(), (Shape{3, 2, 2}));
  expect_values(take(a, array<uint8_t>({1}, {1}), 1), {11, 13, 15});
  expect_values(take_along_axis(a, array<int64_t>({1, 0, -1}, {3, 1}), 1), {11, 12, 15});
  expect_values(take_along_axis(a, array<int64_t>({2, 0}, {1, 2}), 0), {14, 11});
  expect_values(scatter_add(zeros({4}), array<int32_t>({1, 3, 1, -1, 9}, {5}),
                            array<float>({1, 2, 3, 4, 5}, {5}), 0),
                {0, 4, 0, 11});
  expect_values(scatter_add(array<bool>({false, false, true}, {3}), array<int32_t>({0, 0}, {2}),
                            array<bool>({true, true}, {2}), 0),
                {1, 0, 1});
  expect_values(
      scatter_add_along_axis(zeros({2, 3}), array<int64_t>({2, 2, 0, 1}, {2, 2}), ones({2, 2}), 1),
      {0, 0, 2, 1, 1, 0});
  EXPECT_EQ(take(a, zeros({0}, int32), 0).shape(), (Shape{0, 2}));
  expect_values(scatter_add(a, zeros({0}, int64), zeros({0, 2}), 0), {10, 11, 12, 13, 14, 15});
  expect_values(take(zeros({0}), zeros({0}, int64), 0), {});
}

TEST(NativeOps, BadArgumentsRaiseErrorsNamingWhatIsValid) {
  Array x = zeros({2, 3});
  expect_error([&] { take(x, zeros({2}), 0); }, {"take: indices must be integers", "float32"});
  expect_error([&] { take(zeros({0}), array({0}, {1}), 0); }, {"extent 0"});
  expect_error([&] { sort(array(1.0f)); }, {"sort", "0-d"});
  expect_error([&] { cumsum(array(1.0f), 0); }, {"cumsum", "0-d"});
  expect_error([&] { cummax(x, 2); }, {"cummax", "axis"});
  expect_error([&] { partition(x, 3); }, {"kth = 3", "valid: -3..2"});
  expect_error(
      [&] {
        scatter_add_along_axis(x, zeros({2, 2}, int32), zeros({2, 3}), 1);
      },
      {"scatter_add_along_axis", "a's shape except at the axis"});
  expect_error([&] { take_along_axis(x, zeros({2, 2}, int32), 5); }, {"take_along_axis", "axis"});
}

namespace {

// Random values of dtype d: small integers with many ties (scans stay exact), and for floats
// NaN, -0 and infinities too when `wild`.
Array random_of(Dtype d, const Shape& shape, std::mt19937& rng, bool wild, double lo = -40,
                double hi = 40) {
  std::uniform_int_distribution<int> pick(static_cast<int>(lo), static_cast<int>(hi));
  std::uniform_int_distribution<int> odd(0, 19);
  std::vector<double> v(shape_size(shape));
  for (double& x : v) {
    x = pick(rng) * (d.is_float() ? 0.25 : 1.0);
    if (d.is_bool()) x = x > 0;
    if (d.is_unsigned()) x = std::abs(x);
    if (wild && d.is_float()) {
      int o = odd(rng);
      if (o == 0) x = NAN;
      if (o == 1) x = -0.0;
      if (o == 2) x = o % 2 ? INFINITY : -INFINITY;
    }
  }
  return array(v, shape, d);
}

}  // namespace

namespace {

struct NativeCase {
  std::string name;
  std::function<Array(const Array& x, const Array& idx)> f;
  bool exact;  // sorts, gathers, max/min: bit-for-bit; sums and logcumsumexp: rounding
};

std::vector<NativeCase> native_cases(int axis, int64_t m) {
  (void)m;
  return {
      {"sort", [=](const Array& x, const Array&) { return sort(x, axis); }, true},
      {"argsort", [=](const Array& x, const Array&) { return argsort(x, axis); }, true},
      {"topk", [=](const Array& x, const Array&) { return topk(x, 3).second; }, true},
      {"cumsum", [=](const Array& x, const Array&) { return cumsum(x, axis); }, false},
      {"cumsum reverse exclusive",
       [=](const Array& x, const Array&) { return cumsum(x, axis, true, false); }, false},
      {"cumprod", [=](const Array& x, const Array&) { return cumprod(x, axis, true); }, false},
      {"cummax", [=](const Array& x, const Array&) { return cummax(x, axis); }, true},
      {"cummin exclusive",
       [=](const Array& x, const Array&) { return cummin(x, axis, true, false); }, true},
      {"logcumsumexp", [=](const Array& x, const Array&) { return logcumsumexp(x, axis); }, false},
      {"take", [=](const Array& x, const Array& i) { return take(x, i, axis); }, true},
      {"take_along_axis",
       [=](const Array& x, const Array& i) {
         Shape s(x.ndim(), 1);
         s[(axis + x.ndim()) % x.ndim()] = i.size();
         return take_along_axis(x, reshape(i, s), axis);
       },
       true},
      {"scatter_add",
       [=](const Array& x, const Array& i) {
         Shape u = x.shape();
         u[(axis + x.ndim()) % x.ndim()] = i.size();
         return scatter_add(x, i, astype(ones(u), x.dtype()), axis);
       },
       false},
  };
}

// Compares `got` with `want` (both evaluated): bitwise-equal values (NaN with NaN, -0 with 0)
// when exact, else within a tolerance for the dtype and the length of the scans.
void expect_close(const Array& got, const Array& want, bool exact, int64_t n) {
  ASSERT_EQ(got.shape(), want.shape());
  ASSERT_EQ(got.dtype(), want.dtype());
  std::vector<double> g = values(got), w = values(want);
  Dtype d = want.dtype();
  double tol = exact || !d.is_float() ? 0
               : d == float64         ? 1e-12 * n
               : d == float32         ? 2e-6 * n
                                      : 1e-2 * n;
  for (size_t k = 0; k < w.size(); ++k) {
    if (std::isnan(w[k])) {
      ASSERT_TRUE(std::isnan(g[k])) << "element " << k << " want NaN, got " << g[k];
    } else if (std::isinf(w[k]) || tol == 0) {
      ASSERT_EQ(g[k], w[k]) << "element " << k;
    } else {
      ASSERT_NEAR(g[k], w[k], tol * (1 + std::abs(w[k]))) << "element " << k;
    }
  }
}

struct Layout {
  Shape shape;
  int axis;
};

// Runs every case on `dev` and on the reference for each dtype and layout; `sample` picks.
void run_against_reference(const char* dev, const std::vector<Layout>& layouts,
                           const test::CaseSample& sample) {
  std::mt19937 rng(33);
  size_t at = 0;
  for (const Layout& l : layouts) {
    int ax = (l.axis + static_cast<int>(l.shape.size())) % static_cast<int>(l.shape.size());
    int64_t n = l.shape[ax];
    std::vector<int64_t> iv(n == 0 ? 0 : std::max<int64_t>(n / 2, 3));  // none into an empty axis
    std::uniform_int_distribution<int64_t> idx(-n - 3, n + 3);
    for (int64_t& v : iv) v = idx(rng);
    Array i = array(iv, {static_cast<int64_t>(iv.size())});
    for (Dtype d : kDtypes) {
      for (const NativeCase& c : native_cases(l.axis, n)) {
        if (!sample(at++)) continue;
        bool prod = c.name.rfind("cumprod", 0) == 0;
        if (c.name == "topk" && l.shape.back() < 3) continue;  // topk: the last axis
        if (prod && d.is_half()) continue;  // products of many values leave a 16-bit range
        // Products stay exact and finite with values in {-1, 0, 1} (a float near 1 drifts).
        Array x =
            prod ? random_of(d, l.shape, rng, false, -1, 1) : random_of(d, l.shape, rng, c.exact);
        SCOPED_TRACE(c.name + " " + d.name() + " shape " + std::to_string(l.shape.size()) +
                     "-d axis " + std::to_string(l.axis) + " n " + std::to_string(n) + " on " +
                     dev);
        auto on = [&](const char* where) {
          StreamScope s(device(where));
          Array r = c.f(x, i);
          eval(r);
          return r;
        };
        expect_close(on(dev), on("reference"), c.exact, n);
      }
    }
  }
}

}  // namespace

// The cpu backend's own kernels: short rows (comparison sort), radix rows, rows split across
// threads (2^15 elements and more), strided axes, many rows in parallel; every dtype.
TEST(NativeOps, CpuMatchesReferenceOnEveryDtypeAndLayout) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "no cpu backend";
  std::vector<Layout> layouts = {{{7}, 0},       {{255}, 0},    {{257}, -1},  {{3, 5, 4}, 1},
                                 {{40, 300}, 1}, {{300, 3}, 0}, {{40000}, 0}, {{2, 0, 3}, 1}};
  size_t total = layouts.size() * kDtypes.size() * native_cases(0, 1).size();
  test::CaseSample all = test::case_sample(total, total);
  run_against_reference("cpu", layouts, all);
}

// The device backends run the Kernel IR lowering (backends/native_kernels.h; gathers, sorts and
// scans their own kernels, tests/test_device_gather.cpp, test_device_sort.cpp and
// test_device_scan.cpp): O(n^2) work, so rows stay short; a sample of the cases under make test,
// all under make test-long.
TEST(NativeOps, DevicesMatchReference) {
  // Rows across a 64-wide work-group, a strided axis; cold kernel builds cost ~0.5 s each on
  // PoCL, so make test runs 6 cases per device.
  std::vector<Layout> layouts = {{{3, 70}, 1}, {{2, 5, 3}, 1}};
  size_t total = layouts.size() * kDtypes.size() * native_cases(0, 1).size();
  for (const char* dev : {"opencl", "vulkan"}) {
    if (!test::backend_available(dev)) continue;
    test::CaseSample sample = test::case_sample(total, 6);
    SCOPED_TRACE(sample.trace);
    run_against_reference(dev, layouts, sample);
  }
}

// Each primitive's lowering is valid Kernel IR of the expected shape (the reference runs it in
// DevicesMatchReference through the device backends; here, the structure).
TEST(NativeOps, KernelLoweringBuildsValidKernels) {
  NativeArgs a;
  a.dtype = float16;
  a.outer = 2, a.n = 5, a.inner = 3, a.m = 4;
  a.buffers.assign(3, nullptr);
  for (Op op : {Op::Sort, Op::Argsort, Op::Scan, Op::Gather, Op::ScatterAdd}) {
    a.op = op;
    for (ScanOp s : {ScanOp::Sum, ScanOp::LogAddExp}) {
      a.scan = s;
      NativeKernels k = native_kernels(a);
      ASSERT_EQ(k.kernels.size(), k.bindings.size());
      for (const Kernel& kern : k.kernels) EXPECT_NO_THROW(kern.validate());
      size_t want =
          op == Op::Gather || op == Op::ScatterAdd || (op == Op::Scan && s == ScanOp::Sum) ? 1 : 2;
      EXPECT_EQ(k.kernels.size(), want) << op_name(op);
    }
  }
}

// Compiled functions keep the primitives as library tasks (no fusion across them) and give the
// eager results; an AOT artifact carries them.
TEST(NativeOps, CompiledAndSavedMatchEager) {
  Array x = array<float>({3, 1, 2, 5, 4, 0, -1, 7}, {2, 4});
  Array i = array<int32_t>({3, 0, -1}, {3});
  auto f = [](const std::vector<Array>& in) {
    Array s = sort(in[0] * 2.0f, 1);
    Array c = cumsum(s, 1) + 1.0f;
    Array t = take(c, in[1], 1);
    return std::vector<Array>{t, argsort(in[0], 0), scatter_add(in[0], in[1], t, 1)};
  };
  std::vector<Array> eager = f({x, i});
  CompiledFunction g = compile(f);
  std::vector<Array> compiled = g({x, i});
  Executable e = g.lower({x, i}).compile();
  std::string path = ::testing::TempDir() + "native_ops.kiln";
  e.save(path);
  std::vector<Array> loaded = Executable::load(path)({x, i});
  for (size_t k = 0; k < eager.size(); ++k) {
    EXPECT_EQ(values(compiled[k]), values(eager[k])) << k;
    EXPECT_EQ(values(loaded[k]), values(eager[k])) << k;
  }
  std::string text = g.lower({x, i}).as_text();
  EXPECT_NE(text.find("sort("), std::string::npos) << text;
  EXPECT_NE(text.find("cumsum("), std::string::npos) << text;
  EXPECT_NE(text.find("gather("), std::string::npos) << text;
}

namespace {

// Values spread over the whole key: normal floats (every exponent near 1 and a tail towards 0,
// so the radix's top-digit buckets range from one item to a tenth of the row) with NaN, -0 and
// infinities sprinkled in; integers uniform over a range as wide as the dtype allows through
// a double (64-bit: +-2^40, so their top digits are constant and skipped).
Array random_wide(Dtype d, const Shape& shape, std::mt19937& rng) {
  std::normal_distribution<double> normal(0, 3);
  std::uniform_int_distribution<int> odd(0, 63);
  double span = d.is_bool()     ? 1
                : d.size() >= 8 ? std::ldexp(1.0, 40)
                                : std::ldexp(1.0, 8 * d.size());
  std::uniform_real_distribution<double> uni(0, span);
  std::vector<double> v(shape_size(shape));
  for (double& x : v) {
    if (d.is_float()) {
      x = normal(rng);
      int o = odd(rng);
      if (o == 0) x = NAN;
      if (o == 1) x = -0.0;
      if (o == 2) x = INFINITY;
      if (o == 3) x = -INFINITY;
    } else {
      x = std::floor(uni(rng));
      if (!d.is_unsigned()) x -= std::floor(span / 2);
    }
  }
  return array(v, shape, d);
}

}  // namespace

// Long rows on cpu with values over the whole key: the parallel radix split (2^15 elements and
// more; its top-digit buckets both under and over the comparison-sort line), digits skipped,
// the scans' fixed blocks and per-thread chunks with lengths that are not a multiple of a
// vector (2^15 + 1, 3 * 2^15 - 1), strided and reversed rows; every dtype (~2 s).
TEST(NativeOps, CpuLongRowsMatchReference) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "no cpu backend";
  std::vector<Layout> layouts = {
      {{1 << 15}, 0}, {{(1 << 15) + 1}, 0}, {{3 * (1 << 15) - 1}, 0}, {{40001, 2}, 0}};
  std::vector<std::pair<std::string, std::function<Array(const Array&, int)>>> cases = {
      {"sort", [](const Array& x, int ax) { return sort(x, ax); }},
      {"argsort", [](const Array& x, int ax) { return argsort(x, ax); }},
      {"cumsum", [](const Array& x, int ax) { return cumsum(x, ax); }},
      {"cumsum reverse exclusive",
       [](const Array& x, int ax) { return cumsum(x, ax, true, false); }},
      {"cummax", [](const Array& x, int ax) { return cummax(x, ax); }},
      {"cummin reverse exclusive",
       [](const Array& x, int ax) { return cummin(x, ax, true, false); }},
  };
  std::mt19937 rng(7);
  for (const Layout& l : layouts) {
    for (Dtype d : kDtypes) {
      Array x = random_wide(d, l.shape, rng);
      for (const auto& c : cases) {
        // Not a structured binding: clang 15 (the sanitizer builds) cannot capture one.
        const std::string& name = c.first;
        const auto& f = c.second;
        SCOPED_TRACE(name + " " + d.name() + " n " + std::to_string(l.shape[0]));
        auto on = [&](const char* where) {
          StreamScope s(device(where));
          Array r = f(x, l.axis);
          eval(r);
          return r;
        };
        bool exact = name.find("cumsum") == std::string::npos;
        expect_close(on("cpu"), on("reference"), exact, l.shape[0]);
      }
    }
  }
}

// A long float32 row's scan split across two threads (one scans while the other sums part of
// its chunk) and across three (block totals first): the split depends only on the row and the
// thread count, so each gives the same bits at every call, and agrees with the reference.
TEST(NativeOps, CpuScanSplitsGiveTheSameBitsAtEveryCall) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "no cpu backend";
  const int64_t n = (1 << 17) + 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 1);
  std::vector<float> v(n);
  for (float& f : v) f = normal(rng);
  Array x = array(v, {n});
  auto scan_on = [&](const char* where) {
    StreamScope s(device(where));
    Array r = cumsum(x, 0);
    eval(r);
    return r;
  };
  Array want = scan_on("reference");
  for (int threads : {2, 3}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    tbb::task_arena arena(threads);
    std::vector<float> first;
    for (int call = 0; call < 8; ++call) {
      Array got = arena.execute([&] { return scan_on("cpu"); });
      std::vector<float> bits = got.to_vector<float>();
      if (call == 0) {
        expect_close(got, want, false, n);
        first = bits;
      } else {
        ASSERT_EQ(std::memcmp(bits.data(), first.data(), n * sizeof(float)), 0) << "call " << call;
      }
    }
  }
}
