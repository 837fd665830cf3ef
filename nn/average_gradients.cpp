// optim::average_gradients: bucketed all_sums of the gradients, divided by the group's size.
#include "distributed/ops.h"
#include "graph/ops.h"
#include "nn/optimizers.h"

namespace kiln::optim {

namespace {

// The mean over ranks of the gradients `idx` (one dtype), as one flat all_sum split back.
void average_bucket(const std::vector<Array>& grads, const std::vector<size_t>& idx,
                    const distributed::Group& g, std::vector<Array>& out) {
  std::vector<Array> flat;
  for (size_t i : idx) flat.push_back(reshape(grads[i], {-1}));
  Array all = flat.size() == 1 ? flat[0] : concatenate(flat, 0);
  Dtype d = all.dtype();
  Array mean = distributed::all_sum(all, g) / astype(array(double(g.size())), d);
  if (mean.dtype() != d) mean = astype(mean, d);
  int64_t at = 0;
  for (size_t i : idx) {
    int64_t n = grads[i].size();
    out[i] = reshape(slice(mean, {at}, {at + n}), grads[i].shape());
    at += n;
  }
}

}  // namespace

std::vector<Array> average_gradients(const std::vector<Array>& grads,
                                     std::optional<distributed::Group> group, size_t bucket_bytes) {
  distributed::Group g = group ? *group : distributed::init();
  if (g.size() == 1) return grads;
  for (const Array& x : grads)
    if (!x.dtype().is_float())
      throw_error("average_gradients: gradients must be floating-point, got ", x.dtype());
  std::vector<Array> out = grads;  // each replaced by its mean below
  // Buckets fill in gradient order, one open bucket per dtype.
  std::vector<std::pair<Dtype, std::vector<size_t>>> open;
  std::vector<size_t> open_bytes;
  for (size_t i = 0; i < grads.size(); ++i) {
    size_t b = grads[i].nbytes();
    size_t k = 0;
    while (k < open.size() && open[k].first != grads[i].dtype()) ++k;
    if (k < open.size() && (bucket_bytes == 0 || open_bytes[k] + b > bucket_bytes)) {
      average_bucket(grads, open[k].second, g, out);
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(k));
      open_bytes.erase(open_bytes.begin() + static_cast<std::ptrdiff_t>(k));
      k = open.size();
    }
    if (k == open.size()) {
      open.push_back({grads[i].dtype(), {}});
      open_bytes.push_back(0);
    }
    open[k].second.push_back(i);
    open_bytes[k] += b;
  }
  for (auto& [d, idx] : open) average_bucket(grads, idx, g, out);
  return out;
}

}  // namespace kiln::optim
