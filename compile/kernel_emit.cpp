#include "compile/kernel_emit.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "compile/rules.h"
#include "graph/element.h"

namespace kiln {

namespace {

// Builds one Kernel: the roots of a group (stored) computed from the buffers of stored nodes.
class Emitter {
 public:
  Emitter(const NodeSet& materialized, const LeafFn& is_leaf, bool runtime_dims)
      : mat_(materialized), is_leaf_(is_leaf), runtime_dims_(runtime_dims) {}

  // Element-wise kernel over the shared shape of `roots`.
  FusedStep elementwise(const std::vector<const ArrayNode*>& roots) {
    const Shape& shape = roots[0]->shape;
    k_.domain = dims(shape);
    View id = View::identity(static_cast<int>(shape.size()));
    here_.insert(roots.begin(), roots.end());
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
      if (!reduced) row[p++] = 1;
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
  }

  FusedStep finish(const ArrayNode* lane_node) {
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

  // Reads buffer `n` through `map`; 0-d user constants become launch scalars instead (no
  // buffer, no copy to the device).
  int load(const ArrayNode& n, IndexMap map) {
    if (std::optional<Scalar> c = host_scalar(n)) return constant(*c);
    return load_buffer(n, std::move(map));
  }
  int load_buffer(const ArrayNode& n, IndexMap map) {
    k_.buffers.push_back({n.dtype, false, pm(std::move(map))});
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

  [[noreturn]] void unplanned(const ArrayNode& n, const char* why) const {
    throw Error(std::string("internal: fusion plan left ") + op_name(n.op) + " of shape " +
                to_string(n.shape) + " " + why + " in " +
                (reduce_node_ ? "a reduction" : "an element-wise kernel"));
  }

  int emit_uncached(const ArrayNode& n, const View& v) {
    if (epilogue_ && &n == reduce_node_) return reduce_value_;
    if (is_buffer(n)) return load(n, v.buffer_map(contiguous_strides(n.shape)));
    if (here_.count(&n) && !epilogue_ && !v.is_identity()) unplanned(n, "read at another element");
    int (*rule)(EmitContext&, const ArrayNode&) = rules(n.op).emit;
    if (!rule) unplanned(n, "unstored");
    if (n.op != Op::Reshape) names_.insert(primitive_name(n.op, n.params));
    NodeEmit cx(*this, n, v);
    return rule(cx, n);
  }

  // The EmitContext of node `n` at view `v`: what its rule asks goes to this Emitter.
  class NodeEmit : public EmitContext {
   public:
    NodeEmit(Emitter& e, const ArrayNode& n, const View& v) : e_(e), n_(n), v_(v) {}
    int input(size_t i) override {
      std::optional<View> cv = input_view(n_, i, v_);
      if (!cv) e_.unplanned(n_, "without a view of its input");
      return e_.emit(*n_.inputs[i].node(), *cv);
    }
    bool has_view(size_t i) const override { return input_view(n_, i, v_).has_value(); }
    int load_row_major(size_t i) override {
      const ArrayNode& in = *n_.inputs[i].node();
      if (!e_.is_buffer(in)) e_.unplanned(in, "unstored under a reshape");
      return e_.load_buffer(in, v_.buffer_map(contiguous_strides(n_.shape)));
    }
    int load_gathered(size_t i, int axis, int index) override {
      const ArrayNode* table = n_.inputs[i].node().get();
      // The table's other coordinates are the node's; the gathered one comes from the index,
      // in place of the node's axes that index it (one, or as many as shared indices have).
      size_t index_axes = n_.shape.size() + 1 - table->shape.size();
      View rows = v_;
      rows.coeff.erase(rows.coeff.begin() + axis, rows.coeff.begin() + axis + index_axes);
      rows.offset.erase(rows.offset.begin() + axis, rows.offset.begin() + axis + index_axes);
      rows.coeff.insert(rows.coeff.begin() + axis, std::vector<int64_t>(rows.domain_size(), 0));
      rows.offset.insert(rows.offset.begin() + axis, 0);
      if (!e_.is_buffer(*table)) {  // a broadcast table: its input, read through the view
        const ArrayNode& source = gathered_table_source(n_);
        if (&source != table) rows = rows.broadcast_input(source.shape, table->shape);
        table = &source;
      }
      const ArrayNode& stored = *table;
      if (!e_.is_buffer(stored)) e_.unplanned(stored, "unstored under a gather");
      std::vector<int64_t> strides = contiguous_strides(stored.shape);
      int b = e_.load_buffer(stored, rows.buffer_map(strides));
      Value& g = e_.k_.body[b];
      g.kind = ValueKind::Gather;
      g.a = index;
      g.step = e_.dim(strides[axis]);
      g.extent = e_.dim(stored.shape[axis]);
      return b;
    }
    int add(Value v) override { return e_.add(std::move(v)); }
    int constant(Scalar c) override { return e_.constant(c); }
    int immediate(Scalar c) override { return e_.immediate(c); }
    int32_t launch_param(int64_t word) override {
      e_.params_.push_back(word);
      return static_cast<int32_t>(e_.params_.size()) - 1;
    }
    Dim dim(int64_t v) override { return e_.dim(v); }
    IndexMap runtime_map(IndexMap m) override { return e_.pm(std::move(m)); }
    bool runtime_dims() const override { return e_.runtime_dims_; }
    size_t domain_rank() const override { return e_.k_.domain.size(); }
    const View& view() const override { return v_; }

   private:
    Emitter& e_;
    const ArrayNode& n_;
    const View& v_;
  };

  const NodeSet& mat_;
  const LeafFn& is_leaf_;
  bool runtime_dims_;
  std::vector<int64_t> params_;  // launch values: runtime Dims and launch scalars
  Kernel k_;
  std::vector<const ArrayNode*> nodes_;
  std::set<std::string> names_;
  NodeSet here_;  // the group's roots: stored by this kernel, computed inline
  std::map<std::tuple<const ArrayNode*, View, bool>, int> memo_;
  bool epilogue_ = false;
  const ArrayNode* reduce_node_ = nullptr;
  int reduce_value_ = -1;
};

}  // namespace

FusedStep emit_kernel(const FusionGroup& g, const NodeSet& materialized, const LeafFn& is_leaf,
                      bool runtime_dims) {
  Emitter e(materialized, is_leaf, runtime_dims);
  const ArrayNode& root = *g.roots[0];
  switch (g.kind) {
    case FusionGroup::Kind::Elementwise: return e.elementwise(g.roots);
    case FusionGroup::Kind::Reduction: return e.reduction(*g.reduce, root);
    case FusionGroup::Kind::Concatenate: return e.concatenate_piece(root, g.piece);
    case FusionGroup::Kind::Primitive:
      return root.op == Op::Reduce ? e.reduction(root, root) : e.elementwise({&root});
    case FusionGroup::Kind::Library: break;
  }
  throw Error("internal: emit_kernel called for a library call (matmul or a native primitive)");
}

}  // namespace kiln
