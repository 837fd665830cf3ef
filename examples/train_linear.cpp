// MLX's compile documentation ends with a compiled training step; this is that example in C++.
// A Linear(10, 1) model on 4 x 10 inputs, binary cross-entropy, SGD with momentum 0.8 and
// learning rate 0.1. The step is compiled with the model's parameters and the optimizer's state
// captured as inputs and outputs, so it is traced once and ten steps reuse the trace. The same
// ten steps run uncompiled from the same start, and the losses must agree to 1e-6.
#include <cmath>
#include <cstdio>

#include "kiln.h"

using namespace kiln;

namespace {

std::vector<double> train(bool compiled, size_t* traces) {
  Array x = random::uniform({4, 10}, float32, random::key(0));
  Array y = array({0.0f, 1.0f, 0.0f, 1.0f}, {4});
  nn::Linear model(10, 1, true, random::key(1));
  optim::SGD optimizer(model.parameters(), 0.1, {.momentum = 0.8});

  auto loss_and_grad = nn::value_and_grad(model, [&](const std::vector<Array>& xy) {
    Array logits = squeeze(model(xy[0]));
    return nn::binary_cross_entropy(logits, xy[1]);
  });
  Fn step = [&](const std::vector<Array>& xy) {
    auto [loss, grads] = loss_and_grad(xy);
    optimizer.update(model, grads);
    return std::vector<Array>{loss};
  };
  std::vector<std::vector<Array>*> state{&model.parameters().arrays(), &optimizer.state()};
  CompiledFunction compiled_step = compile(step, {.inputs = state, .outputs = state});

  std::vector<double> losses;
  for (int it = 0; it < 10; ++it) {
    Array loss = compiled ? compiled_step({x, y})[0] : step({x, y})[0];
    eval(model.parameters().arrays());
    eval(optimizer.state());
    losses.push_back(loss.item<double>());
  }
  if (traces) *traces = compiled_step.cache_size();
  return losses;
}

}  // namespace

int main() {
  size_t traces = 0;
  std::vector<double> compiled = train(true, &traces);
  std::vector<double> eager = train(false, nullptr);
  bool ok = true;
  std::printf("step  compiled loss  uncompiled loss\n");
  for (size_t i = 0; i < compiled.size(); ++i) {
    std::printf("%4zu  %13.6f  %15.6f\n", i, compiled[i], eager[i]);
    ok = ok && std::abs(compiled[i] - eager[i]) <= 1e-6;
  }
  std::printf("traces of the compiled step: %zu\n", traces);
  bool falling = compiled.back() < compiled.front();
  if (!ok) std::printf("FAIL: compiled and uncompiled losses differ by more than 1e-6\n");
  if (!falling) std::printf("FAIL: the loss did not fall\n");
  if (traces != 1) std::printf("FAIL: the step was traced %zu times, expected once\n", traces);
  return ok && falling && traces == 1 ? 0 : 1;
}
