// The four row ops the row-kernel tests run (softmax, log_softmax, layer_norm, rms_norm) under
// one signature, and their inputs: shared by the tests of the row walk and of its streaming
// stores.
#pragma once

#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln.h"

namespace kiln::test {

using RowOp = std::function<Array(const Array& x, const Array& w, const Array& b)>;

inline const std::vector<std::pair<std::string, RowOp>>& row_ops() {
  static const std::vector<std::pair<std::string, RowOp>> ops = {
      {"softmax", [](const Array& x, const Array&, const Array&) { return nn::softmax(x); }},
      {"log_softmax",
       [](const Array& x, const Array&, const Array&) { return nn::log_softmax(x); }},
      {"layer_norm",
       [](const Array& x, const Array& w, const Array& b) { return nn::layer_norm(x, w, b); }},
      {"rms_norm", [](const Array& x, const Array& w, const Array&) { return nn::rms_norm(x, w); }},
  };
  return ops;
}

// Inputs of dtype `d`: x (rows, len) spread over [-8, 8] (softmax sees large exponents), the
// weight and bias (len).
inline std::vector<Array> row_inputs(Dtype d, int64_t rows, int64_t len, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f), s(0.5f, 1.5f);
  std::vector<float> x(rows * len), w(len), b(len);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = s(rng);
  for (float& v : b) v = u(rng) / 8;
  return {astype(array(x, {rows, len}), d), astype(array(w, {len}), d), astype(array(b, {len}), d)};
}

}  // namespace kiln::test
