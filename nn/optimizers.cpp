#include "nn/optimizers.h"

#include "graph/ops.h"

namespace kiln::optim {

namespace {
Dtype float_dtype_of(const nn::Parameters& params) {
  for (const Array& a : params.arrays())
    if (a.dtype().is_float()) return a.dtype();
  return float32;
}
}  // namespace

Optimizer::Optimizer(double lr, Dtype dtype) : dtype_(dtype) {
  state_.push_back(array(lr).dtype() == dtype ? array(lr) : astype(array(lr), dtype));
}

void Optimizer::set_learning_rate(double lr) { state_[0] = astype(array(lr), dtype_); }
double Optimizer::learning_rate() const { return astype(state_[0], float64).item<double>(); }

void Optimizer::update(nn::Parameters& params, const std::vector<Array>& grads) {
  if (params.size() != params_)
    throw_error("optimizer: made for ", params_, " parameters but updating ", params.size(),
                "; make the optimizer from the parameters it updates");
  if (grads.size() != params.size())
    throw_error("optimizer: ", params.size(), " parameters but ", grads.size(),
                " gradients; pass one gradient per parameter, in names() order");
  // Everything is checked before anything changes, so a refused update leaves the parameters
  // and the optimizer's state (its step count among them) as they were.
  for (size_t i = 0; i < grads.size(); ++i) {
    const Array& p = params.arrays()[i];
    if (p.shape() != shapes_[i])
      throw_error("optimizer: parameter '", params.names()[i], "' has shape ", p.shape(),
                  " but the optimizer was made for one of shape ", shapes_[i]);
    if (grads[i].shape() != p.shape())
      throw_error("optimizer: the gradient of '", params.names()[i], "' has shape ",
                  grads[i].shape(), " but the parameter has shape ", p.shape());
  }
  begin_step();
  for (size_t i = 0; i < grads.size(); ++i) {
    Array& p = params.arrays()[i];
    Array next = step(i, p, astype(grads[i], p.dtype()));
    p = next.dtype() == p.dtype() ? next : astype(next, p.dtype());
  }
}

// ---- SGD: state = [lr, velocity...] (velocities only with momentum) ----

SGD::SGD(const nn::Parameters& params, double lr, SGDOptions options)
    : Optimizer(lr, float_dtype_of(params)), opts_(options) {
  params_ = params.size();
  for (const Array& p : params.arrays()) shapes_.push_back(p.shape());
  if (opts_.momentum != 0)
    for (const Array& p : params.arrays()) state_.push_back(zeros_like(p));
}

Array SGD::step(size_t i, const Array& p, const Array& grad) {
  Array g = opts_.weight_decay != 0 ? grad + p * opts_.weight_decay : grad;
  Array rate = astype(lr(), p.dtype());
  if (opts_.momentum == 0) return p - rate * g;
  Array& v = state_[1 + i];
  v = v * opts_.momentum + g;
  Array d = opts_.nesterov ? g + v * opts_.momentum : v;
  return p - rate * d;
}

// ---- Adam: state = [lr, t, m..., v...] ----

Adam::Adam(const nn::Parameters& params, double lr, AdamOptions options)
    : Optimizer(lr, float_dtype_of(params)), opts_(options) {
  params_ = params.size();
  for (const Array& p : params.arrays()) shapes_.push_back(p.shape());
  state_.push_back(zeros({}, dtype_));  // t, the number of steps taken
  for (const Array& p : params.arrays()) state_.push_back(zeros_like(p));
  for (const Array& p : params.arrays()) state_.push_back(zeros_like(p));
}

void Adam::begin_step() {
  state_[1] = state_[1] + 1.0;
  const Array& t = state_[1];
  correction1_ = 1.0 - power(full({}, opts_.beta1, dtype_), t);
  correction2_ = 1.0 - power(full({}, opts_.beta2, dtype_), t);
}

Array Adam::step(size_t i, const Array& p, const Array& g) {
  Array& m = state_[2 + i];
  Array& v = state_[2 + params_ + i];
  m = m * opts_.beta1 + g * (1 - opts_.beta1);
  v = v * opts_.beta2 + g * g * (1 - opts_.beta2);
  Array m_hat = m / *correction1_;
  Array v_hat = v / *correction2_;
  Array rate = astype(lr(), p.dtype());
  Array next = p - rate * astype(m_hat / (sqrt(v_hat) + opts_.eps), p.dtype());
  if (opts_.weight_decay != 0) next = next - rate * p * opts_.weight_decay;
  return next;
}

AdamW::AdamW(const nn::Parameters& params, double lr, AdamOptions options)
    : Adam(params, lr, options) {}

}  // namespace kiln::optim
