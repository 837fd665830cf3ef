#include "compile/lower.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "backends/registry.h"
#include "compile/graph_walk.h"
#include "compile/kernels.h"

namespace kiln {

namespace {

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
      return stops.count(&n) || n.op == Op::Placeholder || n.op == Op::Constant ||
             (opts_.eager && n.data);
    };
    // Plan inputs in the order `stop` lists them, then any other leaves in graph order.
    for (const Array& s : stop) add_input(s);
    for (const Array& a : topological_order(outputs, is_leaf)) {
      if (info_.count(a.node().get())) continue;
      if (is_leaf(*a.node()))
        add_input(a);
      else
        add_node(*a.node());
    }
    for (const Array& out : outputs) result_.plan.add_output(info_.at(out.node().get()).slot);
    result_.plan.finalize();
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

  LaneSpec lane_spec(const ArrayNode& n) const {
    if (opts_.eager) return {StreamOrigin::Explicit, n.stream.stream};
    return {n.stream.origin, n.stream.stream};
  }

  Device lane_device(int lane) const { return result_.plan.lanes()[lane].stream.device; }

  // Whether data produced by `x` can be read by a task on `lane` without a copy. Traced plans
  // cannot know (Default lanes resolve at call time): they always get a copy task, which the
  // executor turns into an alias when the devices agree.
  bool needs_copy(const ArrayNode& x, const NodeInfo& xi, int lane) const {
    if (!opts_.eager) return xi.input || xi.lane != lane;
    Device to = lane_device(lane);
    if (xi.input) {
      Buffer& b = *x.data;
      return !(b.device() == to || (b.host_ptr() && backend_for(to).uses_host_memory()));
    }
    Device from = lane_device(xi.lane);
    return !(from == to ||
             (backend_for(from).uses_host_memory() && backend_for(to).uses_host_memory()));
  }

  // The slot a task on `lane` reads `x` from, inserting a copy task when needed.
  int read(const Array& x, int lane, std::vector<int>& deps) {
    ArrayNode* n = x.node().get();
    NodeInfo& xi = info_.at(n);
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

  void add_node(ArrayNode& n) {
    int lane = result_.plan.add_lane(lane_spec(n));
    Slot s;
    s.dtype = n.dtype;
    s.elements = shape_size(n.shape);
    s.lane = lane;
    NodeInfo ni;
    ni.lane = lane;
    ni.slot = result_.plan.add_slot(s);

    if (n.op == Op::Matmul) {
      Task t;
      t.kind = TaskKind::Matmul;
      t.name = "matmul";
      t.lane = lane;
      t.slots = {read(n.inputs[0], lane, t.deps), read(n.inputs[1], lane, t.deps), ni.slot};
      matmul_offsets(n, t.matmul);
      ni.producers.push_back(result_.plan.add_task(std::move(t)));
    } else {
      std::vector<Kernel> ks = kernels_for(n);
      for (size_t i = 0; i < ks.size(); ++i) {
        Task t;
        t.kind = TaskKind::Kernel;
        t.name = ks[i].name;
        t.lane = lane;
        // Concatenate's kernel i reads input i; every other kernel reads all inputs in order.
        if (n.op == Op::Concatenate)
          t.slots.push_back(read(n.inputs[i], lane, t.deps));
        else
          for (const Array& in : n.inputs) t.slots.push_back(read(in, lane, t.deps));
        t.slots.push_back(ni.slot);
        t.kernel = std::make_shared<const Kernel>(std::move(ks[i]));
        ni.producers.push_back(result_.plan.add_task(std::move(t)));
      }
    }
    info_[&n] = ni;
  }

  LowerOptions opts_;
  LoweredGraph result_;
  std::unordered_map<const ArrayNode*, NodeInfo> info_;
  std::map<std::pair<const ArrayNode*, int>, std::pair<int, int>> copies_;  // -> (slot, task)
};

}  // namespace

LoweredGraph lower(const std::vector<Array>& outputs, const std::vector<Array>& stop,
                   const LowerOptions& options) {
  return Lowering(options).run(outputs, stop);
}

}  // namespace kiln
