// vjp, jvp, grad, value_and_grad and vmap: every primitive's derivative against central finite
// differences in float64, vjp against jvp by the transpose identity, vmap against a loop of the
// unmapped function, second derivatives against closed forms, and the transforms composed with
// each other and with compile.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::values;

namespace {

Array random_array(const Shape& shape, double lo, double hi, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(shape_size(shape));
  for (double& x : v) x = u(rng);
  return array(v, shape, float64);
}

double dot(const Array& a, const Array& b) {
  std::vector<double> x = values(a), y = values(b);
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

// One differentiable primitive (or a composite the user writes) at float64 inputs of `shapes`
// drawn from [lo, hi), away from where its derivative jumps.
struct Case {
  std::string name;
  std::function<Array(const std::vector<Array>&)> f;
  std::vector<Shape> shapes;
  double lo = -2, hi = 2;
  double tol = 1e-6;  // finite differences against the transform, relative to the values' size
  double eps = 1e-6;  // the finite difference step
};

std::vector<Case> cases() {
  using V = const std::vector<Array>&;
  Shape s{3, 4};
  return {
      {"negative", [](V x) { return -x[0]; }, {s}},
      {"abs", [](V x) { return abs(x[0]); }, {s}},
      {"exp", [](V x) { return exp(x[0]); }, {s}},
      {"log", [](V x) { return log(x[0]); }, {s}, 0.5, 3},
      {"sqrt", [](V x) { return sqrt(x[0]); }, {s}, 0.5, 3},
      {"rsqrt", [](V x) { return rsqrt(x[0]); }, {s}, 0.5, 3},
      {"sin", [](V x) { return sin(x[0]); }, {s}},
      {"cos", [](V x) { return cos(x[0]); }, {s}},
      {"tanh", [](V x) { return tanh(x[0]); }, {s}},
      {"erf", [](V x) { return erf(x[0]); }, {s}},
      {"sigmoid", [](V x) { return sigmoid(x[0]); }, {s}},
      {"floor", [](V x) { return floor(x[0]) * x[0]; }, {s}},
      {"ceil", [](V x) { return ceil(x[0]) * x[0]; }, {s}},
      {"add (broadcast)", [](V x) { return x[0] + x[1]; }, {s, {4}}},
      {"subtract (broadcast)", [](V x) { return x[0] - x[1]; }, {{3, 1}, s}},
      {"multiply (broadcast)", [](V x) { return x[0] * x[1]; }, {s, {1, 4}}},
      {"divide", [](V x) { return x[0] / x[1]; }, {s, s}, 0.5, 2},
      {"power", [](V x) { return power(x[0], x[1]); }, {s, s}, 0.5, 2},
      {"power by scalar", [](V x) { return power(x[0], array(3.0)); }, {s}},
      {"maximum", [](V x) { return maximum(x[0], x[1]); }, {s, {4}}},
      {"minimum", [](V x) { return minimum(x[0], x[1]); }, {s, s}},
      // x - y * floor(x / y): 1 and -floor(x / y); floor_divide is piecewise constant.
      {"remainder/floor_divide",
       [](V x) { return remainder(x[0], x[1]) + floor_divide(x[0], x[1]) * x[0]; },
       {s, {4}},
       0.5,
       7},
      {"where", [](V x) { return where(x[0] > 0, x[0] * x[1], x[1]); }, {s, {4}}},
      // float32 in the middle: a step float32 resolves, and float32's precision.
      {"astype",
       [](V x) { return astype(astype(x[0], float32), float64) * x[0]; },
       {s},
       -2,
       2,
       1e-3,
       1e-2},
      {"sum", [](V x) { return sum(x[0] * x[0], 1); }, {s}},
      {"sum keepdims", [](V x) { return sum(x[0], 0, true) * x[0]; }, {s}},
      {"max", [](V x) { return max(x[0], 1); }, {s}},
      {"min", [](V x) { return min(x[0], 0, true); }, {s}},
      {"prod", [](V x) { return prod(x[0], 1); }, {s}},
      {"mean", [](V x) { return mean(x[0] * x[0]); }, {s}},
      {"logsumexp", [](V x) { return logsumexp(x[0], 1); }, {s}},
      {"softmax", [](V x) { return softmax(x[0], -1); }, {s}},
      {"reshape",
       [](V x) {
         return reshape(x[0], {2, 6}) * 2.0;
       },
       {s}},
      {"flatten", [](V x) { return flatten(x[0]) * 2.0; }, {{2, 3, 2}}},
      {"expand_dims/squeeze", [](V x) { return squeeze(expand_dims(x[0], 1) * x[0]); }, {s}},
      {"transpose",
       [](V x) {
         return transpose(x[0], {2, 0, 1}) * 3.0;
       },
       {{2, 3, 4}}},
      {"broadcast_to",
       [](V x) {
         return broadcast_to(x[0], {2, 3, 4}) * 3.0;
       },
       {{3, 1}}},
      {"slice",
       [](V x) {
         return slice(x[0], {1, 0}, {3, 4}, {1, 2}) * 2.0;
       },
       {s}},
      {"slice negative step",
       [](V x) {
         return slice(x[0], {2, 3}, {-4, 0}, {-2, -1});
       },
       {s}},
      {"concatenate",
       [](V x) {
         return concatenate({x[0], x[1] * 2.0, x[0]}, 1);
       },
       {s, {3, 2}}},
      {"matmul", [](V x) { return matmul(x[0], x[1]); }, {s, {4, 5}}},
      {"matmul batched", [](V x) { return matmul(x[0], x[1]); }, {{2, 3, 4}, {4, 2}}},
      {"matmul vector", [](V x) { return matmul(x[0], x[1]); }, {{4}, {4, 3}}},
      {"matmul vector right", [](V x) { return matmul(x[0], x[1]); }, {s, {4}}},
      {"log1p", [](V x) { return log1p(x[0]); }, {s}, -0.5, 2},
      {"expm1", [](V x) { return expm1(x[0]); }, {s}},
      {"clip", [](V x) { return clip(x[0], -1.0, 1.0) * x[0]; }, {s}},
      {"sign, round", [](V x) { return sign(x[0]) * x[0] + round(x[0]); }, {s}},
      {"var", [](V x) { return var(x[0], 1, false, 1); }, {s}},
      {"std", [](V x) { return kiln::std(x[0], 0, true) * x[0]; }, {s}},
      {"cumsum", [](V x) { return cumsum(x[0], 1); }, {s}},
      {"cumprod", [](V x) { return cumprod(x[0], 0); }, {s}},
      {"take",
       [](V x) {
         return take(x[0], array({3, 0, 3, -2}, {2, 2}), 1);
       },
       {s}},
      {"take 0-d", [](V x) { return take(x[0], array<int64_t>({-2}, {}), 1); }, {s}},
      {"take 3-d",
       [](V x) {
         return take(x[0], array({3, 0, 3, -2, 1, 1}, {1, 3, 2}), 1);
       },
       {s}},
      {"take_along_axis",
       [](V x) {
         return take_along_axis(x[0], array({1, 0, 3}, {3, 1}), 1);
       },
       {s}},
      {"scatter_add",
       [](V x) {
         return scatter_add(x[0], array({2, 0, 2}, {3}), x[1], 1);
       },
       {s, {3, 3}}},
      {"sort", [](V x) { return sort(x[0], 1); }, {s}},
      {"sort descending (topk) along axis 0",
       [](V x) { return topk(transpose(x[0]), 3).first; },
       {s}},
      {"cumsum reverse exclusive", [](V x) { return cumsum(x[0], 0, true, false); }, {s}},
      {"cumprod reverse exclusive", [](V x) { return cumprod(x[0], 1, true, false); }, {s}},
      {"cumprod through zeros",
       [](V x) {
         Array mask = array({1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0}, {3, 4});
         return cumprod(x[0] * mask, 1) + cumprod(x[0] * mask, 1, true);
       },
       {s}},
      {"cummax, cummin", [](V x) { return cummax(x[0], 1) + cummin(x[0], 0, true); }, {s}},
      {"logcumsumexp",
       [](V x) { return logcumsumexp(x[0], 1) + exp(logcumsumexp(x[0], 0, true, false)); },
       {s}},
      {"take_along_axis broadcast",
       [](V x) {
         return take_along_axis(x[0], array({2, -1, 0, 9}, {1, 4}), 0);
       },
       {s}},
      {"scatter_add_along_axis",
       [](V x) {
         return scatter_add_along_axis(x[0], array({1, 1, 0, 3, 3, 3}, {3, 2}), x[1], 1);
       },
       {s, {3, 2}}},
      {"topk", [](V x) { return topk(x[0], 2).first; }, {s}},
      {"stack/split", [](V x) { return stack(split(x[0], 2, 1), 0); }, {s}},
      {"pad",
       [](V x) {
         return pad(x[0], {{1, 0}, {2, 1}}, 3.0) * x[1];
       },
       {s, {4, 7}}},
      {"tril/triu", [](V x) { return tril(x[0], 1) - triu(x[0] * x[0]); }, {s}},
      {"gelu", [](V x) { return x[0] * 0.5 * (1.0 + erf(x[0] / std::sqrt(2.0))); }, {s}},
  };
}

Fn as_fn(const Case& c) {
  return [f = c.f](const std::vector<Array>& x) { return std::vector<Array>{f(x)}; };
}

std::vector<Array> inputs(const Case& c, std::mt19937& rng) {
  std::vector<Array> xs;
  for (const Shape& s : c.shapes) xs.push_back(random_array(s, c.lo, c.hi, rng));
  return xs;
}

TEST(Transforms, JvpMatchesFiniteDifferencesForEveryPrimitive) {
  std::mt19937 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const double eps = c.eps;
    std::vector<Array> xs = inputs(c, rng), ts = inputs(c, rng);
    auto [outs, tangent] = jvp(as_fn(c), xs, ts);
    std::vector<Array> plus, minus;
    for (size_t i = 0; i < xs.size(); ++i) {
      plus.push_back(xs[i] + ts[i] * eps);
      minus.push_back(xs[i] - ts[i] * eps);
    }
    std::vector<double> fd = values((c.f(plus) - c.f(minus)) / (2 * eps));
    std::vector<double> got = values(tangent[0]);
    ASSERT_EQ(got.size(), fd.size());
    double scale = 1;
    for (double v : fd) scale = std::max(scale, std::abs(v));
    for (size_t k = 0; k < fd.size(); ++k)
      ASSERT_NEAR(got[k], fd[k], c.tol * scale) << "element " << k;
    EXPECT_EQ(values(outs[0]), values(c.f(xs)));
  }
}

// <ct, J t> = <J^T ct, t> for random t and ct: vjp is the transpose of jvp.
TEST(Transforms, VjpIsTheTransposeOfJvp) {
  std::mt19937 rng(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Array> xs = inputs(c, rng), ts = inputs(c, rng);
    auto [outs, jt] = jvp(as_fn(c), xs, ts);
    Array ct = random_array(outs[0].shape(), -1, 1, rng);
    auto [outs2, vc] = vjp(as_fn(c), xs, {ct});
    ASSERT_EQ(vc.size(), xs.size());
    double lhs = dot(ct, jt[0]), rhs = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      ASSERT_EQ(vc[i].shape(), xs[i].shape());
      rhs += dot(vc[i], ts[i]);
    }
    double tol = c.tol > 1e-6 ? 1e-6 : 1e-9;  // float32 inside the astype case
    EXPECT_NEAR(lhs, rhs, tol * (1 + std::abs(lhs)));
  }
}

// vmap(f) over a batch of 3 equals stacking f on each element, for every primitive; the
// arguments are mapped along different axes.
TEST(Transforms, VmapMatchesALoopForEveryPrimitive) {
  std::mt19937 rng(5);
  const int64_t batch = 3;
  for (const Case& c : cases()) {
    for (int variant = 0; variant < 2; ++variant) {
      SCOPED_TRACE(c.name + (variant ? " (last argument unmapped)" : " (axis 0)"));
      std::vector<Array> whole;
      std::vector<int> axes;
      for (size_t i = 0; i < c.shapes.size(); ++i) {
        bool unmapped = variant == 1 && i + 1 == c.shapes.size() && c.shapes.size() > 1;
        Shape s = c.shapes[i];
        if (!unmapped)
          s.insert(s.begin() + (variant == 1 ? static_cast<long>(s.size()) : 0), batch);
        whole.push_back(random_array(s, c.lo, c.hi, rng));
        axes.push_back(unmapped ? -1 : variant == 1 ? static_cast<int>(s.size()) - 1 : 0);
      }
      Array got = vmap(as_fn(c), axes)(whole)[0];
      std::vector<Array> rows;
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<Array> one;
        for (size_t i = 0; i < whole.size(); ++i) {
          if (axes[i] == -1) {
            one.push_back(whole[i]);
            continue;
          }
          std::vector<int64_t> start(whole[i].ndim(), 0),
              stop(whole[i].shape().begin(), whole[i].shape().end());
          start[axes[i]] = b, stop[axes[i]] = b + 1;
          one.push_back(squeeze(slice(whole[i], start, stop), {axes[i]}));
        }
        rows.push_back(expand_dims(c.f(one), 0));
      }
      Array want = concatenate(rows, 0);
      ASSERT_EQ(got.shape(), want.shape());
      std::vector<double> g = values(got), w = values(want);
      for (size_t k = 0; k < g.size(); ++k) ASSERT_NEAR(g[k], w[k], 1e-12 * (1 + std::abs(w[k])));
    }
  }
}

double scalar(const Array& a) { return astype(a, float64).item<double>(); }

Fn unary_fn(std::function<Array(const Array&)> f) {
  return [f](const std::vector<Array>& x) { return std::vector<Array>{f(x[0])}; };
}

TEST(Transforms, SecondDerivativesMatchClosedForms) {
  for (double x0 : {-1.3, 0.4, 2.1}) {
    Array x = array(x0);
    Fn cube = unary_fn([](const Array& v) { return v * v * v; });
    EXPECT_NEAR(scalar(grad(grad(cube))({x})[0]), 6 * x0, 1e-12);
    Fn s = unary_fn([](const Array& v) { return sin(v); });
    EXPECT_NEAR(scalar(grad(grad(s))({x})[0]), -std::sin(x0), 1e-12);
    EXPECT_NEAR(scalar(grad(grad(grad(s)))({x})[0]), -std::cos(x0), 1e-12);
    Fn t = unary_fn([](const Array& v) { return tanh(v); });
    double th = std::tanh(x0);
    EXPECT_NEAR(scalar(grad(grad(t))({x})[0]), -2 * th * (1 - th * th), 1e-12);
    // Forward over reverse gives the same second derivative.
    auto [g, h] = jvp(grad(cube), {x}, {array(1.0)});
    EXPECT_NEAR(scalar(h[0]), 6 * x0, 1e-12);
    EXPECT_NEAR(scalar(g[0]), 3 * x0 * x0, 1e-12);
  }
}

Fn loss_fn() {  // sum((x @ w)^2) / 2 + sum(sin(w))
  return [](const std::vector<Array>& a) {
    Array y = matmul(a[0], a[1]);
    return std::vector<Array>{sum(y * y) * 0.5 + sum(sin(a[1]))};
  };
}

void expect_close(const Array& a, const Array& b, double tol = 1e-5) {
  ASSERT_EQ(a.shape(), b.shape());
  std::vector<double> x = values(a), y = values(b);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol * (1 + std::abs(y[i])));
}

// Under a trace, the cotangent of a transposed matmul operand is made in the layout of the
// array transposed (x @ w.T: w's gradient g^T x, not (x^T g)^T): compiled and eager gradients
// agree with the closed form, with batch axes broadcast and with either operand transposed.
TEST(Transforms, GradientsThroughTransposedMatmulOperandsMatchUnderCompile) {
  std::mt19937 rng(5);
  Array x = astype(random_array({2, 3, 4}, -1, 1, rng), float32);
  Array w = astype(random_array({5, 4}, -1, 1, rng), float32);
  Array c = astype(random_array({2, 3, 5}, -1, 1, rng), float32);
  Fn f = [&](const std::vector<Array>& in) {
    return std::vector<Array>{sum(matmul(in[0], swapaxes(in[1], -1, -2)) * c)};
  };
  // d/dx = c w, d/dw = sum over the batch of c^T x.
  Array want_x = matmul(c, w), want_w = sum(matmul(swapaxes(c, -1, -2), x), 0);
  Fn g = grad(f, {0, 1});
  CompiledFunction cg = compile(g);
  for (const std::vector<Array>& got : {g({x, w}), cg({x, w})}) {
    expect_close(got[0], want_x);
    expect_close(got[1], want_w);
  }
  Array y = astype(random_array({4, 3}, -1, 1, rng), float32);  // x^T @ v, x transposed
  Array v = astype(random_array({4, 6}, -1, 1, rng), float32);
  Array d = astype(random_array({3, 6}, -1, 1, rng), float32);
  Fn h = [&](const std::vector<Array>& in) {
    return std::vector<Array>{sum(matmul(swapaxes(in[0], -1, -2), in[1]) * d)};
  };
  Array want_y = matmul(v, swapaxes(d, -1, -2)), want_v = matmul(y, d);
  Fn gh = grad(h, {0, 1});
  CompiledFunction cgh = compile(gh);
  for (const std::vector<Array>& got : {gh({y, v}), cgh({y, v})}) {
    expect_close(got[0], want_y);
    expect_close(got[1], want_v);
  }
}

TEST(Transforms, ComposeWithCompileInEveryOrder) {
  std::mt19937 rng(3);
  Array x = astype(random_array({8, 5}, -1, 1, rng), float32);
  Array w = astype(random_array({5, 3}, -1, 1, rng), float32);
  // Closed form: d/dw = x^T (x w) + cos(w).
  Array want = matmul(transpose(x), matmul(x, w)) + cos(w);
  Fn g = grad(loss_fn(), {1});
  expect_close(g({x, w})[0], want);
  CompiledFunction cg = compile(g);
  expect_close(cg({x, w})[0], want);
  expect_close(grad(compile(loss_fn()), {1})({x, w})[0], want);
  CompiledFunction ccg = compile(grad(compile(loss_fn()), {1}));
  expect_close(ccg({x, w})[0], want);
  // A compiled function calling grad inside, traced once for ten calls.
  CompiledFunction step = compile([](const std::vector<Array>& a) {
    Array gw = grad(loss_fn(), {1})(a)[0];
    return std::vector<Array>{a[1] - gw * 0.1};
  });
  for (int i = 0; i < 10; ++i) expect_close(step({x, w})[0], w - want * 0.1);
  EXPECT_EQ(step.cache_size(), 1u);
  // vmap of grad (per-example gradients) and compile of it.
  Fn per_example = vmap(grad(loss_fn(), {1}), {0, -1});
  Array xs = reshape(x, {8, 1, 5});
  Array pe = per_example({xs, w})[0];
  ASSERT_EQ(pe.shape(), (Shape{8, 5, 3}));
  // The per-example gradients (without the sin term, which each carries) sum to the batch's.
  Array total = sum(pe, 0) - cos(w) * 7.0;
  expect_close(total, want, 1e-4);
  expect_close(compile(per_example)({xs, w})[0], pe);
}

TEST(Transforms, ValueAndGradReturnsTheLossAndEachArgumentsGradient) {
  Array x = array({1.0, 2.0, 3.0}, {3});
  Array y = array({0.5, -1.0, 2.0}, {3});
  auto vg = value_and_grad(
      [](const std::vector<Array>& a) {
        return std::vector<Array>{sum(a[0] * a[1]), a[0] + a[1]};
      },
      {0, 1});
  auto [vals, grads] = vg({x, y});
  ASSERT_EQ(vals.size(), 2u);
  EXPECT_DOUBLE_EQ(scalar(vals[0]), 0.5 - 2.0 + 6.0);
  EXPECT_EQ(values(grads[0]), values(y));
  EXPECT_EQ(values(grads[1]), values(x));
  // The same array in two places gets a gradient per place.
  auto both = grad([](const std::vector<Array>& a) { return std::vector<Array>{sum(a[0] * a[1])}; },
                   {0, 1})({x, x});
  EXPECT_EQ(values(both[0]), values(x));
  EXPECT_EQ(values(both[1]), values(x));
  // Integer arguments get zeros.
  Array n = array({1, 2, 3}, {3});
  auto gi = grad([](const std::vector<Array>& a) { return std::vector<Array>{sum(a[0] * a[1])}; },
                 {0, 1})({x, n});
  EXPECT_EQ(values(gi[1]), std::vector<double>({0, 0, 0}));
  EXPECT_EQ(values(gi[0]), std::vector<double>({1, 2, 3}));
}

TEST(Transforms, BadArgumentsRaiseErrorsNamingWhatWouldBeValid) {
  Array x = array({1.0f, 2.0f}, {2});
  Fn id = [](const std::vector<Array>& a) { return a; };
  expect_error([&] { grad(id)({x}); }, {"scalar loss", "shape (2,)"});
  expect_error([&] { grad(id, {3})({x}); }, {"argnums[0] = 3", "valid: 0..0"});
  expect_error([&] { grad(id, {})({x}); }, {"argnums is empty"});
  expect_error([&] { vjp(id, {x}, {}); }, {"1 outputs but 0 cotangents"});
  expect_error([&] { vjp(id, {x}, {array({1.0f}, {1})}); }, {"cotangent 0 has shape (1,)"});
  expect_error([&] { jvp(id, {x}, {array({1.0f}, {1})}); }, {"tangent 0 has shape (1,)"});
  Array y = zeros({3});
  expect_error(
      [&] {
        vmap([](const std::vector<Array>& a) { return std::vector<Array>{a[0] + 1.0}; },
             {0, 0})({x, y});
      },
      {"mapped axes disagree", "has 3", "has 2"});
  expect_error([&] { vmap(id, {2})({x}); }, {"in_axes[0] = 2", "valid: 0..0"});
  expect_error([&] { vmap(id, {-1})({x}); }, {"no argument is mapped"});
  expect_error([&] { vmap(id, {0}, {-1})({x}); }, {"out_axes[0] = -1"});
  // The arrays involved stay usable.
  EXPECT_EQ(x.to_vector<float>(), std::vector<float>({1, 2}));
}

TEST(Transforms, StopGradientHidesItsInputFromEveryTransform) {
  Array x = array({0.5, -1.5, 2.0}, {3});
  // f = x * stop(x): reverse mode sees stop(x) as a constant, so df/dx = stop(x) = x.
  Fn f = [](const std::vector<Array>& a) {
    return std::vector<Array>{sum(a[0] * stop_gradient(a[0]))};
  };
  EXPECT_EQ(values(grad(f)({x})[0]), values(x));
  auto [outs, tangents] = jvp(
      [](const std::vector<Array>& a) { return std::vector<Array>{a[0] * stop_gradient(a[0])}; },
      {x}, {ones_like(x)});
  EXPECT_EQ(values(tangents[0]), values(x));
  EXPECT_EQ(values(outs[0]), values(x * x));
  // Second derivative: d/dx of (d/dx x * stop(x)) = d/dx stop(x) = 0.
  Fn g = grad([](const std::vector<Array>& a) {
    return std::vector<Array>{a[0] * stop_gradient(a[0]) * a[0]};
  });
  Array x0 = array(1.5);
  EXPECT_DOUBLE_EQ(scalar(g({x0})[0]), 2 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(scalar(grad([&](const std::vector<Array>& a) { return g(a); })({x0})[0]),
                   2 * 1.5);
  // Under compile (the trace keeps the node) and under vmap (the batched node keeps the flag).
  EXPECT_EQ(values(compile(grad(f))({x})[0]), values(x));
  Fn per_row = grad([](const std::vector<Array>& a) {
    return std::vector<Array>{sum(a[0] * stop_gradient(exp(a[0])))};
  });
  Array m = array({0.0, 1.0, 2.0, 3.0}, {2, 2});
  EXPECT_EQ(values(vmap(per_row)({m})[0]), values(exp(m)));
  Fn through_vmap = [](const std::vector<Array>& a) {
    Fn inner = [](const std::vector<Array>& b) {
      return std::vector<Array>{b[0] * stop_gradient(b[0])};
    };
    return std::vector<Array>{sum(vmap(inner)(a)[0])};
  };
  EXPECT_EQ(values(grad(through_vmap)({m})[0]), values(m));
  // Outside a transform it is the array itself.
  EXPECT_EQ(stop_gradient(x).node(), x.node());
}

TEST(Transforms, TheArgumentIsDifferentiatedNotOtherUsesOfTheSameArray) {
  // MLX's and JAX's rule: the captured `a` is a constant even when `a` is also the argument.
  Array a = array({1.0, 2.0}, {2});
  Fn f = [a](const std::vector<Array>& x) { return std::vector<Array>{sum(a * x[0] + x[0])}; };
  EXPECT_EQ(values(grad(f)({a})[0]), std::vector<double>({2.0, 3.0}));
  auto [outs, cts] = vjp([a](const std::vector<Array>& x) { return std::vector<Array>{a + x[0]}; },
                         {a}, {ones_like(a)});
  EXPECT_EQ(values(cts[0]), std::vector<double>({1.0, 1.0}));
  auto [o2, t2] = jvp([a](const std::vector<Array>& x) { return std::vector<Array>{a * x[0]}; },
                      {a}, {ones_like(a)});
  EXPECT_EQ(values(t2[0]), values(a));
}

TEST(Transforms, EvaluatingInsideAGradKeepsTheGraph) {
  Array x = array(0.7);
  Fn f = [](const std::vector<Array>& a) {
    Array y = sin(a[0]);
    eval(y);  // a user printing an intermediate
    return std::vector<Array>{y * a[0]};
  };
  double want = std::cos(0.7) * 0.7 + std::sin(0.7);
  EXPECT_NEAR(scalar(grad(f)({x})[0]), want, 1e-12);
}

}  // namespace
