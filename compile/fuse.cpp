#include "compile/fuse.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "compile/eager_kernels.h"
#include "compile/view.h"
#include "graph/element.h"

namespace kiln {

namespace {

using NodeSet = std::unordered_set<const ArrayNode*>;

// Emission found a node that must be materialised first (a reshape of a computed value, or a
// kernel over the buffer bound); the planner marks it and plans again.
struct Materialize {
  std::vector<const ArrayNode*> nodes;
};
// Two outputs cannot share a kernel (one reads the other at another element).
struct MergeConflict {};

bool is_view_or_elementwise(Op op) {
  return is_elementwise(op) || op == Op::Broadcast || op == Op::Transpose || op == Op::Slice ||
         op == Op::Reshape || op == Op::Full || op == Op::Arange || op == Op::Random;
}

bool affine_reshape(const ArrayNode& n) {
  View probe = View::identity(static_cast<int>(n.shape.size())), out;
  return probe.reshape_input(n.inputs[0].shape(), n.shape, out);
}

// Builds one Kernel: the nodes of `roots` (stored) computed from buffers of materialised nodes.
class Emitter {
 public:
  Emitter(const NodeSet& materialized, const std::function<bool(const ArrayNode&)>& is_leaf,
          int max_buffers, bool runtime_dims)
      : mat_(materialized),
        is_leaf_(is_leaf),
        max_buffers_(max_buffers),
        runtime_dims_(runtime_dims) {}

  // Element-wise kernel over the shared shape of `roots`.
  FusedStep elementwise(const std::vector<const ArrayNode*>& roots) {
    const Shape& shape = roots[0]->shape;
    k_.domain = dims(shape);
    View id = View::identity(static_cast<int>(shape.size()));
    for (const ArrayNode* r : roots) here_.insert(r);
    std::vector<int> vals;
    for (const ArrayNode* r : roots) vals.push_back(emit(*r, id));
    for (size_t i = 0; i < roots.size(); ++i)
      store(*roots[i], vals[i], pm(id.buffer_map(contiguous_strides(shape))));
    return finish(roots[0]);
  }

  // Piece `i` of a concatenation: input i's values stored at its offset in the output.
  FusedStep concatenate_piece(const ArrayNode& cat, size_t i) {
    const Array& in = cat.inputs[i];
    int axis = cat.params.axes[0];
    int64_t at = 0;
    for (size_t j = 0; j < i; ++j) at += cat.inputs[j].shape()[axis];
    k_.domain = dims(in.shape());
    View id = View::identity(in.ndim());
    int v = emit(*in.node(), id);
    std::vector<int64_t> strides = contiguous_strides(cat.shape);
    IndexMap m = id.buffer_map(strides);
    m.offset = Dim::constant(at * strides[axis]);
    store(cat, v, pm(m));
    return finish(&cat);
  }

  // A reduction `r`, with `root` the end of its epilogue chain (r itself when there is none).
  FusedStep reduction(const ArrayNode& r, const ArrayNode& root) {
    const Array& x = r.inputs[0];
    const std::vector<int>& axes = r.params.axes;
    std::vector<int> kept;
    for (int j = 0; j < x.ndim(); ++j)
      if (std::find(axes.begin(), axes.end(), j) == axes.end()) kept.push_back(j);
    int nk = static_cast<int>(kept.size()), n = x.ndim();
    for (int j : kept) k_.domain.push_back(dim(x.shape()[j]));
    for (int j : axes) k_.domain.push_back(dim(x.shape()[j]));
    View in;
    in.domain = n;
    in.coeff.assign(n, std::vector<int64_t>(n, 0));
    in.offset.assign(n, 0);
    for (int p = 0; p < nk; ++p) in.coeff[kept[p]][p] = 1;
    for (size_t q = 0; q < axes.size(); ++q) in.coeff[axes[q]][nk + q] = 1;
    here_.insert(&root);
    int pro = emit(*x.node(), in);
    Value red;
    red.kind = ValueKind::Reduce;
    red.dtype = r.dtype;
    red.a = pro;
    int rv = add(red);
    k_.reduce = Reduction{r.params.reduce, static_cast<int>(axes.size()), rv};
    // The reduced value's coordinates: kept axes follow the domain, reduced ones are 0.
    View out;
    out.domain = n;
    for (int j = 0, p = 0; j < n; ++j) {
      bool reduced = std::find(axes.begin(), axes.end(), j) != axes.end();
      if (reduced && !r.params.keepdims) continue;
      std::vector<int64_t> row(n, 0);
      if (!reduced) row[p] = 1;
      if (!reduced) ++p;
      out.coeff.push_back(row);
      out.offset.push_back(0);
    }
    epilogue_ = true;
    reduce_node_ = &r;
    reduce_value_ = rv;
    int v = &root == &r ? rv : emit(root, out);
    store(root, v, pm(out.buffer_map(contiguous_strides(root.shape))));
    return finish(&root);
  }

 private:
  // With runtime dims every extent, stride and offset is a launch parameter, so one compiled
  // kernel serves every shape of a shapeless function.
  Dim dim(int64_t v) {
    if (!runtime_dims_) return Dim::constant(v);
    params_.push_back(v);
    return Dim::runtime(static_cast<int32_t>(params_.size()) - 1);
  }
  std::vector<Dim> dims(const Shape& s) {
    std::vector<Dim> d;
    for (int64_t e : s) d.push_back(dim(e));
    return d;
  }
  // Zero strides stay constant: they are structural (broadcast, reduced axes of an output), and
  // a shape that broadcasts differently is a different kernel anyway.
  IndexMap pm(IndexMap m) {
    if (!runtime_dims_) return m;
    for (Dim& d : m.strides)
      if (d.value != 0) d = dim(d.value);
    m.offset = dim(m.offset.value);
    return m;
  }

  int add(Value v) {
    k_.body.push_back(std::move(v));
    return static_cast<int>(k_.body.size()) - 1;
  }

  // A user value (a fill, an arange bound, a folded or 0-d constant): a launch scalar, so a new
  // value reuses the compiled kernel.
  int constant(Scalar c) {
    Value v;
    v.kind = ValueKind::Constant;
    v.dtype = c.dtype;
    params_.push_back(launch_word(c));
    v.param = static_cast<int32_t>(params_.size()) - 1;
    return add(v);
  }
  // A value that shapes the generated code (kernel_ir.h lists them): part of the kernel's hash.
  int immediate(Scalar c) {
    Value v;
    v.kind = ValueKind::Constant;
    v.dtype = c.dtype;
    v.constant = c;
    return add(v);
  }

  void store(const ArrayNode& n, int value, IndexMap map) {
    k_.buffers.push_back({n.dtype, true, std::move(map)});
    nodes_.push_back(&n);
    k_.stores.push_back({static_cast<int>(k_.buffers.size()) - 1, value});
    names_.insert("store");
  }

  FusedStep finish(const ArrayNode* lane_node) {
    names_.erase("store");
    names_.erase("load");
    if (names_.empty())
      k_.name = primitive_name(lane_node->op, lane_node->params);
    else if (names_.size() == 1)
      k_.name = *names_.begin();
    else {
      k_.name = "fused";
      for (const auto& n : names_) k_.name += "_" + n;
    }
    FusedStep s;
    s.kernel = std::make_shared<const Kernel>(std::move(k_));
    s.buffers = std::move(nodes_);
    s.lane_node = lane_node;
    s.params = std::move(params_);
    return s;
  }

  bool is_buffer(const ArrayNode& n) const {
    return is_leaf_(n) || (mat_.count(&n) && !here_.count(&n));
  }

  int load(const ArrayNode& n, const View& v) {
    // 0-d user constants become launch scalars: no buffer, no copy to the device.
    if (std::optional<Scalar> c = host_scalar(n)) return constant(*c);
    if (static_cast<int>(k_.buffers.size()) >= max_buffers_) throw Materialize{};
    k_.buffers.push_back({n.dtype, false, pm(v.buffer_map(contiguous_strides(n.shape)))});
    nodes_.push_back(&n);
    Value val;
    val.kind = ValueKind::Load;
    val.dtype = n.dtype;
    val.buffer = static_cast<int>(k_.buffers.size()) - 1;
    return add(val);
  }

  int emit(const ArrayNode& n, const View& v) {
    auto key = std::make_tuple(&n, v, epilogue_);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    int r = emit_uncached(n, v);
    memo_[key] = r;
    return r;
  }

  int emit_uncached(const ArrayNode& n, const View& v) {
    if (epilogue_ && &n == reduce_node_) return reduce_value_;
    if (is_buffer(n)) return load(n, v);
    if (here_.count(&n) && !epilogue_ && !v.is_identity()) throw MergeConflict{};
    if (n.op != Op::Reshape) names_.insert(primitive_name(n.op, n.params));
    auto child = [&](int i, const View& cv) { return emit(*n.inputs[i].node(), cv); };
    auto bcast = [&](int i) { return v.broadcast_input(n.inputs[i].shape(), n.shape); };
    Value val;
    val.dtype = n.dtype;
    switch (n.op) {
      case Op::Unary:
        val.kind = ValueKind::Unary, val.unary = n.params.unary, val.a = child(0, bcast(0));
        return add(val);
      case Op::Binary: {
        int a = child(0, bcast(0));
        int b = n.params.binary == BinaryOp::Power && is_two(*n.inputs[1].node())
                    ? immediate(Scalar::of(2.0).cast(n.inputs[1].dtype()))
                    : child(1, bcast(1));
        val.kind = ValueKind::Binary, val.binary = n.params.binary, val.a = a, val.b = b;
        return add(val);
      }
      case Op::Select: {
        int a = child(0, bcast(0)), b = child(1, bcast(1)), c = child(2, bcast(2));
        val.kind = ValueKind::Select, val.a = a, val.b = b, val.c = c;
        return add(val);
      }
      case Op::Cast: val.kind = ValueKind::Cast, val.a = child(0, bcast(0)); return add(val);
      case Op::Broadcast: return child(0, bcast(0));
      case Op::Transpose: return child(0, v.transpose_input(n.params.axes));
      case Op::Slice: return child(0, v.slice_input(n.params.start, n.params.step));
      case Op::Reshape: {
        View cv;
        if (v.reshape_input(n.inputs[0].shape(), n.shape, cv)) return child(0, cv);
        const ArrayNode& in = *n.inputs[0].node();
        if (!is_buffer(in)) throw Materialize{{&in}};
        // A general reshape keeps the row-major linear index of a contiguous buffer.
        if (static_cast<int>(k_.buffers.size()) >= max_buffers_) throw Materialize{};
        k_.buffers.push_back({in.dtype, false, pm(v.buffer_map(contiguous_strides(n.shape)))});
        nodes_.push_back(&in);
        val.kind = ValueKind::Load;
        val.buffer = static_cast<int>(k_.buffers.size()) - 1;
        return add(val);
      }
      case Op::Full: return constant(n.params.value);
      case Op::Arange: {
        Value idx;
        idx.kind = ValueKind::Index, idx.dtype = int64;
        idx.map.offset = Dim::constant(v.offset[0]);
        for (int64_t c : v.coeff[0]) idx.map.strides.push_back(Dim::constant(c));
        idx.map = pm(idx.map);
        int i = add(idx);
        if (n.dtype != int64) {
          Value c;
          c.kind = ValueKind::Cast, c.dtype = n.dtype, c.a = i;
          i = add(c);
        }
        Value mul, sum;
        mul.kind = ValueKind::Binary, mul.binary = BinaryOp::Multiply, mul.dtype = n.dtype;
        mul.a = i, mul.b = constant(n.params.step_value);
        int m = add(mul);
        sum.kind = ValueKind::Binary, sum.binary = BinaryOp::Add, sum.dtype = n.dtype;
        sum.a = m, sum.b = constant(n.params.value);
        return add(sum);
      }
      case Op::Random: {
        Value idx;
        idx.kind = ValueKind::Index, idx.dtype = int64;
        idx.map = pm(v.buffer_map(contiguous_strides(n.shape)));
        val.kind = ValueKind::Random, val.dist = n.params.dist;
        params_.push_back(static_cast<int64_t>(n.params.key));  // the key is a launch scalar
        val.param = static_cast<int32_t>(params_.size()) - 1;
        val.a = add(idx);
        return add(val);
      }
      case Op::Reduce: throw Materialize{{&n}};  // another reduction's result: needs a buffer
      case Op::Count: {
        int64_t count = 1;
        for (int ax : n.params.axes) count *= n.inputs[0].shape()[ax];
        if (!runtime_dims_) return immediate(Scalar::of(static_cast<double>(count)).cast(n.dtype));
        Value idx;  // an Index with no strides is its offset: the count, as a launch parameter
        idx.kind = ValueKind::Index, idx.dtype = int64;
        idx.map.strides.assign(k_.domain.size(), Dim::constant(0));
        idx.map.offset = dim(count);
        val.kind = ValueKind::Cast, val.a = add(idx);
        return add(val);
      }
      default: break;
    }
    throw Error(std::string("internal: fusion reached an unmaterialised ") + op_name(n.op) +
                " of shape " + to_string(n.shape) + (epilogue_ ? " in an epilogue" : "") +
                " while building " + (reduce_node_ ? "a reduction" : "an element-wise kernel"));
  }

  const NodeSet& mat_;
  const std::function<bool(const ArrayNode&)>& is_leaf_;
  int max_buffers_;
  bool runtime_dims_;
  std::vector<int64_t> params_;  // launch values of the runtime Dims
  Kernel k_;
  std::vector<const ArrayNode*> nodes_;
  std::set<std::string> names_;
  NodeSet here_;  // materialised nodes this kernel computes
  std::map<std::tuple<const ArrayNode*, View, bool>, int> memo_;
  bool epilogue_ = false;
  const ArrayNode* reduce_node_ = nullptr;
  int reduce_value_ = -1;
};

class Planner {
 public:
  Planner(const std::vector<Array>& order, const std::vector<Array>& outputs,
          const std::function<bool(const ArrayNode&)>& is_leaf,
          const std::function<bool(const ArrayNode&, const ArrayNode&)>& same_lane,
          const FusionOptions& opts)
      : order_(order), is_leaf_(is_leaf), same_lane_(same_lane), opts_(opts) {
    for (const Array& o : outputs) outputs_.insert(o.node().get());
    if (opts_.fuse)  // consumers only matter to epilogues
      for (const Array& a : order_)
        for (const Array& in : a.node()->inputs)
          consumers_[in.node().get()].push_back(a.node().get());
  }

  std::vector<FusedStep> run() {
    choose_forced();
    for (int attempt = 0;; ++attempt) {
      choose_epilogues();
      try {
        return build();
      } catch (const Materialize& m) {
        if (m.nodes.empty()) throw;  // handled in build()
        for (const ArrayNode* n : m.nodes) forced_.insert(n), pinned_.insert(n), mat_.insert(n);
      }
      if (attempt > 100000) throw Error("internal: fusion did not converge");
    }
  }

 private:
  bool leaf(const ArrayNode& n) const { return is_leaf_(n); }

  // Nodes that must live in buffers whatever fusion does.
  void choose_forced() {
    if (!opts_.fuse) {  // every primitive is materialised: nothing else to decide
      mat_.reserve(order_.size());
      for (const Array& a : order_)
        if (!leaf(*a.node()) && a.node()->op != Op::Count) mat_.insert(a.node().get());
      return;
    }
    for (const Array& a : order_) {
      const ArrayNode& n = *a.node();
      if (leaf(n)) continue;
      if (n.op == Op::Count) continue;  // always computed inline from its input's shape
      if (!opts_.fuse || outputs_.count(&n)) pinned_.insert(&n);
      if (n.op == Op::Reduce || n.op == Op::Matmul || n.op == Op::Concatenate) forced_.insert(&n);
      for (const Array& in : n.inputs) {
        const ArrayNode& c = *in.node();
        if (leaf(c)) continue;
        if (n.op == Op::Matmul || !same_lane_(c, n) || (n.op == Op::Reshape && !affine_reshape(n)))
          pinned_.insert(&c);
      }
    }
    forced_.insert(pinned_.begin(), pinned_.end());
  }

  // A reduction absorbs the single-consumer element-wise chain of its own shape after it.
  void choose_epilogues() {
    if (!opts_.fuse) return;  // choose_forced chose mat_ already
    mat_ = forced_;
    epilogue_root_.clear();
    NodeSet claimed;  // nodes already inside some reduction's epilogue
    for (const Array& a : order_) {
      const ArrayNode* r = a.node().get();
      if (r->op != Op::Reduce || pinned_.count(r)) continue;
      const ArrayNode* cur = r;
      NodeSet chain;
      for (;;) {
        auto it = consumers_.find(cur);
        if (it == consumers_.end() || it->second.size() != 1) break;
        const ArrayNode* c = it->second[0];
        if (!is_elementwise(c->op) || c->shape != r->shape || !same_lane_(*c, *r) ||
            claimed.count(c) || forced_.count(c) != pinned_.count(c))
          break;
        chain.insert(c);
        cur = c;
        if (pinned_.count(c)) break;  // an output ends the chain
      }
      claimed.insert(chain.begin(), chain.end());
      if (cur == r) continue;
      mat_.erase(r);
      for (const ArrayNode* c : chain) mat_.erase(c);
      mat_.insert(cur);
      epilogue_root_[cur] = r;
    }
  }

  bool depends_on(const ArrayNode* x, const NodeSet& targets) const {
    std::vector<const ArrayNode*> stack{x};
    NodeSet seen;
    while (!stack.empty()) {
      const ArrayNode* n = stack.back();
      stack.pop_back();
      if (targets.count(n)) return true;
      if (!seen.insert(n).second || leaf(*n)) continue;
      for (const Array& in : n->inputs) stack.push_back(in.node().get());
    }
    return false;
  }

  template <typename F>
  FusedStep emit_or_split(const std::vector<const ArrayNode*>& roots, F&& f) {
    try {
      Emitter e(mat_, is_leaf_, opts_.max_buffers, opts_.runtime_dims);
      return f(e);
    } catch (const Materialize& m) {
      if (!m.nodes.empty()) throw;
      // Over the buffer bound: materialise the largest computed subtree that fits in a kernel
      // of its own, and plan again (a few splits for a long chain, not one per node).
      Materialize more;
      if (const ArrayNode* cut = largest_fitting_subtree(roots)) more.nodes.push_back(cut);
      for (const ArrayNode* r : roots) {
        if (!more.nodes.empty()) break;
        const ArrayNode* start = r;
        if (auto it = epilogue_root_.find(r); it != epilogue_root_.end()) start = it->second;
        for (const ArrayNode* n : {r, start})
          for (const Array& in : n->inputs)
            if (!leaf(*in.node()) && !mat_.count(in.node().get()))
              more.nodes.push_back(in.node().get());
      }
      if (more.nodes.empty())
        throw Error("internal: a single primitive exceeds the kernel buffer bound");
      throw more;
    }
  }

  // Among the nodes a kernel computes inline, the one whose own inputs (buffers it would load)
  // are the most while still fitting one kernel.
  const ArrayNode* largest_fitting_subtree(const std::vector<const ArrayNode*>& roots) const {
    std::unordered_map<const ArrayNode*, std::unordered_set<const ArrayNode*>> loads;
    std::vector<const ArrayNode*> inline_nodes;
    std::vector<std::pair<const ArrayNode*, size_t>> stack;
    NodeSet root_set(roots.begin(), roots.end());
    for (const ArrayNode* r : roots) stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->inputs.size()) {
        const ArrayNode* c = n->inputs[next++].node().get();
        bool buffer = leaf(*c) || (mat_.count(c) && !root_set.count(c));
        if (!buffer && !loads.count(c)) stack.push_back({c, 0});
        continue;
      }
      auto& mine = loads[n];
      for (const Array& in : n->inputs) {
        const ArrayNode* c = in.node().get();
        bool buffer = leaf(*c) || (mat_.count(c) && !root_set.count(c));
        if (buffer)
          mine.insert(c);
        else
          mine.insert(loads[c].begin(), loads[c].end());
      }
      if (!root_set.count(n) && n->op != Op::Reduce) inline_nodes.push_back(n);
      stack.pop_back();
    }
    const ArrayNode* best = nullptr;
    size_t best_size = 0, limit = static_cast<size_t>(opts_.max_buffers) - 1;
    for (const ArrayNode* n : inline_nodes) {
      size_t k = loads[n].size();
      if (k <= limit && k > best_size) best = n, best_size = k;
    }
    return best_size >= 2 ? best : nullptr;
  }

  std::vector<FusedStep> build() {
    std::vector<FusedStep> steps;
    if (!opts_.fuse) steps.reserve(order_.size());
    NodeSet done;  // nodes already computed by a shared kernel (fusion only)
    for (const Array& a : order_) {
      const ArrayNode* n = a.node().get();
      if (leaf(*n) || !mat_.count(n) || (opts_.fuse && done.count(n))) continue;
      if (n->op == Op::Matmul) {
        FusedStep s;
        s.matmul = n;
        s.lane_node = n;
        steps.push_back(s);
      } else if (n->op == Op::Concatenate) {
        for (size_t i = 0; i < n->inputs.size(); ++i)
          steps.push_back(
              emit_or_split({n}, [&](Emitter& e) { return e.concatenate_piece(*n, i); }));
      } else if (!opts_.fuse && !opts_.runtime_dims) {
        steps.push_back(eager_step(*n));
      } else if (n->op == Op::Reduce) {
        steps.push_back(emit_or_split({n}, [&](Emitter& e) { return e.reduction(*n, *n); }));
      } else if (auto it = epilogue_root_.find(n); it != epilogue_root_.end()) {
        steps.push_back(
            emit_or_split({n}, [&](Emitter& e) { return e.reduction(*it->second, *n); }));
      } else {
        steps.push_back(elementwise_group(n, done));
      }
      if (opts_.fuse) done.insert(n);
    }
    // Without fusion every step is one node, already in the graph's order.
    return opts_.fuse ? order_steps(std::move(steps)) : steps;
  }

  // Fusion off: one primitive's kernel, built once per structure (eager_kernels.h).
  FusedStep eager_step(const ArrayNode& n) {
    if (std::optional<FusedStep> s = cached_eager_step(n)) return std::move(*s);
    FusedStep s = emit_or_split({&n}, [&](Emitter& e) {
      return n.op == Op::Reduce ? e.reduction(n, n) : e.elementwise({&n});
    });
    remember_eager_step(n, s);
    return s;
  }

  // Later element-wise outputs of the same shape and lane that do not depend on this one join
  // its kernel, so one pass over the inputs produces them all.
  FusedStep elementwise_group(const ArrayNode* n, NodeSet& done) {
    std::vector<const ArrayNode*> roots{n};
    if (opts_.fuse && outputs_.count(n)) {
      NodeSet root_set{n};
      for (const Array& a : order_) {
        const ArrayNode* b = a.node().get();
        if (b == n || done.count(b) || !outputs_.count(b) || !mat_.count(b) ||
            !is_view_or_elementwise(b->op) || epilogue_root_.count(b) || b->shape != n->shape ||
            !same_lane_(*b, *n) || !precedes(n, b))
          continue;
        bool ok = true;
        for (const Array& in : b->inputs)
          if (depends_through_buffer(in.node().get(), root_set)) ok = false;
        if (!ok) continue;
        std::vector<const ArrayNode*> trial = roots;
        trial.push_back(b);
        try {
          Emitter e(mat_, is_leaf_, opts_.max_buffers, opts_.runtime_dims);
          e.elementwise(trial);
        } catch (const MergeConflict&) {
          continue;
        } catch (const Materialize&) {
          continue;
        }
        roots = trial;
        root_set.insert(b);
      }
    }
    for (const ArrayNode* r : roots) done.insert(r);
    return emit_or_split(roots, [&](Emitter& e) { return e.elementwise(roots); });
  }

  bool precedes(const ArrayNode* a, const ArrayNode* b) const { return position(a) < position(b); }
  size_t position(const ArrayNode* n) const {
    if (positions_.empty())
      for (size_t i = 0; i < order_.size(); ++i) positions_[order_[i].node().get()] = i;
    return positions_.at(n);
  }

  // Whether computing `x` needs a buffer (materialised node) that depends on `roots`.
  bool depends_through_buffer(const ArrayNode* x, const NodeSet& roots) const {
    std::vector<const ArrayNode*> stack{x};
    NodeSet seen;
    while (!stack.empty()) {
      const ArrayNode* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second || leaf(*n)) continue;
      if (roots.count(n)) continue;  // reached through values, fine
      if (mat_.count(n) && depends_on(n, roots)) return true;
      for (const Array& in : n->inputs) stack.push_back(in.node().get());
    }
    return false;
  }

  // Steps in an order where every buffer a step reads is written by an earlier step.
  std::vector<FusedStep> order_steps(std::vector<FusedStep> steps) const {
    std::unordered_map<const ArrayNode*, std::vector<size_t>> writers;
    auto written = [](const FusedStep& s) {
      std::vector<const ArrayNode*> w;
      if (s.matmul)
        w.push_back(s.matmul);
      else
        for (size_t b = 0; b < s.buffers.size(); ++b)
          if (s.kernel->buffers[b].output) w.push_back(s.buffers[b]);
      return w;
    };
    auto read = [](const FusedStep& s) {
      std::vector<const ArrayNode*> r;
      if (s.matmul) {
        for (const Array& in : s.matmul->inputs) r.push_back(in.node().get());
      } else {
        for (size_t b = 0; b < s.buffers.size(); ++b)
          if (!s.kernel->buffers[b].output) r.push_back(s.buffers[b]);
      }
      return r;
    };
    for (size_t i = 0; i < steps.size(); ++i)
      for (const ArrayNode* w : written(steps[i])) writers[w].push_back(i);
    std::vector<int> state(steps.size(), 0);
    std::vector<FusedStep> out;
    for (size_t root = 0; root < steps.size(); ++root) {
      if (state[root]) continue;
      // Iterative DFS: visit the writers of everything a step reads, then the step.
      std::vector<size_t> todo{root};
      while (!todo.empty()) {
        size_t s = todo.back();
        if (state[s] == 2) {
          todo.pop_back();
          continue;
        }
        if (state[s] == 0) {
          state[s] = 1;
          for (const ArrayNode* r : read(steps[s]))
            if (auto it = writers.find(r); it != writers.end())
              for (size_t w : it->second)
                if (state[w] == 0) todo.push_back(w);
          continue;
        }
        state[s] = 2;
        out.push_back(steps[s]);
        todo.pop_back();
      }
    }
    return out;
  }

  const std::vector<Array>& order_;
  const std::function<bool(const ArrayNode&)>& is_leaf_;
  const std::function<bool(const ArrayNode&, const ArrayNode&)>& same_lane_;
  FusionOptions opts_;
  NodeSet outputs_, forced_, mat_;
  NodeSet pinned_;  // stored whatever else fusion decides (outputs, lane edges, feedback)
  std::unordered_map<const ArrayNode*, std::vector<const ArrayNode*>> consumers_;
  std::unordered_map<const ArrayNode*, const ArrayNode*> epilogue_root_;
  mutable std::unordered_map<const ArrayNode*, size_t> positions_;
};

}  // namespace

std::optional<Scalar> host_scalar(const ArrayNode& n) {
  if (n.op != Op::Constant || !n.shape.empty() || !n.data || !n.data->host_ptr()) return {};
  Scalar c;
  c.dtype = n.dtype;
  scalar::Val v = scalar::load(n.data->host_ptr(), n.dtype, 0);
  c.f = v.f, c.i = v.i;
  return c;
}

bool is_two(const ArrayNode& n) {
  if (n.op == Op::Broadcast || (n.op == Op::Reshape && n.inputs.size() == 1))
    return is_two(*n.inputs[0].node());
  std::optional<Scalar> c =
      n.op == Op::Full ? std::optional<Scalar>(n.params.value) : host_scalar(n);
  return c && c->as_double() == 2.0;
}

std::vector<FusedStep> fuse(
    const std::vector<Array>& order, const std::vector<Array>& outputs,
    const std::function<bool(const ArrayNode&)>& is_leaf,
    const std::function<bool(const ArrayNode&, const ArrayNode&)>& same_lane,
    const FusionOptions& options) {
  return Planner(order, outputs, is_leaf, same_lane, options).run();
}

}  // namespace kiln
