// Op semantics against hand-computed values, on the default device.
#include <cmath>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_near;

TEST(Ops, CreationAndItem) {
  Array a = array<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.dtype(), float32);
  EXPECT_EQ(a.ndim(), 2);
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(array(3.5).item<double>(), 3.5);
  EXPECT_EQ(array(int64_t{1} << 40).item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(zeros({2, 2}, int32).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(ones({3}).to_vector<float>(), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(full({2}, 7.0, int64).to_vector<int64_t>(), (std::vector<int64_t>{7, 7}));
  EXPECT_EQ(arange(5).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(arange(5).dtype(), int64);
  expect_near(arange(1.0, 2.0, 0.25).to_vector<float>(), {1, 1.25, 1.5, 1.75});
  EXPECT_EQ(arange(10.0, 0.0, -3.0, int32).to_vector<int32_t>(),
            (std::vector<int32_t>{10, 7, 4, 1}));
  EXPECT_EQ(array<double>({1.7, -1.7}, {2}, int32).to_vector<int32_t>(),
            (std::vector<int32_t>{1, -1}));
}

TEST(Ops, LazyUntilEvaluated) {
  Array a = array<float>({1, 2}, {2});
  Array b = exp(a);
  EXPECT_FALSE(b.is_evaluated());
  eval(b);
  EXPECT_TRUE(b.is_evaluated());
  expect_near(b.to_vector<float>(), {std::exp(1.0), std::exp(2.0)});
}

TEST(Ops, UnaryValues) {
  Array x = array<double>({-1.5, 0.25, 2.0}, {3});
  expect_near(negative(x).to_vector<double>(), {1.5, -0.25, -2.0});
  expect_near(abs(x).to_vector<double>(), {1.5, 0.25, 2.0});
  expect_near(floor(x).to_vector<double>(), {-2, 0, 2});
  expect_near(ceil(x).to_vector<double>(), {-1, 1, 2});
  expect_near(sin(x).to_vector<double>(), {std::sin(-1.5), std::sin(0.25), std::sin(2.0)});
  expect_near(cos(x).to_vector<double>(), {std::cos(-1.5), std::cos(0.25), std::cos(2.0)});
  expect_near(tanh(x).to_vector<double>(), {std::tanh(-1.5), std::tanh(0.25), std::tanh(2.0)});
  expect_near(erf(x).to_vector<double>(), {std::erf(-1.5), std::erf(0.25), std::erf(2.0)});
  expect_near(sigmoid(x).to_vector<double>(),
              {1 / (1 + std::exp(1.5)), 1 / (1 + std::exp(-0.25)), 1 / (1 + std::exp(-2.0))});
  Array p = array<double>({0.25, 4.0}, {2});
  expect_near(sqrt(p).to_vector<double>(), {0.5, 2.0});
  expect_near(rsqrt(p).to_vector<double>(), {2.0, 0.5});
  expect_near(log(p).to_vector<double>(), {std::log(0.25), std::log(4.0)});
  EXPECT_EQ(logical_not(array<bool>({true, false}, {2})).to_vector<bool>(),
            (std::vector<bool>{false, true}));
  // Int inputs to float functions compute in float64, as NumPy.
  EXPECT_EQ(exp(array<int32_t>({0, 1}, {2})).dtype(), float64);
  EXPECT_EQ(abs(array<int32_t>({-3, 3}, {2})).to_vector<int32_t>(), (std::vector<int32_t>{3, 3}));
}

TEST(Ops, BinaryBroadcastingAndPromotion) {
  Array a = array<float>({1, 2, 3}, {3, 1});
  Array b = array<float>({10, 20}, {2});
  Array c = a + b;
  EXPECT_EQ(c.shape(), (Shape{3, 2}));
  expect_near(c.to_vector<float>(), {11, 21, 12, 22, 13, 23});
  Array i = array<int32_t>({1, 2}, {2});
  Array f = array<float>({0.5f, 0.25f}, {2});
  EXPECT_EQ((i + f).dtype(), float64);
  expect_near((i * f).to_vector<double>(), {0.5, 0.5});
  EXPECT_EQ((i + array<int64_t>({1, 1}, {2})).dtype(), int64);
  // Division is true division: ints give floats.
  Array q = divide(array<int32_t>({7, -7}, {2}), array<int32_t>({2, 2}, {2}));
  EXPECT_EQ(q.dtype(), float64);
  expect_near(q.to_vector<double>(), {3.5, -3.5});
  expect_near(power(array<double>({2, 9}, {2}), array<double>({3, 0.5}, {2})).to_vector<double>(),
              {8, 3});
  EXPECT_EQ(
      power(array<int32_t>({2, 3, 2}, {3}), array<int32_t>({10, 3, -1}, {3})).to_vector<int32_t>(),
      (std::vector<int32_t>{1024, 27, 0}));
  expect_near(maximum(a, b).to_vector<float>(), {10, 20, 10, 20, 10, 20});
  expect_near(minimum(array<float>({1, 5}, {2}), array<float>({3, 2}, {2})).to_vector<float>(),
              {1, 2});
  // Integer arithmetic wraps.
  EXPECT_EQ((array<int32_t>({2147483647}, {1}) + array<int32_t>({1}, {1})).item<int32_t>(),
            -2147483647 - 1);
}

TEST(Ops, ScalarOperandsAreWeak) {
  Array x = array<float>({1, 2}, {2});
  EXPECT_EQ((x * 2.0).dtype(), float32);
  EXPECT_EQ((2 * x).dtype(), float32);
  EXPECT_EQ((array<int32_t>({1}, {1}) + 1).dtype(), int32);
  expect_near((1.0 - x).to_vector<float>(), {0, -1});
  expect_near((x / 4).to_vector<float>(), {0.25, 0.5});
}

TEST(Ops, ComparisonsAndLogic) {
  Array a = array<float>({1, 2, 3}, {3});
  Array b = array<float>({3, 2, 1}, {3});
  EXPECT_EQ((a < b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ((a <= b).to_vector<bool>(), (std::vector<bool>{true, true, false}));
  EXPECT_EQ((a > b).to_vector<bool>(), (std::vector<bool>{false, false, true}));
  EXPECT_EQ((a >= b).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ((a == b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ((a != b).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ((a == b).dtype(), bool_);
  EXPECT_EQ(((a < b) || (a > b)).to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(((a < b) && (a > 0.5)).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(logical_and(array<float>({0, 2}, {2}), array<int32_t>({1, 1}, {2})).to_vector<bool>(),
            (std::vector<bool>{false, true}));
}

TEST(Ops, NanSemantics) {
  double nan = std::nan("");
  Array x = array<double>({nan, 1.0}, {2});
  Array y = array<double>({0.0, nan}, {2});
  auto m = maximum(x, y).to_vector<double>();
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_TRUE(std::isnan(m[1]));
  EXPECT_TRUE(std::isnan(max(x).item<double>()));
  EXPECT_EQ(argmax(array<double>({1.0, nan, 5.0}, {3})).item<int64_t>(), 1);
  // float -> int casts saturate, NaN -> 0.
  EXPECT_EQ(astype(array<double>({nan, 1e20, -1e20}, {3}), int32).to_vector<int32_t>(),
            (std::vector<int32_t>{0, 2147483647, -2147483647 - 1}));
}

TEST(Ops, WhereAndAstype) {
  Array c = array<bool>({true, false, true}, {3});
  Array r = where(c, array<float>({1, 2, 3}, {3}), array<int32_t>({-1}, {1}));
  EXPECT_EQ(r.dtype(), float64);
  expect_near(r.to_vector<double>(), {1, -1, 3});
  Array w =
      where(array<int32_t>({0, 5}, {2, 1}), array<float>({1, 2, 3}, {3}), array<float>({9}, {1}));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  expect_near(w.to_vector<float>(), {9, 9, 9, 1, 2, 3});
  EXPECT_EQ(astype(array<float>({1.9f, -1.9f, 0.0f}, {3}), int32).to_vector<int32_t>(),
            (std::vector<int32_t>{1, -1, 0}));
  EXPECT_EQ(astype(array<float>({2.0f, 0.0f}, {2}), bool_).to_vector<bool>(),
            (std::vector<bool>{true, false}));
  EXPECT_EQ(astype(array<int64_t>({(int64_t{1} << 32) + 5}, {1}), int32).item<int32_t>(), 5);
}

TEST(Ops, Reductions) {
  Array a = array<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_FLOAT_EQ(sum(a).item<float>(), 21);
  expect_near(sum(a, 0).to_vector<float>(), {5, 7, 9});
  expect_near(sum(a, -1).to_vector<float>(), {6, 15});
  EXPECT_EQ(sum(a, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(sum(a, std::vector<int>{0, 1}, true).shape(), (Shape{1, 1}));
  expect_near(max(a, 0).to_vector<float>(), {4, 5, 6});
  expect_near(min(a, 1).to_vector<float>(), {1, 4});
  expect_near(prod(a, 1).to_vector<float>(), {6, 120});
  expect_near(mean(a, 0).to_vector<float>(), {2.5, 3.5, 4.5});
  EXPECT_EQ(mean(array<int32_t>({1, 2}, {2})).dtype(), float64);
  EXPECT_DOUBLE_EQ(mean(array<int32_t>({1, 2}, {2})).item<double>(), 1.5);
  Array b = array<float>({3, 9, 2, 7, 1, 8}, {2, 3});
  EXPECT_EQ(argmax(b, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(argmax(b, 0).to_vector<int64_t>(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(argmax(b).item<int64_t>(), 1);
  EXPECT_EQ(argmax(b, 1, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(argmax(b).dtype(), int64);
  EXPECT_EQ(argmax(array<int32_t>({4, 4, 1}, {3})).item<int64_t>(), 0);  // first maximum
  // Empty reductions give the identity; bool sums count.
  EXPECT_EQ(sum(zeros({0, 3}), 0).to_vector<float>(), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(prod(zeros({2, 0}), 1).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(sum(array<bool>({true, true, false}, {3})).item<int32_t>(), 2);
  EXPECT_EQ(sum(array<bool>({true}, {1})).dtype(), int32);
  // Reduction over a middle axis of a 3-D array.
  Array c = reshape(arange(24.0, 0.0, -1.0), {2, 3, 4});
  expect_near(sum(c, 1).to_vector<float>(), {60, 57, 54, 51, 24, 21, 18, 15});
  expect_near(sum(c, std::vector<int>{0, 2}).to_vector<float>(), {132, 100, 68});
}

TEST(Ops, ShapeOps) {
  Array a = arange(6.0, 0.0, -1.0);  // 6 5 4 3 2 1 (float32)
  Array m = reshape(a, {2, 3});
  expect_near(m.to_vector<float>(), {6, 5, 4, 3, 2, 1});
  EXPECT_EQ(reshape(a, {3, -1}).shape(), (Shape{3, 2}));
  expect_near(transpose(m).to_vector<float>(), {6, 3, 5, 2, 4, 1});
  EXPECT_EQ(transpose(reshape(arange(24), {2, 3, 4}), {1, 2, 0}).shape(), (Shape{3, 4, 2}));
  EXPECT_EQ(transpose(reshape(arange(24), {2, 3, 4}), {1, 2, 0}).to_vector<int64_t>()[1], 12);
  EXPECT_EQ(flatten(m).shape(), (Shape{6}));
  EXPECT_EQ(flatten(reshape(arange(24), {2, 3, 4}), 1).shape(), (Shape{2, 12}));
  EXPECT_EQ(squeeze(reshape(a, {1, 6, 1})).shape(), (Shape{6}));
  EXPECT_EQ(squeeze(reshape(a, {1, 6, 1}), {-1}).shape(), (Shape{1, 6}));
  EXPECT_EQ(expand_dims(a, 0).shape(), (Shape{1, 6}));
  EXPECT_EQ(expand_dims(a, -1).shape(), (Shape{6, 1}));
  EXPECT_EQ(expand_dims(m, {0, 3}).shape(), (Shape{1, 2, 3, 1}));
  Array bt = broadcast_to(array<float>({1, 2}, {2, 1}), {2, 3});
  expect_near(bt.to_vector<float>(), {1, 1, 1, 2, 2, 2});
  expect_near(slice(m, {0, 1}, {2, 3}).to_vector<float>(), {5, 4, 2, 1});
  expect_near(slice(a, {-1}, {-7}, {-2}).to_vector<float>(), {1, 3, 5});
  expect_near(slice(a, {1}, {100}, {2}).to_vector<float>(), {5, 3, 1});
  EXPECT_EQ(slice(a, {4}, {2}).size(), 0);
  Array c0 = concatenate({m, m * 10.0}, 0);
  EXPECT_EQ(c0.shape(), (Shape{4, 3}));
  expect_near(c0.to_vector<float>(), {6, 5, 4, 3, 2, 1, 60, 50, 40, 30, 20, 10});
  Array c1 = concatenate({m, array<int32_t>({7, 8}, {2, 1})}, 1);
  EXPECT_EQ(c1.dtype(), float64);
  expect_near(c1.to_vector<double>(), {6, 5, 4, 7, 3, 2, 1, 8});
}

TEST(Ops, Matmul) {
  Array a = array<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = array<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Array c = matmul(a, b);
  EXPECT_EQ(c.shape(), (Shape{2, 2}));
  expect_near(c.to_vector<float>(), {4, 5, 10, 11});
  // 1-D operands are promoted and the added axes removed (NumPy).
  Array v = array<float>({1, 1, 1}, {3});
  EXPECT_EQ(matmul(a, v).shape(), (Shape{2}));
  expect_near(matmul(a, v).to_vector<float>(), {6, 15});
  EXPECT_EQ(matmul(v, b).shape(), (Shape{2}));
  EXPECT_EQ(matmul(v, v).shape(), (Shape{}));
  EXPECT_FLOAT_EQ(matmul(v, v).item<float>(), 3);
  // Batch broadcasting: (2,1,2,3) @ (3,3,2) -> (2,3,2,2).
  Array batch_a = reshape(arange(12.0, 0.0, -1.0), {2, 1, 2, 3});
  Array batch_b = reshape(astype(arange(18), float32), {3, 3, 2});
  Array bc = matmul(batch_a, batch_b);
  EXPECT_EQ(bc.shape(), (Shape{2, 3, 2, 2}));
  std::vector<float> got = bc.to_vector<float>();
  std::vector<float> av = batch_a.to_vector<float>(), bv = batch_b.to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int r = 0; r < 2; ++r)
        for (int col = 0; col < 2; ++col) {
          float want = 0;
          for (int k = 0; k < 3; ++k) want += av[i * 6 + r * 3 + k] * bv[j * 6 + k * 2 + col];
          EXPECT_FLOAT_EQ(got[((i * 3 + j) * 2 + r) * 2 + col], want);
        }
  EXPECT_EQ(matmul(array<int32_t>({1, 2, 3, 4}, {2, 2}), array<int32_t>({1, 1}, {2}))
                .to_vector<int32_t>(),
            (std::vector<int32_t>{3, 7}));
}

TEST(Ops, Composites) {
  Array x = array<float>({1, 2, 3, 1, 1, 1}, {2, 3});
  std::vector<float> s = softmax(x).to_vector<float>();
  double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expect_near(s,
              {std::exp(1.0) / z, std::exp(2.0) / z, std::exp(3.0) / z, 1 / 3.0, 1 / 3.0, 1 / 3.0});
  expect_near(logsumexp(x, 1).to_vector<float>(), {std::log(z), std::log(3.0) + 1});
  EXPECT_EQ(logsumexp(x, 1, true).shape(), (Shape{2, 1}));
  // Large inputs do not overflow; a row of -inf stays -inf rather than NaN.
  EXPECT_NEAR(logsumexp(array<float>({1000, 1000}, {2})).item<float>(), 1000 + std::log(2.0), 1e-3);
  EXPECT_EQ(logsumexp(array<float>({-INFINITY, -INFINITY}, {2})).item<float>(), -INFINITY);
}

TEST(Ops, IntermediatesStayValid) {
  Array a = array<float>({1, 2}, {2});
  Array b = a * 3.0;
  Array c = b + 1.0;
  expect_near(c.to_vector<float>(), {4, 7});
  expect_near(b.to_vector<float>(), {3, 6});  // held by the user: materialised, not lost
  Array d = b - c;
  expect_near(d.to_vector<float>(), {-1, -1});
}

TEST(Ops, ZeroDimAndEmpty) {
  Array s = array(2.0f);
  EXPECT_EQ(s.ndim(), 0);
  EXPECT_FLOAT_EQ((s * s).item<float>(), 4);
  EXPECT_FLOAT_EQ(sum(s).item<float>(), 2);
  Array e = zeros({0, 4});
  EXPECT_EQ((e + 1.0).shape(), (Shape{0, 4}));
  EXPECT_TRUE((e + 1.0).to_vector<float>().empty());
}

TEST(Ops, LongChainEvaluates) {
  // 20,000 ops deep: evaluation must not recurse per node.
  Array x = array(0.0f);
  for (int i = 0; i < 20000; ++i) x = x + 1.0f;
  EXPECT_FLOAT_EQ(x.item<float>(), 20000);
}
