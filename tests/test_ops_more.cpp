// The ops a training loop needs beyond the primitives (graph/ops_math.cpp, graph/ops_index.cpp):
// values against NumPy's on small cases, every op on the cpu backend against the reference
// interpreter on random inputs, and their errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::values;

namespace {

void expect_values(const Array& a, const std::vector<double>& want, double tol = 1e-6) {
  std::vector<double> got = values(a);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    else if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

TEST(OpsMore, ElementwiseAndStatisticsMatchNumpy) {
  Array tiny = array({1e-10, -1e-12, 0.5, -0.5, 20.0}, {5});
  expect_values(log1p(tiny),
                {1e-10 - 5e-21, -1e-12, std::log1p(0.5), std::log1p(-0.5), std::log1p(20.0)},
                1e-14);
  expect_values(
      expm1(tiny),
      {std::expm1(1e-10), std::expm1(-1e-12), std::expm1(0.5), std::expm1(-0.5), std::expm1(20.0)},
      1e-14);
  expect_values(log1p(array(std::vector<double>{-1.0, INFINITY}, {2})), {-INFINITY, INFINITY});
  // Near 0 the answer is about x itself: relative error, which log(1 + x) and exp(x) - 1 would
  // get wrong by ~1e-6 (1 + 1e-10 rounds), is what the corrections are for.
  for (double v : {1e-10, -1e-12, 3e-15}) {
    Array t = array(v);
    EXPECT_NEAR(log1p(t).item<double>(), std::log1p(v), 1e-15 * std::abs(v)) << v;
    EXPECT_NEAR(expm1(t).item<double>(), std::expm1(v), 1e-15 * std::abs(v)) << v;
  }

  Array x = array({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, 0.49999997f, NAN}, {8});
  expect_values(round(x), {-2, -2, -0, 0, 2, 2, 0, NAN});
  expect_values(sign(x), {-1, -1, -1, 1, 1, 1, 1, NAN});
  expect_values(sign(array({-3, 0, 4}, {3})), {-1, 0, 1});
  expect_values(clip(array({-3, 0, 4}, {3}), -1, 2), {-1, 0, 2});
  Array m = array({1.0, 2.0, 4.0, 3.0, 5.0, 9.0}, {2, 3});
  expect_values(var(m), {40.0 / 6});
  expect_values(var(m, 1, false, 1), {42.0 / 9 / 2, 168.0 / 9 / 2});
  expect_values(kiln::std(m, 0, true), {1, 1.5, 2.5});
  expect_values(argmin(array({3, 1, 2, 1}, {4}), 0), {1});
  expect_values(argmin(m, 1), {0, 0});
  expect_values(argmin(array({5u, 0u, 7u}, {3}), 0), {1});
  expect_values(cumsum(array({1, 2, 3, 4, 5}, {5}), 0), {1, 3, 6, 10, 15});
  expect_values(cumprod(m, 1), {1, 2, 8, 3, 15, 135});
  expect_values(cumsum(m, 0), {1, 2, 4, 4, 7, 13});
}

TEST(OpsMore, IndexingSortingAndShapesMatchNumpy) {
  Array a = array({10.0, 11.0, 12.0, 13.0, 14.0, 15.0}, {3, 2});
  expect_values(one_hot(array({2, 0, 5, -1}, {4}), 3), {0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0});
  Array t = take(a, array({2, 0, -1, 7}, {2, 2}), 0);  // -1 is the last row; 7 clamps to it
  ASSERT_EQ(t.shape(), (Shape{2, 2, 2}));
  expect_values(t, {14, 15, 10, 11, 14, 15, 14, 15});
  expect_values(take(a, array({1, 1, 0}, {3}), 1), {11, 11, 10, 13, 13, 12, 15, 15, 14});
  expect_values(take_along_axis(a, array({1, 0, 0}, {3, 1}), 1), {11, 12, 14});
  expect_values(scatter_add(zeros({4}), array({1, 3, 1}, {3}), array({1.0f, 2.0f, 3.0f}, {3}), 0),
                {0, 4, 0, 2});
  Array v = array(std::vector<double>{3.0, NAN, -1.0, 3.0, 2.0}, {5});
  expect_values(sort(v), {-1, 2, 3, 3, NAN});
  expect_values(argsort(v), {2, 4, 0, 3, 1});
  auto [top, where_top] = topk(array({1.0, 9.0, 4.0, 9.0}, {4}), 3);
  expect_values(top, {9, 9, 4});
  expect_values(where_top, {1, 3, 2});
  expect_values(sort(array({3.0, 0.0, 1.0, 5.0, 2.0, 4.0}, {3, 2}), 0), {1, 0, 2, 4, 3, 5});
  expect_values(stack({array({1, 2}, {2}), array({3, 4}, {2})}, 1), {1, 3, 2, 4});
  std::vector<Array> parts = split(arange(6, float32), 3);
  ASSERT_EQ(parts.size(), 3u);
  expect_values(parts[2], {4, 5});
  expect_values(split(arange(5, float32), std::vector<int64_t>{1, 3})[1], {1, 2});
  expect_values(split(arange(5, float32), std::vector<int64_t>{-1})[0], {0, 1, 2, 3});
  expect_values(pad(array({1, 2}, {1, 2}), {{1, 0}, {0, 1}}, 7), {7, 7, 7, 1, 2, 7});
  Array sq = reshape(arange(9, float32), {3, 3});
  expect_values(tril(sq), {0, 0, 0, 3, 4, 0, 6, 7, 8});
  expect_values(triu(sq, 1), {0, 1, 2, 0, 0, 5, 0, 0, 0});
}

// log1p and expm1 choose between branches with where(); the dropped branch divides by zero at
// the points where it is dropped, and its gradient must not leak NaN into the taken one.
TEST(OpsMore, Log1pAndExpm1GradientsAreFiniteWhereABranchIsDropped) {
  for (Dtype dt : {float32, float64}) {
    std::vector<double> xs = {0.0, 1e-10, 6e-8, -6e-8, 1e-3, 0.5};
    Array x = astype(array(xs, {static_cast<int64_t>(xs.size())}), dt);
    Fn f = [](const std::vector<Array>& in) { return std::vector<Array>{sum(log1p(in[0]))}; };
    std::vector<double> g = astype(grad(f)({x})[0], float64).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(g[i], 1 / (1 + xs[i]), 1e-6) << "log1p' at " << xs[i] << " " << dt;
    std::vector<double> ys = {0.0, 1e-10, -1e-10, 1e-3, -200.0, 2.0};
    Array y = astype(array(ys, {static_cast<int64_t>(ys.size())}), dt);
    Fn e = [](const std::vector<Array>& in) { return std::vector<Array>{sum(expm1(in[0]))}; };
    std::vector<double> h = astype(grad(e)({y})[0], float64).to_vector<double>();
    for (size_t i = 0; i < ys.size(); ++i)
      EXPECT_NEAR(h[i], std::exp(ys[i]), 1e-6 * std::max(1.0, std::exp(ys[i])))
          << "expm1' at " << ys[i] << " " << dt;
  }
}

// Every op on every backend built here (cpu; opencl and vulkan where usable), eagerly and
// compiled (fused kernels), against the reference interpreter, on random inputs with ties and
// negative and out-of-range indices.
TEST(OpsMore, EveryBackendMatchesReferenceOnRandomInputs) {
  using Op1 = std::function<std::vector<Array>(const Array& x, const Array& i)>;
  std::vector<std::pair<std::string, Op1>> ops = {
      {"log1p", [](const Array& x, const Array&) { return std::vector<Array>{log1p(abs(x))}; }},
      {"expm1", [](const Array& x, const Array&) { return std::vector<Array>{expm1(x)}; }},
      {"clip", [](const Array& x, const Array&) { return std::vector<Array>{clip(x, -0.5, 0.7)}; }},
      {"sign", [](const Array& x, const Array&) { return std::vector<Array>{sign(x)}; }},
      {"round", [](const Array& x, const Array&) { return std::vector<Array>{round(x * 4.0)}; }},
      {"var/std",
       [](const Array& x, const Array&) {
         return std::vector<Array>{var(x, 1), kiln::std(x)};
       }},
      {"argmin", [](const Array& x, const Array&) { return std::vector<Array>{argmin(x, 1)}; }},
      {"cumsum/cumprod",
       [](const Array& x, const Array&) {
         return std::vector<Array>{cumsum(x, 1), cumprod(x, 0)};
       }},
      {"one_hot", [](const Array&, const Array& i) { return std::vector<Array>{one_hot(i, 7)}; }},
      {"take", [](const Array& x, const Array& i) { return std::vector<Array>{take(x, i, 1)}; }},
      {"take_along_axis",
       [](const Array& x, const Array& i) {
         return std::vector<Array>{take_along_axis(x, reshape(i, {5, 2}), 1)};
       }},
      {"scatter_add",
       [](const Array& x, const Array& i) {
         return std::vector<Array>{scatter_add(x, i, ones({5, 10}), 1)};
       }},
      {"sort/argsort",
       [](const Array& x, const Array&) {
         return std::vector<Array>{sort(x, 1), argsort(x, 0)};
       }},
      {"topk",
       [](const Array& x, const Array&) {
         auto [v, i] = topk(x, 3);
         return std::vector<Array>{v, i};
       }},
      {"stack/split/pad",
       [](const Array& x, const Array&) {
         std::vector<Array> p = split(x, 2, 1);
         return std::vector<Array>{stack(p, 2), pad(x, {{1, 2}, {0, 3}}, -1)};
       }},
      {"tril/triu",
       [](const Array& x, const Array&) {
         return std::vector<Array>{tril(x, 1), triu(x)};
       }},
  };
  // Each op builds new kernels on every device (cold OpenCL builds take ~1 s on PoCL): make
  // test runs a random half of the ops, make test-long all of them.
  test::CaseSample runs = test::case_sample(ops.size(), ops.size() / 2);
  SCOPED_TRACE(runs.trace);
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> small(-4, 4), idx(-12, 12);
  std::vector<float> xv(50);
  std::vector<int32_t> iv(10);
  for (int round_ = 0; round_ < 3; ++round_) {
    for (float& v : xv) v = small(rng) * 0.25f;  // many ties
    for (int32_t& v : iv) v = idx(rng);          // negative and out of range too
    Array x = array(xv, {5, 10});
    Array i = array(iv, {10});
    for (size_t oi = 0; oi < ops.size(); ++oi) {
      if (!runs(oi)) continue;
      const auto& [name, f] = ops[oi];
      std::vector<Array> ref;
      {
        StreamScope scope(device("reference"));
        ref = f(x, i);
      }
      for (const char* dev : {"cpu", "opencl", "vulkan"}) {
        if (!test::backend_available(dev)) continue;
        auto fused = compile([f = f](const std::vector<Array>& in) { return f(in[0], in[1]); });
        StreamScope scope(device(dev));
        for (bool compiled : {false, true}) {
          SCOPED_TRACE(name + " on " + dev + (compiled ? " compiled" : " eager"));
          std::vector<Array> got = compiled ? fused({x, i}) : f(x, i);
          ASSERT_EQ(got.size(), ref.size());
          for (size_t k = 0; k < got.size(); ++k) {
            ASSERT_EQ(got[k].shape(), ref[k].shape());
            ASSERT_EQ(got[k].dtype(), ref[k].dtype());
            EXPECT_EQ(got[k].device(), device(dev));
            expect_values(got[k], values(ref[k]), 1e-5);
          }
        }
      }
    }
  }
}

// x - x and x * 0 are 0 only for finite x: a fused kernel must keep NaN for inf and NaN inputs
// on every backend. lavapipe's shader compiler folded both to 0 (in any dtype computed as
// float) until the GLSL declares its float values `precise`; a random bfloat16 program found it.
TEST(OpsMore, InfAndNanSurviveFusedAlgebraOnEveryBackend) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xv = {inf, -inf, nan, 2.0f, -3.0f};
  auto f = compile([](const std::vector<Array>& in) {
    const Array& x = in[0];
    return std::vector<Array>{(x - x) * in[1] + 1.0f, x * 0.0f};
  });
  for (const char* dev : {"reference", "cpu", "opencl", "vulkan"}) {
    if (!test::backend_available(dev)) continue;
    for (Dtype d : {float32, float16, bfloat16}) {
      SCOPED_TRACE(std::string(dev) + " " + d.name());
      StreamScope scope(device(dev));
      std::vector<Array> out = f({astype(array(xv, {5}), d), astype(full({5}, 2.0), d)});
      std::vector<double> a = values(out[0]), b = values(out[1]);
      for (size_t i = 0; i < xv.size(); ++i) {
        bool finite = std::isfinite(xv[i]);
        EXPECT_EQ(std::isnan(a[i]), !finite) << "(x - x) * 2 + 1 at x = " << xv[i] << ": " << a[i];
        EXPECT_EQ(std::isnan(b[i]), !finite) << "x * 0 at x = " << xv[i] << ": " << b[i];
        if (finite) {
          EXPECT_EQ(a[i], 1.0);
          EXPECT_EQ(b[i], 0.0);
        }
      }
    }
  }
}

TEST(OpsMore, MisuseRaisesErrorsNamingWhatWouldBeValid) {
  Array x = zeros({2, 3});
  expect_error([&] { take(x, zeros({2}), 0); }, {"take: indices must be integers", "float32"});
  expect_error([&] { take(zeros({0}), array({0}, {1}), 0); }, {"extent 0"});
  expect_error([&] { topk(x, 4); }, {"k = 4", "valid: 1..3"});
  expect_error([&] { split(x, 2, 1); }, {"2 sections do not divide axis 1 of extent 3"});
  expect_error([&] { pad(x, {{1, 1}}); }, {"1 (before, after) pairs", "2 axes"});
  expect_error([&] { pad(x, {{1, 1}, {-1, 0}}); }, {"widths must be >= 0"});
  expect_error([&] { tril(zeros({3})); }, {"tril: needs at least 2 axes"});
  expect_error(
      [&] {
        scatter_add(x, array({0}, {1}), zeros({2, 2}), 1);
      },
      {"updates of shape (2, 2)", "expected shape (2, 1)"});
  expect_error([&] { take_along_axis(x, array({0}, {1}), 1); }, {"need the rank of a"});
  expect_error([&] { stack({x, zeros({3, 2})}); }, {"stack: shapes (2, 3) and (3, 2) differ"});
  expect_error([&] { clip(x, 2, 1); }, {"low (2) is above high (1)"});
  expect_error([&] { sign(array({true}, {1})); }, {"sign: not defined for bool"});
  expect_error([&] { one_hot(array({1}, {1}), 0); }, {"depth must be positive"});
  expect_error([&] { var(x, std::vector<int>{}, false, -1); }, {"ddof must be >= 0"});
  EXPECT_EQ(values(x), std::vector<double>(6, 0));
}

}  // namespace
