// Reverse and forward mode (vjp, jvp, grad, value_and_grad). Both run the user's function once
// on the primals, recording its graph (arrays are lazy, so the graph is the trace), then walk it
// with each primitive's rule: backwards from the outputs' cotangents for vjp, forwards from the
// primals' tangents for jvp. The results are lazy arrays like any other, so a transform inside
// compile is compiled with the rest, and transforms of transforms differentiate the rules' ops.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "compile/graph_walk.h"
#include "graph/ops.h"
#include "graph/trace_state.h"
#include "transforms/rules.h"
#include "transforms/transforms.h"

namespace kiln {

namespace {

using NodeSet = std::unordered_set<const ArrayNode*>;

// The primals as nodes of their own (an identity over each): the function sees these, so the
// derivative follows the argument and not other uses of the same array, as when the function
// also captured it (grad(lambda x: a + x)(a) is 1, as in MLX and JAX) or it is passed twice.
std::vector<Array> distinct(const std::vector<Array>& primals) {
  std::vector<Array> r;
  for (const Array& p : primals) {
    Params q;
    q.shape = p.shape();
    r.push_back(make_array(p.shape(), p.dtype(), Op::Broadcast, q, {p}, p.node()->stream));
  }
  return r;
}

NodeSet node_set(const std::vector<Array>& xs) {
  NodeSet s;
  for (const Array& x : xs) s.insert(x.node().get());
  return s;
}

std::vector<Array> walk(const std::vector<Array>& outputs, const NodeSet& primals) {
  return topological_order(
      outputs, [&](const ArrayNode& n) { return primals.count(&n) || n.inputs.empty(); });
}

// The nodes of `order` that depend on a primal (the primals included).
NodeSet depending(const std::vector<Array>& order, const NodeSet& primals) {
  NodeSet live = primals;
  for (const Array& a : order)
    for (const Array& in : a.node()->inputs)
      if (live.count(in.node().get())) {
        live.insert(a.node().get());
        break;
      }
  return live;
}

// Cotangents of `primals` from cotangents `cts` of `outputs`, through the recorded graph.
std::vector<Array> backprop(const std::vector<Array>& outputs, const std::vector<Array>& primals,
                            const std::vector<Array>& cts) {
  NodeSet prim = node_set(primals);
  std::vector<Array> order = walk(outputs, prim);
  NodeSet live = depending(order, prim);
  std::unordered_map<const ArrayNode*, Array> ct;
  auto accumulate = [&](const Array& to, Array g) {
    if (!rule::differentiable(to.dtype())) return;
    if (g.dtype() != to.dtype()) g = astype(g, to.dtype());
    auto it = ct.find(to.node().get());
    if (it == ct.end())
      ct.emplace(to.node().get(), g);
    else
      it->second = it->second + g;
  };
  for (size_t j = 0; j < outputs.size(); ++j)
    if (live.count(outputs[j].node().get())) accumulate(outputs[j], cts[j]);
  for (auto a = order.rbegin(); a != order.rend(); ++a) {
    const ArrayNode& n = *a->node();
    if (prim.count(&n) || !live.count(&n)) continue;
    auto it = ct.find(&n);
    if (it == ct.end()) continue;
    Array g = it->second;
    ct.erase(it);  // consumed: its users have all been visited
    std::vector<MaybeArray> in = transform_rules(n.op).vjp(n, *a, g);
    for (size_t i = 0; i < in.size() && i < n.inputs.size(); ++i)
      if (in[i] && live.count(n.inputs[i].node().get())) accumulate(n.inputs[i], *in[i]);
  }
  std::vector<Array> grads;
  for (const Array& p : primals) {
    auto it = ct.find(p.node().get());
    grads.push_back(it != ct.end() ? it->second : zeros_like(p));
  }
  return grads;
}

void check_like(const char* what, const char* name, size_t i, const Array& given, const Array& like,
                const char* like_name) {
  if (given.shape() != like.shape())
    throw_error(what, ": ", name, " ", i, " has shape ", given.shape(), " but ", like_name, " ", i,
                " has shape ", like.shape(), "; give one of the same shape");
}

std::vector<Array> call(const Fn& f, const std::vector<Array>& args, const char* what) {
  if (!f) throw_error(what, ": the function is empty");
  return f(args);
}

}  // namespace

std::pair<std::vector<Array>, std::vector<Array>> vjp(const Fn& f,
                                                      const std::vector<Array>& primals,
                                                      const std::vector<Array>& cotangents) {
  TransformGuard recording;
  std::vector<Array> xs = distinct(primals);
  std::vector<Array> outs = call(f, xs, "vjp");
  if (cotangents.size() != outs.size())
    throw_error("vjp: the function returned ", outs.size(), " outputs but ", cotangents.size(),
                " cotangents were given; pass one cotangent per output");
  for (size_t j = 0; j < outs.size(); ++j)
    check_like("vjp", "cotangent", j, cotangents[j], outs[j], "output");
  return {outs, backprop(outs, xs, cotangents)};
}

std::pair<std::vector<Array>, std::vector<Array>> jvp(const Fn& f,
                                                      const std::vector<Array>& primals,
                                                      const std::vector<Array>& tangents) {
  TransformGuard recording;
  if (tangents.size() != primals.size())
    throw_error("jvp: ", primals.size(), " primals but ", tangents.size(),
                " tangents were given; pass one tangent per primal");
  for (size_t i = 0; i < primals.size(); ++i)
    check_like("jvp", "tangent", i, tangents[i], primals[i], "primal");
  std::vector<Array> xs = distinct(primals);
  std::vector<Array> outs = call(f, xs, "jvp");
  NodeSet prim = node_set(xs);
  std::unordered_map<const ArrayNode*, Array> tan;
  for (size_t i = 0; i < xs.size(); ++i)
    if (rule::differentiable(xs[i].dtype()))
      tan.emplace(xs[i].node().get(), astype(tangents[i], xs[i].dtype()));
  for (const Array& a : walk(outs, prim)) {
    const ArrayNode& n = *a.node();
    if (prim.count(&n)) continue;
    std::vector<MaybeArray> in;
    bool any = false;
    for (const Array& x : n.inputs) {
      auto it = tan.find(x.node().get());
      in.push_back(it != tan.end() ? MaybeArray(it->second) : std::nullopt);
      any = any || in.back();
    }
    if (!any) continue;
    if (MaybeArray t = transform_rules(n.op).jvp(n, a, in)) tan.emplace(&n, *t);
  }
  std::vector<Array> out_tangents;
  for (const Array& o : outs) {
    auto it = tan.find(o.node().get());
    out_tangents.push_back(it != tan.end() ? it->second : zeros_like(o));
  }
  return {outs, out_tangents};
}

ValueAndGradFn value_and_grad(const Fn& f, std::vector<int> argnums) {
  if (!f) throw_error("value_and_grad: the function is empty");
  if (argnums.empty())
    throw_error("value_and_grad: argnums is empty; name at least one argument to differentiate");
  return [f, argnums](const std::vector<Array>& args) {
    for (size_t k = 0; k < argnums.size(); ++k) {
      int i = argnums[k];
      if (i < 0 || i >= static_cast<int>(args.size()))
        throw_error("value_and_grad: argnums[", k, "] = ", i, " but the function was called with ",
                    args.size(), " arguments (valid: 0..", static_cast<int>(args.size()) - 1, ")");
      for (size_t m = 0; m < k; ++m)
        if (argnums[m] == i)
          throw_error("value_and_grad: argument ", i, " is named twice in argnums");
    }
    TransformGuard recording;
    std::vector<Array> primals;
    for (int i : argnums) primals.push_back(args[i]);
    std::vector<Array> xs = distinct(primals);
    std::vector<Array> full = args;
    for (size_t k = 0; k < argnums.size(); ++k) full[argnums[k]] = xs[k];
    std::vector<Array> outs = call(f, full, "value_and_grad");
    if (outs.empty() || outs[0].size() != 1)
      throw_error("value_and_grad: the function's first output must be a scalar loss; it ",
                  outs.empty() ? std::string("returned nothing")
                               : "has shape " + to_string(outs[0].shape()),
                  " (reduce it, e.g. with sum or mean)");
    if (!rule::differentiable(outs[0].dtype()))
      throw_error("value_and_grad: the loss has dtype ", outs[0].dtype(),
                  "; it must be floating-point to be differentiated");
    std::vector<Array> grads = backprop({outs[0]}, xs, {ones_like(outs[0])});
    return std::make_pair(outs, grads);
  };
}

Fn grad(const Fn& f, std::vector<int> argnums) {
  ValueAndGradFn vg = value_and_grad(f, std::move(argnums));
  return [vg](const std::vector<Array>& args) { return vg(args).second; };
}

}  // namespace kiln
