// Optimizers whose whole state is arrays: the learning rate, step count and per-parameter
// buffers live in state(), which compile captures next to the parameters (CompileOptions
// inputs and outputs), so a compiled training step neither retraces when the learning rate
// changes nor loses the momentum between calls.
#pragma once

#include <optional>
#include <vector>

#include "distributed/group.h"
#include "nn/nn.h"

namespace kiln::optim {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one step to `params` given `grads` (one per parameter, in names() order).
  void update(nn::Parameters& params, const std::vector<Array>& grads);
  void update(nn::Module& module, const std::vector<Array>& grads) {
    update(module.parameters(), grads);
  }
  // Everything the optimizer carries between steps; capture it with compile.
  std::vector<Array>& state() { return state_; }
  // A new learning rate: a new value in state, not a new trace.
  void set_learning_rate(double lr);
  double learning_rate() const;

 protected:
  // state_[0] is the learning rate; subclasses append theirs after it.
  Optimizer(double lr, Dtype dtype);
  virtual Array step(size_t i, const Array& param, const Array& grad) = 0;
  virtual void begin_step() {}
  Array& lr() { return state_[0]; }
  std::vector<Array> state_;
  size_t params_ = 0;
  std::vector<Shape> shapes_;  // of the parameters the optimizer was made for
  Dtype dtype_;
};

struct SGDOptions {
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

// v = momentum v + (g + weight_decay p); p -= lr (nesterov ? g + momentum v : v).
class SGD : public Optimizer {
 public:
  SGD(const nn::Parameters& params, double lr, SGDOptions options = {});

 private:
  Array step(size_t i, const Array& param, const Array& grad) override;
  SGDOptions opts_;
};

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // AdamW: decoupled, p -= lr weight_decay p
};

// Adam with bias correction (Kingma & Ba); AdamW when weight_decay > 0.
class Adam : public Optimizer {
 public:
  Adam(const nn::Parameters& params, double lr, AdamOptions options = {});

 private:
  void begin_step() override;
  Array step(size_t i, const Array& param, const Array& grad) override;
  AdamOptions opts_;
  // 1 - beta^t for this step, made once per step and shared by every parameter's update.
  std::optional<Array> correction1_, correction2_;
};

// Adam with decoupled weight decay (default 0.01, as MLX and PyTorch).
class AdamW : public Adam {
 public:
  AdamW(const nn::Parameters& params, double lr, AdamOptions options = {.weight_decay = 0.01});
};

// Data-parallel training (MLX's average_gradients): each gradient's mean over the group's
// ranks. Gradients of one dtype are flattened and concatenated into buckets of at most
// `bucket_bytes` (one larger gradient is a bucket of its own), one all_sum each, so a model of
// many small parameters makes few messages; 0 gives one all_sum per gradient. A one-rank group
// returns `grads`. Lazy like any op: inside compile it becomes part of the step.
std::vector<Array> average_gradients(const std::vector<Array>& grads,
                                     std::optional<distributed::Group> group = std::nullopt,
                                     size_t bucket_bytes = size_t{32} << 20);

}  // namespace kiln::optim
