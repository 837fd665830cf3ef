#include "compile/fusion_plan.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <unordered_map>

#include "compile/matmul_operands.h"
#include "compile/rules.h"
#include "graph/element.h"
#include "graph/scalar.h"

namespace kiln {

namespace {

bool is_view_or_elementwise(Op op) { return rules(op).fuses_inline; }

// What the kernel of a group would need: the buffers it loads, the nodes it cannot compute
// inline (they must be stored first), and whether one of its roots is read at another element
// than the one being stored (two such outputs cannot share a pass).
struct RegionNeeds {
  int loads = 0;
  std::vector<const ArrayNode*> materialize;
  bool conflict = false;
};

// Walks a group's region exactly as kernel_emit.cpp emits it: the same input views, a node read
// twice at one view counted once, 0-d host constants as launch scalars (no buffer).
class RegionWalk {
 public:
  RegionWalk(const NodeSet& materialized, const LeafFn& is_leaf)
      : mat_(materialized), is_leaf_(is_leaf) {}

  RegionNeeds run(const FusionGroup& g) {
    const ArrayNode& root = *g.roots[0];
    switch (g.kind) {
      case FusionGroup::Kind::Elementwise:
        here_.insert(g.roots.begin(), g.roots.end());
        for (const ArrayNode* r : g.roots)
          walk(*r, View::identity(static_cast<int>(r->shape.size())));
        break;
      case FusionGroup::Kind::Concatenate: {
        const Array& in = root.inputs[g.piece];
        walk(*in.node(), View::identity(in.ndim()));
        break;
      }
      case FusionGroup::Kind::Reduction: reduction(*g.reduce, root); break;
      case FusionGroup::Kind::Library:
      case FusionGroup::Kind::Primitive: break;  // reads stored inputs only
    }
    return std::move(needs_);
  }

 private:
  void reduction(const ArrayNode& r, const ArrayNode& root) {
    here_.insert(&root);
    const Array& x = r.inputs[0];
    const std::vector<int>& axes = r.params.axes;
    int n = x.ndim(), p = 0;
    View in;  // kept axes first, then reduced ones: the emitter's domain order
    in.domain = n;
    in.coeff.assign(n, std::vector<int64_t>(n, 0));
    in.offset.assign(n, 0);
    for (int j = 0; j < n; ++j)
      if (std::find(axes.begin(), axes.end(), j) == axes.end()) in.coeff[j][p++] = 1;
    for (size_t q = 0; q < axes.size(); ++q) in.coeff[axes[q]][p + q] = 1;
    walk(*x.node(), in);
    if (&root == &r) return;
    epilogue_ = true;
    reduce_ = &r;
    walk(root, epilogue_view(r));
  }

  // The reduced value's coordinates: kept axes follow the domain, reduced ones are gone (or 0).
  static View epilogue_view(const ArrayNode& r) {
    const std::vector<int>& axes = r.params.axes;
    int n = r.inputs[0].ndim();
    View out;
    out.domain = n;
    for (int j = 0, p = 0; j < n; ++j) {
      bool reduced = std::find(axes.begin(), axes.end(), j) != axes.end();
      if (reduced && !r.params.keepdims) continue;
      std::vector<int64_t> row(n, 0);
      if (!reduced) row[p++] = 1;
      out.coeff.push_back(row);
      out.offset.push_back(0);
    }
    return out;
  }

  bool is_buffer(const ArrayNode& n) const {
    return is_leaf_(n) || (mat_.count(&n) && !here_.count(&n));
  }

  void walk(const ArrayNode& n, const View& v) {
    if (!seen_.insert({&n, v, epilogue_}).second) return;
    if (epilogue_ && &n == reduce_) return;
    if (is_buffer(n)) {
      if (!host_scalar(n)) ++needs_.loads;
      return;
    }
    if (here_.count(&n) && !epilogue_ && !v.is_identity()) {
      needs_.conflict = true;
      return;
    }
    // As the emitter does: a node without an emit rule (another reduction's result, a library
    // call) must be stored; one with a rule reads its inputs at the views its rules give (fills,
    // draws and counts read none: they are computed from launch values and the index).
    if (!rules(n.op).emit) {
      needs_.materialize.push_back(&n);
      return;
    }
    if (n.op == Op::Gather) {  // gather_emit's load_gathered: the table is read stored
      const ArrayNode* t = n.inputs[0].node().get();
      const ArrayNode& table = is_buffer(*t) ? *t : gathered_table_source(n);
      if (is_buffer(table))
        ++needs_.loads;
      else
        needs_.materialize.push_back(&table);
    }
    if (n.op == Op::Reshape && !input_view(n, 0, v)) {  // reshape_emit's load_row_major
      if (is_buffer(*n.inputs[0].node()))
        ++needs_.loads;
      else
        needs_.materialize.push_back(n.inputs[0].node().get());
      return;
    }
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (std::optional<View> cv = input_view(n, i, v)) walk(*n.inputs[i].node(), *cv);
  }

  const NodeSet& mat_;
  const LeafFn& is_leaf_;
  NodeSet here_;  // the group's roots: stored here, computed inline
  std::set<std::tuple<const ArrayNode*, View, bool>> seen_;
  bool epilogue_ = false;
  const ArrayNode* reduce_ = nullptr;
  RegionNeeds needs_;
};

class Planner {
 public:
  Planner(const std::vector<Array>& order, const std::vector<Array>& outputs, const LeafFn& is_leaf,
          const SameLaneFn& same_lane, const FusionOptions& opts)
      : order_(order), is_leaf_(is_leaf), same_lane_(same_lane), opts_(opts) {
    for (const Array& o : outputs) outputs_.insert(o.node().get());
    if (opts_.fuse)  // consumers only matter to epilogues
      for (const Array& a : order_)
        for (const Array& in : a.node()->inputs)
          consumers_[in.node().get()].push_back(a.node().get());
  }

  FusionPlan run() {
    if (!opts_.fuse) return one_kernel_per_primitive();
    choose_pinned();
    // A round either plans every group or stores at least one more node, so there are at most
    // as many rounds as nodes (in practice one; a second for an over-full kernel).
    for (;;) {
      while (pin_stored_gather_inputs()) {
      }
      choose_epilogues();
      std::vector<const ArrayNode*> more;
      std::vector<FusionGroup> groups = plan_groups(more);
      if (more.empty()) return {std::move(groups), std::move(mat_)};
      size_t before = pinned_.size();
      pinned_.insert(more.begin(), more.end());
      if (pinned_.size() == before)
        throw Error("internal: fusion planning stored nothing new for an unplannable kernel");
    }
  }

 private:
  bool leaf(const ArrayNode& n) const { return is_leaf_(n); }
  // Counts are inlined from the input's shape, stored only when someone asks for the value
  // itself (a transform may hold the count mean divides by).
  bool inlined_count(const ArrayNode& n) const { return n.op == Op::Count && !outputs_.count(&n); }
  // A gather that is not an output is read through its indices inside the kernels that read
  // it (a Gather value), unless some consumer pins it (another lane, a library call): then it
  // is stored by its library call, as it always is with fusion off.
  bool inline_gather(const ArrayNode& n) const {
    return n.op == Op::Gather && opts_.inline_gathers && !outputs_.count(&n);
  }

  // A gather that is stored after all (a consumer on another lane or a library call pins it, or
  // a kernel cannot read it inline) runs as its library call, which reads its inputs stored:
  // pins them (such as the cast of int32 indices, otherwise computed inside the kernels that
  // read the gather). Whether it pinned anything new.
  bool pin_stored_gather_inputs() {
    bool more = false;
    for (const Array& a : order_) {
      const ArrayNode& n = *a.node();
      if (n.op != Op::Gather || !pinned_.count(&n)) continue;
      for (const Array& in : n.inputs)
        if (!leaf(*in.node()) && pinned_.insert(in.node().get()).second) more = true;
    }
    return more;
  }

  // Fusion off: every primitive is stored and is its own kernel (eager evaluation), but for a
  // transpose that only matmuls read, in place (matmul_operands.h).
  FusionPlan one_kernel_per_primitive() {
    FusionPlan plan;
    plan.materialized.reserve(order_.size());
    plan.groups.reserve(order_.size());
    NodeSet read;  // nodes some step reads from a buffer
    for (const Array& a : order_)
      if (!leaf(*a.node()))
        for (size_t i = 0; i < a.node()->inputs.size(); ++i)
          read.insert(matmul_operand(*a.node(), i, is_leaf_).node);
    for (const Array& a : order_) {
      const ArrayNode* n = a.node().get();
      if (leaf(*n) || inlined_count(*n)) continue;
      bool matmul_reads_through = swaps_last_two(*n) || n->op == Op::Reshape;
      if (matmul_reads_through && !read.count(n) && !outputs_.count(n)) continue;
      plan.materialized.insert(n);
    }
    for (const Array& a : order_) {
      const ArrayNode* n = a.node().get();
      if (!plan.materialized.count(n)) continue;
      if (n->op == Op::Concatenate) {
        for (size_t i = 0; i < n->inputs.size(); ++i)
          plan.groups.push_back({FusionGroup::Kind::Concatenate, {n}, nullptr, i});
      } else if (n->op == Op::Matmul || is_native(n->op)) {
        plan.groups.push_back({FusionGroup::Kind::Library, {n}});
      } else if (opts_.runtime_dims) {  // shapeless: kernels keyed by structure with Dims
        plan.groups.push_back(n->op == Op::Reduce
                                  ? FusionGroup{FusionGroup::Kind::Reduction, {n}, n}
                                  : FusionGroup{FusionGroup::Kind::Elementwise, {n}});
      } else {
        plan.groups.push_back({FusionGroup::Kind::Primitive, {n}});
      }
    }
    return plan;
  }

  // Nodes stored whatever epilogues decide (pinned: outputs, lane edges, matmul inputs, inputs
  // of reshapes that are not views) and nodes that are their own kernel (reductions, library
  // calls, concatenations: stored unless a reduction takes an epilogue).
  void choose_pinned() {
    for (const Array& a : order_) {
      const ArrayNode& n = *a.node();
      if (leaf(n) || inlined_count(n)) continue;
      if (outputs_.count(&n)) pinned_.insert(&n);
      bool library = n.op == Op::Matmul || (is_native(n.op) && !inline_gather(n));
      if (n.op == Op::Reduce || library || n.op == Op::Concatenate) own_kernel_.insert(&n);
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        // A library call reads its operands stored (a matmul reads a transposed one in place,
        // from the transpose's input: matmul_operands.h).
        const ArrayNode& c = library ? *matmul_operand(n, i, is_leaf_).node : *n.inputs[i].node();
        if (leaf(c)) continue;
        if (n.op == Op::Gather && i == 0 && !library) {  // a gathered table is read stored
          const ArrayNode& t = same_lane_(c, n) ? gathered_table_source(n) : c;
          if (!leaf(t)) pinned_.insert(&t);
          continue;
        }
        if (library || !same_lane_(c, n) ||
            (n.op == Op::Reshape && !View::reshape_is_view(n.inputs[0].shape(), n.shape)))
          pinned_.insert(&c);
      }
    }
  }

  // A reduction absorbs the single-consumer element-wise chain of its own shape after it; the
  // chain's end is stored, the reduction and the chain's inside are not.
  void choose_epilogues() {
    mat_ = pinned_;
    mat_.insert(own_kernel_.begin(), own_kernel_.end());
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
        if (!rules(c->op).elementwise || c->shape != r->shape || !same_lane_(*c, *r) ||
            claimed.count(c))
          break;
        chain.insert(c);
        cur = c;
        if (pinned_.count(c)) break;  // a stored node ends the chain
      }
      claimed.insert(chain.begin(), chain.end());
      if (cur == r) continue;
      mat_.erase(r);
      for (const ArrayNode* c : chain) mat_.erase(c);
      mat_.insert(cur);
      epilogue_root_[cur] = r;
    }
  }

  std::vector<FusionGroup> plan_groups(std::vector<const ArrayNode*>& more) {
    std::vector<FusionGroup> groups;
    NodeSet done;  // nodes already stored by a shared kernel
    for (const Array& a : order_) {
      const ArrayNode* n = a.node().get();
      if (leaf(*n) || !mat_.count(n) || done.count(n)) continue;
      for (FusionGroup& g : groups_for(n, done)) {
        RegionNeeds needs = RegionWalk(mat_, is_leaf_).run(g);
        if (needs.conflict) throw Error("internal: a kernel reads its own output elsewhere");
        if (!needs.materialize.empty()) more = std::move(needs.materialize);
        if (more.empty() && needs.loads > opts_.max_buffers) more = split(g);
        if (!more.empty()) return {};
        for (const ArrayNode* r : g.roots) done.insert(r);
        groups.push_back(std::move(g));
      }
    }
    return groups;
  }

  std::vector<FusionGroup> groups_for(const ArrayNode* n, const NodeSet& done) {
    using Kind = FusionGroup::Kind;
    if (n->op == Op::Matmul || is_native(n->op)) return {{Kind::Library, {n}}};
    if (n->op == Op::Concatenate) {
      std::vector<FusionGroup> pieces;
      for (size_t i = 0; i < n->inputs.size(); ++i)
        pieces.push_back({Kind::Concatenate, {n}, nullptr, i});
      return pieces;
    }
    if (n->op == Op::Reduce) return {{Kind::Reduction, {n}, n}};
    if (auto it = epilogue_root_.find(n); it != epilogue_root_.end())
      return {{Kind::Reduction, {n}, it->second}};
    return {elementwise_group(n, done)};
  }

  // Later element-wise outputs of the same shape and lane that do not depend on this one join
  // its kernel, so one pass over the inputs produces them all.
  FusionGroup elementwise_group(const ArrayNode* n, const NodeSet& done) {
    FusionGroup g{FusionGroup::Kind::Elementwise, {n}};
    if (!outputs_.count(n)) return g;
    NodeSet root_set{n};
    for (const Array& a : order_) {
      const ArrayNode* b = a.node().get();
      if (b == n || done.count(b) || !outputs_.count(b) || !mat_.count(b) ||
          !is_view_or_elementwise(b->op) || epilogue_root_.count(b) || b->shape != n->shape ||
          !same_lane_(*b, *n) || !precedes(n, b))
        continue;
      bool independent = true;
      for (const Array& in : b->inputs)
        if (depends_through_buffer(in.node().get(), root_set)) independent = false;
      if (!independent) continue;
      FusionGroup trial = g;
      trial.roots.push_back(b);
      RegionNeeds needs = RegionWalk(mat_, is_leaf_).run(trial);
      if (needs.conflict || !needs.materialize.empty() || needs.loads > opts_.max_buffers) continue;
      g = std::move(trial);
      root_set.insert(b);
    }
    return g;
  }

  // Over the buffer bound: store the largest computed subtree that fits in a kernel of its own
  // (a few splits for a long chain, not one per node), else the group's computed inputs.
  std::vector<const ArrayNode*> split(const FusionGroup& g) const {
    if (const ArrayNode* cut = largest_fitting_subtree(g.roots)) return {cut};
    std::vector<const ArrayNode*> more;
    for (const ArrayNode* r : g.roots) {
      const ArrayNode* start = g.reduce ? g.reduce : r;
      for (const ArrayNode* n : {r, start})
        for (const Array& in : n->inputs)
          if (!leaf(*in.node()) && !mat_.count(in.node().get())) more.push_back(in.node().get());
    }
    if (more.empty())
      throw Error("internal: a single primitive exceeds the kernel buffer bound of " +
                  std::to_string(opts_.max_buffers));
    return more;
  }

  // Among the nodes a kernel computes inline, the one whose own inputs (buffers it would load)
  // are the most while still fitting one kernel.
  const ArrayNode* largest_fitting_subtree(const std::vector<const ArrayNode*>& roots) const {
    std::unordered_map<const ArrayNode*, NodeSet> loads;
    std::vector<const ArrayNode*> inline_nodes;
    std::vector<std::pair<const ArrayNode*, size_t>> stack;
    NodeSet root_set(roots.begin(), roots.end());
    auto buffer = [&](const ArrayNode* c) {
      return leaf(*c) || (mat_.count(c) && !root_set.count(c));
    };
    for (const ArrayNode* r : roots) stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      if (next < n->inputs.size()) {
        const ArrayNode* c = n->inputs[next++].node().get();
        if (!buffer(c) && !loads.count(c)) stack.push_back({c, 0});
        continue;
      }
      NodeSet& mine = loads[n];
      for (const Array& in : n->inputs) {
        const ArrayNode* c = in.node().get();
        if (buffer(c))
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

  bool precedes(const ArrayNode* a, const ArrayNode* b) const { return position(a) < position(b); }
  size_t position(const ArrayNode* n) const {
    if (positions_.empty())
      for (size_t i = 0; i < order_.size(); ++i) positions_[order_[i].node().get()] = i;
    return positions_.at(n);
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

  // Whether computing `x` needs a stored node that depends on `roots`.
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

  const std::vector<Array>& order_;
  const LeafFn& is_leaf_;
  const SameLaneFn& same_lane_;
  FusionOptions opts_;
  NodeSet outputs_;
  NodeSet pinned_;      // stored whatever epilogues decide (planning rounds add to it)
  NodeSet own_kernel_;  // reductions, library calls, concatenations
  NodeSet mat_;         // this round's stored nodes
  std::unordered_map<const ArrayNode*, std::vector<const ArrayNode*>> consumers_;
  std::unordered_map<const ArrayNode*, const ArrayNode*> epilogue_root_;
  mutable std::unordered_map<const ArrayNode*, size_t> positions_;
};

}  // namespace

std::optional<View> input_view(const ArrayNode& n, size_t i, const View& v) {
  return rules(n.op).input_view(n, i, v);
}

std::optional<Scalar> host_scalar(const ArrayNode& n) {
  if (n.op != Op::Constant || !n.shape.empty() || !n.data || !n.data->host_ptr()) return {};
  Scalar c;
  c.dtype = n.dtype;
  scalar::Val v = scalar::load(n.data->host_ptr(), n.dtype, 0);
  c.f = v.f, c.i = v.i;
  return c;
}

bool is_two(const ArrayNode& n) {
  // An evaluated view has dropped its inputs (and has data of its own, read below).
  if ((n.op == Op::Broadcast || n.op == Op::Reshape) && n.inputs.size() == 1)
    return is_two(*n.inputs[0].node());
  std::optional<Scalar> c =
      n.op == Op::Full ? std::optional<Scalar>(n.params.value) : host_scalar(n);
  return c && c->as_double() == 2.0;
}

FusionPlan plan_fusion(const std::vector<Array>& order, const std::vector<Array>& outputs,
                       const LeafFn& is_leaf, const SameLaneFn& same_lane,
                       const FusionOptions& options) {
  return Planner(order, outputs, is_leaf, same_lane, options).run();
}

}  // namespace kiln
