// An MLP learns a task a linear model cannot: points inside a disc (class 0) against points on
// a ring around it (class 1). MLP 2 -> 32 -> 32 -> 2 with ReLU, cross-entropy, Adam; the whole
// training step (forward, backward, update) is one compiled function with the model and the
// optimizer state captured. Passes when held-out accuracy reaches 95% after 300 steps.
#include <cmath>
#include <cstdio>

#include "kiln.h"

using namespace kiln;

namespace {

struct Data {
  Array x, onehot, label;
};

Data disc_and_ring(int64_t n, uint64_t seed) {
  std::vector<random::Key> k = random::split(random::key(seed), 4);
  Array is_ring = random::uniform({n, 1}, float32, k[0]) < 0.5;
  Array theta = random::uniform(0, 2 * M_PI, {n, 1}, float32, k[1]);
  Array r = where(is_ring, random::uniform(1.5, 2.5, {n, 1}, float32, k[2]),
                  random::uniform(0, 1, {n, 1}, float32, k[3]));
  Array label = astype(is_ring, float32);
  return {concatenate({r * cos(theta), r * sin(theta)}, 1), concatenate({1.0 - label, label}, 1),
          squeeze(astype(is_ring, int64), {1})};
}

double accuracy(const nn::Module& model, const Data& d) {
  Array predicted = argmax(model(d.x), -1);
  return mean(astype(predicted == d.label, float32)).item<double>();
}

}  // namespace

int main() {
  Data train = disc_and_ring(512, 1), test = disc_and_ring(512, 2);
  nn::MLP model({2, 32, 32, 2}, nn::relu, random::key(3));
  optim::Adam optimizer(model.parameters(), 0.01);
  auto loss_and_grad = nn::value_and_grad(
      model, [&](const std::vector<Array>& xy) { return nn::cross_entropy(model(xy[0]), xy[1]); });
  std::vector<std::vector<Array>*> state{&model.parameters().arrays(), &optimizer.state()};
  CompiledFunction step = compile(
      [&](const std::vector<Array>& xy) {
        auto [loss, grads] = loss_and_grad(xy);
        optimizer.update(model, grads);
        return std::vector<Array>{loss};
      },
      {.inputs = state, .outputs = state});

  std::printf("held-out accuracy before training: %.3f\n", accuracy(model, test));
  for (int it = 1; it <= 300; ++it) {
    Array loss = step({train.x, train.onehot})[0];
    if (it % 50 == 0) std::printf("step %3d  loss %.4f\n", it, loss.item<double>());
  }
  double acc = accuracy(model, test);
  std::printf("held-out accuracy after 300 steps: %.3f (traces of the step: %zu)\n", acc,
              step.cache_size());
  if (acc < 0.95 || step.cache_size() != 1) {
    std::printf("FAIL: expected accuracy >= 0.95 and one trace\n");
    return 1;
  }
  return 0;
}
