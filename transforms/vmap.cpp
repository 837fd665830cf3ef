// vmap: runs the function once on the first element along each mapped axis (a proxy), then
// rebuilds the recorded graph with each primitive's batching rule, the mapped axis leading
// every value that depends on a mapped argument. Values that do not are left as they were.
#include <unordered_map>

#include "compile/graph_walk.h"
#include "graph/ops.h"
#include "graph/trace_state.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"

namespace kiln {

namespace {

// The batch of `args` mapped along `axes`: each mapped argument with its axis moved first, and
// the proxy f runs on (element 0 along that axis).
struct Mapped {
  std::unordered_map<const ArrayNode*, Batched> values;  // proxy node -> the whole batch
  std::vector<Array> proxies;
  int64_t size = -1;
};

Mapped map_arguments(const std::vector<Array>& args, const std::vector<int>& axes) {
  Mapped m;
  for (size_t i = 0; i < args.size(); ++i) {
    const Array& x = args[i];
    int ax = axes[i];
    if (ax == -1) {
      m.proxies.push_back(x);
      continue;
    }
    if (ax < 0 || ax >= x.ndim())
      throw_error("vmap: in_axes[", i, "] = ", ax, " is not an axis of argument ", i, " of shape ",
                  x.shape(), " (valid: 0..", x.ndim() - 1, ", or -1 for not mapped)");
    int64_t n = x.shape()[ax];
    if (m.size >= 0 && n != m.size)
      throw_error("vmap: mapped axes disagree in size: argument ", i, " has ", n, " along axis ",
                  ax, " but an earlier mapped argument has ", m.size);
    if (n == 0) throw_error("vmap: argument ", i, " has extent 0 along its mapped axis ", ax);
    m.size = n;
    Array batch = moveaxis(x, ax, 0);
    std::vector<int64_t> start(x.ndim(), 0), stop(batch.shape().begin(), batch.shape().end());
    stop[0] = 1;
    Shape one(batch.shape().begin() + 1, batch.shape().end());
    Array proxy = reshape(slice(batch, start, stop), one);
    m.values.emplace(proxy.node().get(), Batched{batch, true});
    m.proxies.push_back(proxy);
  }
  if (m.size < 0) throw_error("vmap: no argument is mapped (every in_axes entry is -1)");
  return m;
}

Array place_output(const Batched& b, int64_t size, int axis, size_t j) {
  if (axis == -1) {
    if (b.mapped)
      throw_error("vmap: output ", j, " depends on the mapped axis, so out_axes[", j,
                  "] = -1 (not mapped) cannot hold; give the axis it should go to");
    return b.value;
  }
  Array v = rule::materialize(b, size);
  if (axis < 0 || axis >= v.ndim())
    throw_error("vmap: out_axes[", j, "] = ", axis, " is not an axis of output ", j,
                " of mapped shape ", v.shape(), " (valid: 0..", v.ndim() - 1, ", or -1)");
  return moveaxis(v, 0, axis);
}

}  // namespace

Fn vmap(const Fn& f, std::vector<int> in_axes, std::vector<int> out_axes) {
  if (!f) throw_error("vmap: the function is empty");
  return [f, in_axes, out_axes](const std::vector<Array>& args) {
    if (!in_axes.empty() && in_axes.size() != args.size())
      throw_error("vmap: in_axes has ", in_axes.size(),
                  " entries but the function was called with ", args.size(),
                  " arguments; give one per argument (or none for axis 0 everywhere)");
    if (args.empty())
      throw_error("vmap: the function was called with no arguments; nothing to map");
    TransformGuard recording;
    Mapped m = map_arguments(args, in_axes.empty() ? std::vector<int>(args.size(), 0) : in_axes);
    std::vector<Array> outs = f(m.proxies);
    if (!out_axes.empty() && out_axes.size() != outs.size())
      throw_error("vmap: out_axes has ", out_axes.size(), " entries but the function returned ",
                  outs.size(), " outputs; give one per output (or none for axis 0 everywhere)");
    std::unordered_map<const ArrayNode*, Batched>& val = m.values;
    auto leaf = [&](const ArrayNode& n) { return val.count(&n) || n.inputs.empty(); };
    for (const Array& a : topological_order(outs, leaf)) {
      const ArrayNode& n = *a.node();
      if (val.count(&n)) continue;
      std::vector<Batched> in;
      bool mapped = false;
      for (const Array& x : n.inputs) {
        auto it = val.find(x.node().get());
        in.push_back(it != val.end() ? it->second : Batched{x, false});
        mapped = mapped || in.back().mapped;
      }
      val.emplace(&n, mapped ? transform_rules(n.op).vmap(n, in, m.size) : Batched{a, false});
    }
    std::vector<Array> result;
    for (size_t j = 0; j < outs.size(); ++j) {
      auto it = val.find(outs[j].node().get());
      Batched b = it != val.end() ? it->second : Batched{outs[j], false};
      result.push_back(place_output(b, m.size, out_axes.empty() ? 0 : out_axes[j], j));
    }
    return result;
  };
}

}  // namespace kiln
