#include "backends/launch_check.h"

#include "graph/error.h"

namespace kiln {

namespace {

// Elements a buffer argument holds for buffer b of `k` (0 for a missing one).
int64_t elements_of(const Kernel& k, const KernelArgs& args, size_t b) {
  Buffer* buf = args.buffers[b];
  return buf ? static_cast<int64_t>(buf->bytes() / k.buffers[b].dtype.size()) : 0;
}

// Input/output pairs bound to the same memory: an input donated to an output.
std::vector<std::pair<int, int>> donations(const Kernel& k, const KernelArgs& args) {
  std::vector<std::pair<int, int>> d;
  for (size_t i = 0; i < args.buffers.size(); ++i)
    for (size_t o = 0; args.buffers[i] && !k.buffers[i].output && o < args.buffers.size(); ++o)
      if (k.buffers[o].output && args.buffers[o] == args.buffers[i])
        d.emplace_back(static_cast<int>(i), static_cast<int>(o));
  return d;
}

}  // namespace

LaunchCheck::LaunchCheck(const Kernel& k) : nparams_(k.num_params()) {
  bool runtime_dims = false;  // launch scalars do not move addresses; runtime Dims do
  for (const Dim& d : k.domain) runtime_dims = runtime_dims || d.is_runtime();
  for (const KernelBuffer& b : k.buffers) {
    for (const Dim& d : b.map.strides) runtime_dims = runtime_dims || d.is_runtime();
    runtime_dims = runtime_dims || b.map.offset.is_runtime();
  }
  if (runtime_dims) return;
  fixed_ = true;
  std::vector<int64_t> e;
  for (const Dim& d : k.domain) e.push_back(d.value);
  for (int64_t x : e) empty_ = empty_ || x == 0;
  for (const KernelBuffer& b : k.buffers) {
    int64_t lo = b.map.offset.value, hi = lo;
    for (size_t a = 0; a < e.size(); ++a) {
      int64_t step = b.map.strides[a].value * (e[a] - 1);
      (step < 0 ? lo : hi) += step;
    }
    ranges_.emplace_back(lo, hi);
  }
}

void LaunchCheck::operator()(const Kernel& k, const KernelArgs& args) const {
  if (args.buffers.size() != k.buffers.size())
    throw_error("kernel ", k.name, " takes ", k.buffers.size(), " buffers, got ",
                args.buffers.size());
  bool slow = !fixed_ || static_cast<int>(args.params.size()) < nparams_;
  for (size_t b = 0; b < args.buffers.size() && !slow && !empty_; ++b) {
    int64_t n = elements_of(k, args, b);
    slow = ranges_[b].first < 0 || ranges_[b].second >= n;
  }
  std::vector<std::pair<int, int>> donated = donations(k, args);
  if (!slow && donated.empty()) return;
  std::vector<int64_t> elements;
  for (size_t b = 0; b < args.buffers.size(); ++b) elements.push_back(elements_of(k, args, b));
  k.validate_launch(args.params, elements, donated);  // explains what is wrong, or passes
}

}  // namespace kiln
