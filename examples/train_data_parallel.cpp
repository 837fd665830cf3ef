// Data-parallel training: every rank holds the whole model, takes its shard of each global batch,
// and averages its gradients with the others (optim::average_gradients, bucketed all_sums)
// inside one compiled step. Run it under a launcher:
//   mpiexec -n 4 build/kiln_train_data_parallel
// (alone it is a one-rank group). Every rank also trains a second copy of the model on the whole
// global batch without collectives, the single-process run. It passes when, after 50 steps,
// every rank holds bitwise-identical parameters and the loss at every step equals the
// single-process loss to 1e-5.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "kiln.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

constexpr int64_t kGlobalBatch = 512;
constexpr int kSteps = 50;

// The global batch: points inside a disc (class 0) against points on a ring around it (class 1).
std::vector<Array> global_batch(uint64_t seed) {
  std::vector<random::Key> k = random::split(random::key(seed), 4);
  int64_t n = kGlobalBatch;
  Array is_ring = random::uniform({n, 1}, float32, k[0]) < 0.5;
  Array theta = random::uniform(0, 2 * M_PI, {n, 1}, float32, k[1]);
  Array r = where(is_ring, random::uniform(1.5, 2.5, {n, 1}, float32, k[2]),
                  random::uniform(0, 1, {n, 1}, float32, k[3]));
  Array label = astype(is_ring, float32);
  return {concatenate({r * cos(theta), r * sin(theta)}, 1), concatenate({1.0 - label, label}, 1)};
}

std::vector<Array> shard(const std::vector<Array>& batch, int rank, int size) {
  int64_t part = kGlobalBatch / size;
  std::vector<Array> out;
  for (const Array& a : batch) out.push_back(slice(a, {rank * part, 0}, {(rank + 1) * part, 2}));
  return out;
}

// A model, its optimizer and its compiled step; `group` set: the data-parallel step.
struct Trainer {
  nn::MLP model{{2, 32, 32, 2}, nn::relu, random::key(3)};
  optim::SGD optimizer{model.parameters(), 0.1, {.momentum = 0.9}};
  CompiledFunction step;

  explicit Trainer(std::optional<dist::Group> group) {
    auto loss_and_grad = nn::value_and_grad(model, [this](const std::vector<Array>& xy) {
      return nn::cross_entropy(model(xy[0]), xy[1]);
    });
    std::vector<std::vector<Array>*> state{&model.parameters().arrays(), &optimizer.state()};
    step = compile(
        [this, loss_and_grad, group](const std::vector<Array>& xy) {
          auto [loss, grads] = loss_and_grad(xy);
          if (group) {  // the mean over ranks of each rank's mean over its shard
            grads = optim::average_gradients(grads, group);
            loss = dist::all_sum(loss, group) / float(group->size());
          }
          optimizer.update(model, grads);
          return std::vector<Array>{loss};
        },
        {.inputs = state, .outputs = state});
  }
};

std::vector<unsigned char> bytes_of(const Array& a) {
  std::vector<float> v = a.to_vector<float>();
  std::vector<unsigned char> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

int main() {
  dist::Group world = dist::init();
  int rank = world.rank(), size = world.size();
  if (kGlobalBatch % size != 0) {
    std::fprintf(stderr, "the global batch of %lld does not split into %d ranks\n",
                 static_cast<long long>(kGlobalBatch), size);
    return 1;
  }
  Trainer parallel(world), single(std::nullopt);
  double worst = 0, parallel_s = 0, single_s = 0;
  using clock = std::chrono::steady_clock;
  for (int it = 1; it <= kSteps; ++it) {
    std::vector<Array> batch = global_batch(100 + it);
    std::vector<Array> mine = shard(batch, rank, size);
    eval(batch), eval(mine);
    auto t0 = clock::now();
    double a = parallel.step(mine)[0].item<double>();
    auto t1 = clock::now();
    double b = single.step(batch)[0].item<double>();
    auto t2 = clock::now();
    if (it > 5) {  // past the first traces and kernel builds
      parallel_s += std::chrono::duration<double>(t1 - t0).count();
      single_s += std::chrono::duration<double>(t2 - t1).count();
    }
    worst = std::max(worst, std::abs(a - b) / std::max(1.0, std::abs(b)));
    if (rank == 0 && it % 10 == 0)
      std::printf("step %2d  loss %.6f  single process %.6f\n", it, a, b);
  }
  // Every rank's parameters, gathered: each rank compares every other rank's bytes to its own.
  bool identical = true;
  for (const Array& p : parallel.model.parameters().arrays()) {
    Array flat = reshape(p, {1, -1});
    Array all = dist::all_gather(flat, world);
    for (int r = 0; r < size; ++r)
      identical =
          identical && bytes_of(slice(all, {r, 0}, {r + 1, flat.shape()[1]})) == bytes_of(flat);
  }
  bool ok = identical && worst <= 1e-5 && parallel.step.cache_size() == 1;
  int all_ok = dist::all_min(array(int32_t(ok)), world).item<int32_t>();
  if (rank == 0) {
    std::printf(
        "%d ranks: parameters bitwise identical on every rank: %s; largest loss "
        "difference from the single process: %.2e; traces of the step: %zu\n",
        size, identical ? "yes" : "no", worst, parallel.step.cache_size());
    std::printf(
        "step time (mean of steps 6-%d): data-parallel %.3f ms, single process on the "
        "global batch %.3f ms\n",
        kSteps, 1e3 * parallel_s / (kSteps - 5), 1e3 * single_s / (kSteps - 5));
    if (!all_ok) std::printf("FAIL on some rank\n");
  }
  return all_ok ? 0 : 1;
}
