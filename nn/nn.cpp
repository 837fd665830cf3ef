#include "nn/nn.h"

#include <cmath>

#include "graph/ops.h"

namespace kiln::nn {

// ---- parameters ----

Array& Parameters::add(const std::string& name, Array value) {
  if (index_.count(name)) throw_error("nn::Parameters: a parameter named '", name, "' exists");
  index_.emplace(name, arrays_.size());
  names_.push_back(name);
  arrays_.push_back(std::move(value));
  return arrays_.back();
}

Array& Parameters::operator[](const std::string& name) {
  auto it = index_.find(name);
  if (it == index_.end()) {
    std::string known;
    for (const std::string& n : names_) known += (known.empty() ? "" : ", ") + n;
    throw_error("nn::Parameters: no parameter named '", name, "' (have: ", known, ")");
  }
  return arrays_[it->second];
}

const Array& Parameters::operator[](const std::string& name) const {
  return const_cast<Parameters&>(*this)[name];
}

// ---- modules ----

namespace {

void add_linear(Parameters& p, const std::string& prefix, int64_t in, int64_t out, bool bias,
                random::Key key, Dtype dtype) {
  if (in <= 0 || out <= 0)
    throw_error("nn::Linear: sizes must be positive, got in = ", in, ", out = ", out);
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  std::vector<random::Key> keys = random::split(key, 2);
  p.add(prefix + "weight", random::uniform(-bound, bound, {in, out}, dtype, keys[0]));
  if (bias) p.add(prefix + "bias", random::uniform(-bound, bound, {out}, dtype, keys[1]));
}

}  // namespace

Array linear(const Array& x, const Array& weight, const std::optional<Array>& bias) {
  Array y = matmul(x, weight);
  return bias ? y + *bias : y;
}

Linear::Linear(int64_t in, int64_t out, bool bias, std::optional<random::Key> key, Dtype dtype) {
  add_linear(params_, "", in, out, bias, key ? *key : random::next_key(), dtype);
}

Array Linear::operator()(const Array& x) const {
  return linear(x, params_["weight"],
                params_.contains("bias") ? std::optional<Array>(params_["bias"]) : std::nullopt);
}

MLP::MLP(const std::vector<int64_t>& dims, Array (*activation)(const Array&, StreamOrDevice),
         std::optional<random::Key> key, Dtype dtype)
    : MLP(dims,
          activation ? std::function<Array(const Array&)>(
                           [activation](const Array& x) { return activation(x, {}); })
                     : nullptr,
          key, dtype) {}

MLP::MLP(const std::vector<int64_t>& dims, std::function<Array(const Array&)> activation,
         std::optional<random::Key> key, Dtype dtype)
    : layers_(dims.size() < 2 ? 0 : dims.size() - 1), activation_(std::move(activation)) {
  if (dims.size() < 2)
    throw_error("nn::MLP: needs at least an input and an output size, got ", dims.size(), " sizes");
  if (!activation_) throw_error("nn::MLP: the activation is empty");
  std::vector<random::Key> keys =
      random::split(key ? *key : random::next_key(), static_cast<int>(layers_));
  for (size_t i = 0; i < layers_; ++i)
    add_linear(params_, "layers." + std::to_string(i) + ".", dims[i], dims[i + 1], true, keys[i],
               dtype);
}

Array MLP::operator()(const Array& x) const {
  Array h = x;
  for (size_t i = 0; i < layers_; ++i) {
    std::string p = "layers." + std::to_string(i) + ".";
    h = linear(h, params_[p + "weight"], params_[p + "bias"]);
    if (i + 1 < layers_) h = activation_(h);
  }
  return h;
}

// ---- activations and losses ----

Array relu(const Array& x) { return maximum(x, zeros({}, x.dtype())); }
Array gelu(const Array& x) { return x * 0.5 * (1.0 + erf(x * (1.0 / std::sqrt(2.0)))); }
Array sigmoid(const Array& x) { return kiln::sigmoid(x); }
Array softmax(const Array& x, int axis) { return kiln::softmax(x, axis); }
Array log_softmax(const Array& x, int axis) { return x - logsumexp(x, axis, true); }

namespace {
// weight / bias of a normalisation over x's last axis: one value per element of that axis.
void check_affine(const char* op, const char* what, const Array& x, const std::optional<Array>& p) {
  if (x.ndim() == 0)
    throw_error("nn::", op,
                ": x is 0-d; it normalises over the last axis, so give x at least 1 axis");
  if (p && p->shape() != Shape{x.shape().back()})
    throw_error("nn::", op, ": ", what, " of shape ", p->shape(), " for x of shape ", x.shape(),
                "; give ", what, " of shape (", x.shape().back(), ")");
}
}  // namespace

Array layer_norm(const Array& x, const std::optional<Array>& weight,
                 const std::optional<Array>& bias, double eps) {
  check_affine("layer_norm", "weight", x, weight);
  check_affine("layer_norm", "bias", x, bias);
  Array xc = x - mean(x, -1, true);
  Array y = xc * rsqrt(mean(xc * xc, -1, true) + eps);
  if (weight) y = y * *weight;
  return bias ? y + *bias : y;
}

Array rms_norm(const Array& x, const std::optional<Array>& weight, double eps) {
  check_affine("rms_norm", "weight", x, weight);
  Array y = x * rsqrt(mean(x * x, -1, true) + eps);
  return weight ? y * *weight : y;
}

namespace {
void same_shape(const char* loss, const Array& a, const Array& b) {
  if (a.shape() != b.shape())
    throw_error("nn::", loss, ": predictions of shape ", a.shape(), " and targets of shape ",
                b.shape(), " differ; give targets of the predictions' shape");
}
}  // namespace

Array mse(const Array& predictions, const Array& targets) {
  same_shape("mse", predictions, targets);
  Array d = predictions - targets;
  return mean(d * d);
}

// max(l, 0) - l t + log(1 + exp(-|l|)): log(1 + exp(l)) - l t without overflow.
Array binary_cross_entropy(const Array& logits, const Array& targets) {
  same_shape("binary_cross_entropy", logits, targets);
  Array l = logits;
  return mean(relu(l) - l * targets + log(1.0 + exp(-abs(l))));
}

Array cross_entropy(const Array& logits, const Array& targets) {
  same_shape("cross_entropy", logits, targets);
  return mean(logsumexp(logits, -1) - sum(logits * targets, -1));
}

// ---- gradients of a module's loss ----

ModuleValueAndGradFn value_and_grad(Module& module, LossFn loss) {
  if (!loss) throw_error("nn::value_and_grad: the loss function is empty");
  return [&module, loss](const std::vector<Array>& args) {
    std::vector<Array>& slots = module.parameters().arrays();
    size_t n = slots.size();
    // The loss as a function of (parameters..., args...): the module reads the parameters
    // value_and_grad passes in, and gets its own back afterwards.
    Fn f = [&slots, n, loss](const std::vector<Array>& all) {
      std::vector<Array> saved = slots;
      std::copy(all.begin(), all.begin() + static_cast<long>(n), slots.begin());
      struct Restore {
        std::vector<Array>& slots;
        std::vector<Array>& saved;
        ~Restore() { slots = saved; }
      } restore{slots, saved};
      return std::vector<Array>{
          loss(std::vector<Array>(all.begin() + static_cast<long>(n), all.end()))};
    };
    std::vector<Array> all = slots;
    all.insert(all.end(), args.begin(), args.end());
    std::vector<int> argnums(n);
    for (size_t i = 0; i < n; ++i) argnums[i] = static_cast<int>(i);
    auto [outs, grads] = kiln::value_and_grad(f, argnums)(all);
    return std::make_pair(outs[0], grads);
  };
}

}  // namespace kiln::nn
