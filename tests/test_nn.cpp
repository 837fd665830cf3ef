// nn and optimizers: the update formulas against hand-computed steps, losses against their
// definitions, and the compiled training step: traced once across ten steps and a change of
// learning rate, with the losses of the uncompiled step.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::values;

namespace {

// One parameter p (float64) and the loss sum(p * c), whose gradient is c, whatever p is.
struct Fixed {
  nn::Parameters params;
  Array c = array({0.5, -2.0, 4.0}, {3});
  Fixed() { params.add("p", array({1.0, 2.0, 3.0}, {3})); }
  std::vector<Array> grads() const { return {c}; }
};

TEST(Optimizers, SgdFollowsItsFormulaWithMomentumDecayAndNesterov) {
  for (bool nesterov : {false, true}) {
    Fixed f;
    optim::SGD opt(f.params, 0.1, {.momentum = 0.9, .weight_decay = 0.01, .nesterov = nesterov});
    std::vector<double> p{1, 2, 3}, c{0.5, -2, 4}, v(3, 0);
    for (int step = 0; step < 3; ++step) {
      opt.update(f.params, f.grads());
      for (int i = 0; i < 3; ++i) {
        double g = c[i] + 0.01 * p[i];
        v[i] = 0.9 * v[i] + g;
        p[i] -= 0.1 * (nesterov ? g + 0.9 * v[i] : v[i]);
      }
      std::vector<double> got = values(f.params["p"]);
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], p[i], 1e-12) << "step " << step;
    }
  }
}

TEST(Optimizers, AdamAndAdamWFollowTheirFormulas) {
  for (double wd : {0.0, 0.05}) {
    Fixed f;
    std::unique_ptr<optim::Optimizer> opt;
    if (wd == 0)
      opt = std::make_unique<optim::Adam>(f.params, 0.01);
    else
      opt = std::make_unique<optim::AdamW>(f.params, 0.01, optim::AdamOptions{.weight_decay = wd});
    std::vector<double> p{1, 2, 3}, c{0.5, -2, 4}, m(3, 0), v(3, 0);
    for (int t = 1; t <= 3; ++t) {
      opt->update(f.params, f.grads());
      for (int i = 0; i < 3; ++i) {
        m[i] = 0.9 * m[i] + 0.1 * c[i];
        v[i] = 0.999 * v[i] + 0.001 * c[i] * c[i];
        double mh = m[i] / (1 - std::pow(0.9, t)), vh = v[i] / (1 - std::pow(0.999, t));
        p[i] = p[i] - 0.01 * mh / (std::sqrt(vh) + 1e-8) - 0.01 * wd * p[i];
      }
      std::vector<double> got = values(f.params["p"]);
      for (int i = 0; i < 3; ++i) EXPECT_NEAR(got[i], p[i], 1e-12) << "step " << t;
    }
  }
}

TEST(Optimizers, MisuseRaisesErrorsAndLeavesParametersAlone) {
  Fixed f;
  optim::SGD opt(f.params, 0.1);
  expect_error([&] { opt.update(f.params, {}); }, {"1 parameters but 0 gradients"});
  expect_error([&] { opt.update(f.params, {zeros({2}, float64)}); },
               {"gradient of 'p' has shape (2,)", "(3,)"});
  EXPECT_EQ(values(f.params["p"]), std::vector<double>({1, 2, 3}));
  expect_error([&] { f.params["q"]; }, {"no parameter named 'q'", "have: p"});
  // Another module with as many parameters: refused before the step count moves.
  nn::Linear a(2, 3), b(3, 4);
  optim::Adam adam(a.parameters(), 0.1);
  expect_error(
      [&] {
        adam.update(b, {zeros({3, 4}), zeros({4})});
      },
      {"parameter 'weight' has shape (3, 4)", "made for one of shape (2, 3)"});
  EXPECT_EQ(values(adam.state()[1]), std::vector<double>({0}));
  expect_error([&] { f.params.add("p", zeros({1})); }, {"named 'p' exists"});
  expect_error([&] { nn::MLP({4}, nn::relu); }, {"at least an input and an output size"});
  expect_error([&] { nn::mse(zeros({2}), zeros({3})); }, {"mse", "(2,)", "(3,)"});
}

TEST(Nn, LossesMatchTheirDefinitions) {
  Array l = array({-30.0, -1.0, 0.0, 2.0, 40.0}, {5});
  Array t = array({0.0, 1.0, 0.5, 1.0, 0.0}, {5});
  double want = 0;
  std::vector<double> lv = values(l), tv = values(t);
  for (int i = 0; i < 5; ++i) {
    double s = 1 / (1 + std::exp(-lv[i]));
    double a = lv[i] < -20 ? lv[i] : std::log(s), b = lv[i] > 20 ? -lv[i] : std::log(1 - s);
    want -= tv[i] * a + (1 - tv[i]) * b;
  }
  EXPECT_NEAR(nn::binary_cross_entropy(l, t).item<double>(), want / 5, 1e-12);
  Array logits = array({1.0, 2.0, 3.0, 0.0, 0.0, 5.0}, {2, 3});
  Array onehot = array({0.0, 0.0, 1.0, 1.0, 0.0, 0.0}, {2, 3});
  double ce =
      (-(3 - std::log(std::exp(1) + std::exp(2) + std::exp(3))) - (0 - std::log(2 + std::exp(5)))) /
      2;
  EXPECT_NEAR(nn::cross_entropy(logits, onehot).item<double>(), ce, 1e-12);
  EXPECT_NEAR(nn::mse(l, t).item<double>(), (900 + 4 + 0.25 + 1 + 1600) / 5.0, 1e-12);
  std::vector<double> ls = values(nn::log_softmax(logits));
  EXPECT_NEAR(ls[2], 3 - std::log(std::exp(1) + std::exp(2) + std::exp(3)), 1e-12);
}

// The compiled step of docs/guide.md ("Transforms and training"): parameters and optimizer
// state captured, a learning rate change between steps. One trace; the same losses as the step
// run uncompiled.
std::vector<double> train(bool compiled, size_t* traces) {
  Array x = random::uniform({8, 5}, float32, random::key(4));
  Array y = astype(random::uniform({8}, float32, random::key(5)) > 0.5, float32);
  nn::Linear model(5, 1, true, random::key(6));
  optim::SGD opt(model.parameters(), 0.1, {.momentum = 0.8});
  auto lg = nn::value_and_grad(model, [&](const std::vector<Array>& a) {
    return nn::binary_cross_entropy(squeeze(model(a[0])), a[1]);
  });
  Fn step = [&](const std::vector<Array>& a) {
    auto [loss, grads] = lg(a);
    opt.update(model, grads);
    return std::vector<Array>{loss};
  };
  std::vector<std::vector<Array>*> state{&model.parameters().arrays(), &opt.state()};
  CompiledFunction c = compile(step, {.inputs = state, .outputs = state});
  std::vector<double> losses;
  for (int i = 0; i < 10; ++i) {
    if (i == 5) opt.set_learning_rate(0.05);
    losses.push_back((compiled ? c({x, y}) : step({x, y}))[0].item<double>());
  }
  EXPECT_NEAR(opt.learning_rate(), 0.05, 1e-7);
  if (traces) *traces = c.cache_size();
  return losses;
}

TEST(Nn, CompiledStepTracesOnceAcrossStepsAndALearningRateChange) {
  size_t traces = 0;
  std::vector<double> compiled = train(true, &traces), eager = train(false, nullptr);
  EXPECT_EQ(traces, 1u);
  for (size_t i = 0; i < compiled.size(); ++i) EXPECT_NEAR(compiled[i], eager[i], 1e-6);
  EXPECT_LT(compiled.back(), compiled.front());
}

TEST(Nn, RandomDrawsHaveNoGradientAndBatchUnmapped) {
  Array x = array({1.0, 2.0}, {2});
  auto f = [](const std::vector<Array>& a) {
    Array noise = random::normal({2}, float64, random::key(9));
    return std::vector<Array>{sum(a[0] * noise + noise)};
  };
  Array noise = random::normal({2}, float64, random::key(9));
  EXPECT_EQ(values(grad(f)({x})[0]), values(noise));  // d/dx, and nothing through the draw
  Array xs = array({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}, {3, 2});
  Array batched = vmap(f)({xs})[0];
  ASSERT_EQ(batched.shape(), (Shape{3}));
  EXPECT_NEAR(values(batched)[2], values(f({array({5.0, 6.0}, {2})})[0])[0], 1e-12);
}

}  // namespace
