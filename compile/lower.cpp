#include "compile/lower.h"

#include <functional>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "backends/registry.h"
#include "compile/fuse.h"
#include "compile/graph_walk.h"
#include "compile/view.h"
#include "distributed/group.h"
#include "graph/array_node.h"
#include "graph/env.h"
#include "graph/error.h"

namespace kiln {

namespace {

// KILN_GATHER_FUSION=0 keeps every gather a stored library call (FusionOptions::inline_gathers):
// a measurement's baseline. Unset or 1: gathers are read inside the kernels that read them.
bool gather_fusion() {
  std::optional<uint64_t> v = env_count("KILN_GATHER_FUSION", "whether gathers fuse (0 or 1)");
  if (v && *v > 1) throw_error("KILN_GATHER_FUSION is ", *v, "; valid: 0 (off) or 1 (on)");
  return !v || *v == 1;
}

struct NodeInfo {
  int slot = -1;
  int lane = -1;  // -1 for plan inputs
  bool input = false;
  std::vector<int> producers;  // tasks writing the slot
};

class Lowering {
 public:
  explicit Lowering(const LowerOptions& o) : opts_(o) {}

  LoweredGraph run(const std::vector<Array>& outputs, const std::vector<Array>& stop) {
    std::unordered_set<const ArrayNode*> stops;
    for (const Array& s : stop) stops.insert(s.node().get());
    auto is_leaf = [&](const ArrayNode& n) {
      return stops.count(&n) || n.op == Op::Placeholder || n.op == Op::Constant || n.data;
    };
    // Plan inputs in the order `stop` lists them, then any other leaves in graph order.
    for (const Array& s : stop) add_input(s);
    std::function<bool(const ArrayNode&)> leaf = is_leaf;
    std::vector<Array> own_order;
    if (!opts_.order) own_order = topological_order(outputs, leaf);
    const std::vector<Array>& order = opts_.order ? *opts_.order : own_order;
    info_.reserve(order.size());
    std::unordered_set<const ArrayNode*> outs;
    for (const Array& o : outputs) outs.insert(o.node().get());
    // A 0-d host constant that no one returns is only ever read as a launch scalar (fusion
    // inlines it): no plan input, no buffer to bind per call. A collective reads its input as a
    // buffer, 0-d or not (the other library calls take no 0-d inputs).
    std::unordered_set<const ArrayNode*> buffers_read;
    for (const Array& a : order)
      if (is_collective(a.node()->op))
        for (const Array& in : a.node()->inputs) buffers_read.insert(in.node().get());
    for (const Array& a : order)
      if (leaf(*a.node()) && (stops.count(a.node().get()) || outs.count(a.node().get()) ||
                              buffers_read.count(a.node().get()) || !host_scalar(*a.node())))
        add_input(a);
    std::function<bool(const ArrayNode&, const ArrayNode&)> same_lane = [&](const ArrayNode& a,
                                                                            const ArrayNode& b) {
      return lane_spec(a) == lane_spec(b) && node_rank(a) == node_rank(b);
    };
    for (const Array& a : order)
      if (!leaf(*a.node()) && node_rank(*a.node()) >= 0) placed_ = true;
    if (placed_) {  // only then: a plan without placement on ranks never starts the world
      distributed::Group world = distributed::init();
      me_ = world.rank(), ranks_ = world.size();
      result_.plan.part_rank = me_, result_.plan.part_ranks = ranks_;
    }
    FusionOptions fo;
    fo.fuse = opts_.fuse;
    fo.runtime_dims = opts_.runtime_dims;
    fo.inline_gathers = gather_fusion();
    std::vector<FusedStep> steps = fuse(order, outputs, leaf, same_lane, fo);
    result_.plan.reserve(steps.size() + 8, order.size() + 8);  // copies may add a few
    for (FusedStep& step : steps) add_step(step);
    for (const Array& out : outputs) add_output(*out.node());
    result_.plan.finalize();
    if (opts_.state_inputs > 0) {
      int end = static_cast<int>(stop.size());
      result_.plan.plan_donations(end - static_cast<int>(opts_.state_inputs), end);
    }
    return std::move(result_);
  }

 private:
  void add_input(const Array& a) {
    ArrayNode* n = a.node().get();
    if (info_.count(n)) return;
    Slot s;
    s.dtype = a.dtype();
    s.elements = a.size();
    s.lane = -1;
    s.kind = SlotKind::Input;
    s.index = static_cast<int>(result_.plan.inputs.size());
    NodeInfo ni;
    ni.slot = result_.plan.add_slot(s);
    ni.input = true;
    result_.plan.inputs.push_back(ni.slot);
    result_.inputs.push_back(a);
    info_[n] = ni;
  }

  // The plan's lane for `n`: its stream on this rank's device (a rank placement decides which
  // rank runs the node, node_rank, not the lane).
  LaneSpec lane_spec(const ArrayNode& n) const {
    Stream s = n.stream.stream;
    s.device = s.device.local();
    if (opts_.eager) return {StreamOrigin::Explicit, s};
    return {n.stream.origin, s};
  }

  // The rank a node is placed on, -1 for every rank. A traced node's Default stream is the
  // caller's, resolved per call (the executor refuses a rank there).
  int node_rank(const ArrayNode& n) const {
    if (!opts_.eager && n.stream.origin == StreamOrigin::Default) return -1;
    return n.stream.stream.device.rank;
  }

  // --- placement on ranks ------------------------------------------------------------------
  // Every rank lowers the same graph and sees every step: it runs the steps placed on it or on
  // every rank, and for each edge from a step on rank a to a step on another rank (or on every
  // rank) inserts a Send on rank a and a Recv on the reader's rank, where a copy between devices
  // would go. Edges are numbered in the steps' order, the same on every rank: the messages'
  // tags.

  int owner(const ArrayNode* n) const {
    auto it = owners_.find(n);
    return it == owners_.end() ? -1 : it->second;
  }

  static std::vector<const ArrayNode*> step_reads(const FusedStep& step) {
    std::vector<const ArrayNode*> reads;
    if (step.library) {
      for (const Array& in : step.library->inputs) reads.push_back(in.node().get());
    } else {
      for (size_t b = 0; b < step.buffers.size(); ++b)
        if (!step.kernel->buffers[b].output) reads.push_back(step.buffers[b]);
    }
    return reads;
  }

  static std::vector<const ArrayNode*> step_writes(const FusedStep& step) {
    if (step.library) return {step.library};
    std::vector<const ArrayNode*> w;
    for (size_t b = 0; b < step.buffers.size(); ++b)
      if (step.kernel->buffers[b].output) w.push_back(step.buffers[b]);
    return w;
  }

  // Numbers the step's cut edges and, for the values this rank owns, adds their Sends.
  void cut_edges(const FusedStep& step, int rank) {
    for (const ArrayNode* x : step_reads(step)) {
      int from = owner(x);
      if (from < 0 || from == rank) continue;
      for (int to = 0; to < ranks_; ++to) {
        if (to == from || (rank >= 0 && to != rank)) continue;
        auto [it, fresh] = edges_.emplace(std::make_pair(x, to), static_cast<int>(edges_.size()));
        if (fresh && from == me_) add_send(*x, to, it->second);
      }
    }
    if (rank >= 0)
      for (const ArrayNode* n : step_writes(step)) owners_[n] = rank;
  }

  static NativeArgs message(const ArrayNode& x, Op op, int peer, int edge) {
    NativeArgs a;
    a.op = op;
    a.dtype = x.dtype;
    a.n = op == Op::Send ? shape_size(x.shape) : 0;
    a.m = shape_size(x.shape);
    a.peer = peer;
    a.tag = edge + 1;
    return a;
  }

  void add_send(const ArrayNode& x, int to, int edge) {
    const NodeInfo& xi = info_.at(&x);
    Task t;
    t.kind = TaskKind::Native;
    t.name = "send_to_rank" + std::to_string(to);
    t.lane = xi.lane;
    t.slots = {xi.slot};
    t.deps = xi.producers;
    t.native = message(x, Op::Send, to, edge);
    result_.plan.add_task(std::move(t));
  }

  // `n`, computed on another rank, arrives here on `lane` the first time a step reads it.
  void add_recv(const ArrayNode& n, int lane) {
    int from = owner(&n);
    NodeInfo& ni = add_slot(n, lane);
    Task t;
    t.kind = TaskKind::Native;
    t.name = "recv_from_rank" + std::to_string(from);
    t.lane = lane;
    t.slots = {ni.slot};
    t.native = message(n, Op::Recv, from, edges_.at(std::make_pair(&n, me_)));
    ni.producers.push_back(result_.plan.add_task(std::move(t)));
  }

  // An output computed on another rank: a slot nothing writes, and the rank to name.
  void add_output(const ArrayNode& n) {
    int rank = owner(&n);
    if (rank < 0 || rank == me_) {
      result_.plan.add_output(info_.at(&n).slot);
      if (placed_) result_.plan.output_ranks.push_back(-1);
      return;
    }
    Slot s;
    s.dtype = n.dtype;
    s.elements = 0;
    s.lane = -1;
    result_.plan.add_output(result_.plan.add_slot(s));
    result_.plan.output_ranks.push_back(rank);
  }

  Device lane_device(int lane) const { return result_.plan.lanes()[lane].stream.device; }

  // Whether data produced by `x` can be read by a task on `lane` without a copy. Traced plans
  // cannot know (Default lanes resolve at call time): they always get a copy task, which the
  // executor turns into an alias when the devices agree.
  bool needs_copy(const ArrayNode& x, const NodeInfo& xi, int lane) const {
    if (!opts_.eager) return xi.input || xi.lane != lane;
    Device to = lane_device(lane);
    if (xi.input) {  // host memory made for a device (array(v, shape, dtype, opencl)) is copied
      Buffer& b = *x.data;
      if (b.host_ptr()) return !backend_for(to).uses_host_memory();
      return b.device() != to;
    }
    Device from = lane_device(xi.lane);
    return !(from == to ||
             (backend_for(from).uses_host_memory() && backend_for(to).uses_host_memory()));
  }

  // The slot a task on `lane` reads `x` from, inserting a copy task when needed.
  int read(const ArrayNode* n, int lane, std::vector<int>& deps) {
    auto found = info_.find(n);
    if (found == info_.end() && owner(n) >= 0 && owner(n) != me_) {
      add_recv(*n, lane);
      found = info_.find(n);
    }
    if (found == info_.end())
      throw_error("internal: lowering reads ", op_name(n->op), " of shape ", n->shape,
                  " before anything produced it");
    NodeInfo& xi = found->second;
    if (!needs_copy(*n, xi, lane)) {
      deps.insert(deps.end(), xi.producers.begin(), xi.producers.end());
      return xi.slot;
    }
    auto key = std::make_pair(n, lane);
    auto it = copies_.find(key);
    if (it == copies_.end()) {
      Slot s = result_.plan.slots()[xi.slot];
      s.lane = lane;
      s.kind = SlotKind::Temp;
      s.index = -1;
      int dst = result_.plan.add_slot(s);
      Task t;
      t.kind = TaskKind::Copy;
      t.name = "copy";
      t.lane = lane;
      t.slots = {xi.slot, dst};
      t.deps = xi.producers;
      int task = result_.plan.add_task(std::move(t));
      it = copies_.emplace(key, std::make_pair(dst, task)).first;
    }
    deps.push_back(it->second.second);
    return it->second.first;
  }

  // The slot holding `n`'s data, created on n's lane the first time a step writes it.
  int slot_for(const ArrayNode& n) {
    auto it = info_.find(&n);
    if (it != info_.end()) return it->second.slot;
    return add_slot(n, result_.plan.add_lane(lane_spec(n))).slot;
  }

  // A new slot for `n`'s data on `lane`, recorded as where n lives.
  NodeInfo& add_slot(const ArrayNode& n, int lane) {
    Slot s;
    s.dtype = n.dtype;
    s.elements = shape_size(n.shape);
    s.lane = lane;
    NodeInfo& ni = info_[&n];
    ni = NodeInfo{};
    ni.lane = lane;
    ni.slot = result_.plan.add_slot(s);
    return ni;
  }

  void add_step(FusedStep& step) {
    int rank = placed_ ? node_rank(*step.lane_node) : -1;
    if (rank >= ranks_)
      throw_error(
          "placement on ranks: ", primitive_name(step.lane_node->op, step.lane_node->params),
          " is placed on rank ", rank, ", outside the world group of ", ranks_, " ranks");
    if (placed_) cut_edges(step, rank);
    if (rank >= 0 && rank != me_) return;  // another rank's part
    int lane = result_.plan.add_lane(lane_spec(*step.lane_node));
    Task t;
    t.lane = lane;
    std::vector<const ArrayNode*> written;
    if (step.library && is_native(step.library->op)) {
      const ArrayNode& n = *step.library;
      t.kind = TaskKind::Native;
      t.name = primitive_name(n.op, n.params);
      for (const Array& in : n.inputs) t.slots.push_back(read(in.node().get(), lane, t.deps));
      t.slots.push_back(slot_for(n));
      t.native = native_args(n);
      written.push_back(&n);
    } else if (step.library) {
      const ArrayNode& n = *step.library;
      t.kind = TaskKind::Matmul;
      t.name = "matmul";
      // step.reads: an operand transposed in place is its transpose's input (matmul_operands.h),
      // which every backend's matmul reads (MatmulArgs::trans_a / trans_b); a reshaped one is
      // its reshape's input, the same elements in the same order.
      t.slots = {read(step.reads[0], lane, t.deps), read(step.reads[1], lane, t.deps), slot_for(n)};
      matmul_args(n, t.matmul);
      t.matmul.trans_a = step.transposed[0];
      t.matmul.trans_b = step.transposed[1];
      written.push_back(&n);
    } else {
      t.kind = TaskKind::Kernel;
      t.name = step.kernel->name;
      t.kernel = std::move(step.kernel);
      t.binaries = std::move(step.binaries);
      t.params = std::move(step.params);
      t.slots.reserve(step.buffers.size());
      for (size_t b = 0; b < step.buffers.size(); ++b) {
        const ArrayNode& n = *step.buffers[b];
        if (t.kernel->buffers[b].output) {
          t.slots.push_back(slot_for(n));
          written.push_back(&n);
        } else {
          t.slots.push_back(read(&n, lane, t.deps));
        }
      }
    }
    int task = result_.plan.add_task(std::move(t));
    for (const ArrayNode* n : written) info_.at(n).producers.push_back(task);
  }

  // The extents of a native primitive: its input as (outer, n, inner) around the axis.
  static NativeArgs native_args(const ArrayNode& node) {
    NativeArgs a;
    if (is_collective(node.op)) {  // flat: n elements in (none for Recv), m out
      a.op = node.op;
      a.dtype = node.dtype;
      a.n = node.inputs.empty() ? 0 : shape_size(node.inputs[0].shape());
      a.m = shape_size(node.shape);
      a.reduce = node.params.reduce;
      a.group = node.params.group;
      a.peer = node.params.peer;
      return a;
    }
    const Shape& in = node.inputs[0].shape();
    int ax = node.params.axes.at(0);
    a.op = node.op;
    a.dtype = node.inputs[0].dtype();
    a.n = in[ax];
    for (int d = 0; d < ax; ++d) a.outer *= in[d];
    for (size_t d = ax + 1; d < in.size(); ++d) a.inner *= in[d];
    a.scan = node.params.scan;
    a.descending = node.params.descending;
    a.reverse = node.params.reverse;
    a.inclusive = node.params.inclusive;
    if (node.op == Op::Gather || node.op == Op::ScatterAdd) {
      // A gather's shared indices may have any rank: the library call takes them flat.
      size_t index_rank = node.inputs[1].shape().size();
      if (node.op == Op::Gather) {
        a.shared_index = gather_shares_indices(in.size(), index_rank, node.shape.size());
        a.m = a.shared_index ? shape_size(node.inputs[1].shape()) : node.shape[ax];
      } else {
        a.shared_index = index_rank == 1;
        a.m = node.inputs[2].shape()[ax];
      }
    }
    return a;
  }

  // Batch offsets of a matmul (NumPy batch broadcasting resolved into per-batch offsets).
  static void matmul_args(const ArrayNode& node, MatmulArgs& args) {
    const Shape& as = node.inputs[0].shape();
    const Shape& bs = node.inputs[1].shape();
    args.dtype = node.dtype;
    args.m = as[as.size() - 2];
    args.k = as.back();
    args.n = bs.back();
    Shape batch(node.shape.begin(), node.shape.end() - 2);
    Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    View id = View::identity(static_cast<int>(batch.size()));
    IndexMap am = id.broadcast_input(ab, batch).buffer_map(contiguous_strides(ab));
    IndexMap bm = id.broadcast_input(bb, batch).buffer_map(contiguous_strides(bb));
    std::vector<int64_t> idx(batch.size(), 0);
    for (int64_t i = 0; i < shape_size(batch); ++i) {
      int64_t ao = 0, bo = 0;
      for (size_t d = 0; d < batch.size(); ++d) {
        ao += idx[d] * am.strides[d].value;
        bo += idx[d] * bm.strides[d].value;
      }
      args.a_offsets.push_back(ao * args.m * args.k);
      args.b_offsets.push_back(bo * args.k * args.n);
      args.c_offsets.push_back(i * args.m * args.n);
      for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
        if (++idx[d] < batch[d]) break;
        idx[d] = 0;
      }
    }
  }

  LowerOptions opts_;
  LoweredGraph result_;
  bool placed_ = false;  // some node is placed on a rank
  int me_ = 0, ranks_ = 1;
  std::unordered_map<const ArrayNode*, int> owners_;       // nodes placed on a rank
  std::map<std::pair<const ArrayNode*, int>, int> edges_;  // (value, reader rank) -> edge
  std::unordered_map<const ArrayNode*, NodeInfo> info_;
  std::map<std::pair<const ArrayNode*, int>, std::pair<int, int>> copies_;  // -> (slot, task)
};

}  // namespace

LoweredGraph lower(const std::vector<Array>& outputs, const std::vector<Array>& stop,
                   const LowerOptions& options) {
  return Lowering(options).run(outputs, stop);
}

}  // namespace kiln
