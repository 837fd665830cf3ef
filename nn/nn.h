// A small neural-network library in Kiln's types: parameters as a named list of arrays that
// compile can capture as state, Linear and MLP modules, activations and losses, and
// value_and_grad over a module's parameters. Everything is ops, so every piece differentiates,
// batches and compiles.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/random.h"
#include "transforms/transforms.h"

namespace kiln::nn {

// Named arrays in insertion order. arrays() is the list compile captures (CompileOptions
// inputs/outputs): its address is stable and its order is names().
class Parameters {
 public:
  // Adds `value` under `name`; raises kiln::Error if the name is taken.
  Array& add(const std::string& name, Array value);
  Array& operator[](const std::string& name);  // raises kiln::Error for an unknown name
  const Array& operator[](const std::string& name) const;
  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const std::vector<std::string>& names() const { return names_; }
  std::vector<Array>& arrays() { return arrays_; }
  const std::vector<Array>& arrays() const { return arrays_; }
  size_t size() const { return arrays_.size(); }

 private:
  std::vector<std::string> names_;
  std::vector<Array> arrays_;
  std::map<std::string, size_t> index_;
};

class Module {
 public:
  virtual ~Module() = default;
  virtual Array operator()(const Array& x) const = 0;
  Parameters& parameters() { return params_; }
  const Parameters& parameters() const { return params_; }

 protected:
  Parameters params_;
};

// y = x W + b, W of shape (in, out) and b (out), both drawn from U(-1/sqrt(in), 1/sqrt(in)).
// W is stored (in, out), as Flax does (MLX and PyTorch store (out, in), as kiln.nn does); either
// layout runs without a transposed copy (matmul reads a transposed operand in place).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, std::optional<random::Key> key = {},
         Dtype dtype = float32);
  Array operator()(const Array& x) const override;
};

// Linear layers of sizes dims[0] -> dims[1] -> ... with `activation` between them (not after
// the last). Parameters are named "layers.<i>.weight" and "layers.<i>.bias".
class MLP : public Module {
 public:
  MLP(const std::vector<int64_t>& dims, std::function<Array(const Array&)> activation,
      std::optional<random::Key> key = {}, Dtype dtype = float32);
  // An op of ops.h as the activation, named alone (MLP(dims, tanh)): its stream argument
  // made the name match no std::function, and <cmath>'s tanh made it ambiguous.
  MLP(const std::vector<int64_t>& dims, Array (*activation)(const Array&, StreamOrDevice),
      std::optional<random::Key> key = {}, Dtype dtype = float32);
  Array operator()(const Array& x) const override;

 private:
  size_t layers_;
  std::function<Array(const Array&)> activation_;
};

// x W + b, the function Linear applies (W of shape (in, out)).
Array linear(const Array& x, const Array& weight, const std::optional<Array>& bias = {});

Array relu(const Array& x);
Array gelu(const Array& x);  // exact: x/2 (1 + erf(x / sqrt 2))
Array sigmoid(const Array& x);
Array softmax(const Array& x, int axis = -1);
Array log_softmax(const Array& x, int axis = -1);
// Normalisation over the last axis, as PyTorch's LayerNorm and RMSNorm: layer_norm is
// (x - mean) / sqrt(var + eps) * weight + bias (var without Bessel's correction), rms_norm is
// x / sqrt(mean(x^2) + eps) * weight. weight and bias have the last axis's length; without
// them the scale is 1 and the shift 0. Compiled, each is one row kernel (docs/performance.md).
Array layer_norm(const Array& x, const std::optional<Array>& weight = {},
                 const std::optional<Array>& bias = {}, double eps = 1e-5);
Array rms_norm(const Array& x, const std::optional<Array>& weight = {}, double eps = 1e-6);

// Losses, averaged over every element (mean reduction).
Array mse(const Array& predictions, const Array& targets);
// From logits (stable for large |logits|); targets in [0, 1].
Array binary_cross_entropy(const Array& logits, const Array& targets);
// From logits over the last axis; targets are class probabilities (one-hot or soft) of the
// logits' shape.
Array cross_entropy(const Array& logits, const Array& targets);

// The loss of `module` as a function of its parameters: calling the result with the loss's
// arguments returns (the loss function's outputs, the gradient of its first output with respect
// to each parameter, in parameters().names() order).
using LossFn = std::function<Array(const std::vector<Array>&)>;
using ModuleValueAndGradFn =
    std::function<std::pair<Array, std::vector<Array>>(const std::vector<Array>&)>;
ModuleValueAndGradFn value_and_grad(Module& module, LossFn loss);

}  // namespace kiln::nn
