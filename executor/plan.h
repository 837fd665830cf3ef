// Plan: the task DAG that one evaluation or one compiled function lowers to. Tasks are kernels,
// copies, library calls (matmul, native primitives) or host callbacks; slots are the buffers they
// read and write; lanes are symbolic streams that are resolved to real streams at each call. A Plan
// is immutable once finalized and may be run by many threads at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/kernel_ir.h"
#include "graph/device_hooks.h"

namespace kiln {

// Where a lane runs. Default lanes follow the caller's current stream at every call; explicit
// streams and placements were fixed by the user inside the function and are kept.
struct LaneSpec {
  StreamOrigin origin = StreamOrigin::Default;
  Stream stream;  // Explicit: this stream; Placement: default stream of stream.device
  bool operator==(const LaneSpec& o) const { return origin == o.origin && stream == o.stream; }
};

enum class SlotKind { Input, Output, Temp };

struct Slot {
  Dtype dtype;
  int64_t elements = 0;
  int lane = 0;  // the lane whose device holds it (its producer's)
  SlotKind kind = SlotKind::Temp;
  int index = -1;  // position among the plan's inputs or outputs
  size_t bytes() const { return static_cast<size_t>(elements) * dtype.size(); }
};

enum class TaskKind { Kernel, Copy, Matmul, Native, Host };

// The compiled forms of one Kernel, per device, shared by every plan that runs it: eager kernels
// are cached by structure (compile/eager_kernels.h), so a new eager plan skips the backend's
// lookup. Thread-safe.
class KernelBinaries {
 public:
  using Build = std::function<std::shared_ptr<const CompiledKernel>()>;
  std::shared_ptr<const CompiledKernel> get(const Device& device, const Build& build);
  // The compiled form for `device` if there is one already; null otherwise.
  std::shared_ptr<const CompiledKernel> find(const Device& device);

 private:
  std::mutex mu_;
  std::vector<std::pair<Device, std::shared_ptr<const CompiledKernel>>> by_device_;
};

struct Task {
  TaskKind kind = TaskKind::Host;
  std::string name;
  int lane = 0;
  std::vector<int> slots;  // Kernel: one per kernel buffer; Copy: {src, dst}; Matmul: {a, b, c}
  std::shared_ptr<const Kernel> kernel;
  std::shared_ptr<KernelBinaries> binaries;  // optional: compiled forms shared across plans
  std::vector<int64_t> params;               // Kernel launch params (runtime Dims, scalars)
  MatmulArgs matmul;                         // shape and offsets; buffers are bound per call
  NativeArgs native;  // Native: the primitive and its extents; slots in NativeArgs' buffer order
  std::function<void()> host;  // Host tasks (tests, benchmarks, user callbacks)
  std::vector<int> deps;       // tasks that must complete first
  // Whether slots[b] is written (a kernel's output, a copy's destination, a matmul's result;
  // a cut edge's Send only reads).
  bool writes(size_t b) const {
    return (kind == TaskKind::Kernel && kernel->buffers[b].output) ||
           (kind == TaskKind::Copy && b == 1) || (kind == TaskKind::Matmul && b == 2) ||
           (kind == TaskKind::Native && b + 1 == slots.size() &&
            !(native.op == Op::Send && native.tag > 0));
  }
};

// An output written into the memory of an input (buffer donation, as JAX's donate_argnums and
// MLX's in-place reuse): chosen at plan time where it is safe (executor/donation.h), done at
// call time only when nothing outside the call can still see the input's buffer.
struct Donation {
  int input = -1;   // position in Plan::inputs
  int via = -1;     // the slot `task` reads the input through: the input's, or a copy's of it
  int output = -1;  // the slot that takes the input's buffer
  int task = -1;    // the kernel writing `output`
};

// Lists of task or slot indices per task or slot, stored flat: two allocations per plan, not one
// per task (eager plans are built and dropped at every evaluation).
struct IndexLists {
  std::vector<int> start;  // list i is items[start[i], start[i + 1])
  std::vector<int> items;
  std::span<const int> operator[](size_t i) const {
    return {items.data() + start[i], items.data() + start[i + 1]};
  }
  // From (list, item) pairs; items keep the order the pairs give them.
  static IndexLists from_pairs(size_t lists, const std::vector<std::pair<int, int>>& pairs);
};

class Executor;
struct PlanRuntime;  // executor-owned caches (compiled kernels, flow-graph instances)

class Plan {
 public:
  Plan();
  ~Plan();
  Plan(Plan&&) noexcept;
  Plan& operator=(Plan&&) noexcept;

  void reserve(size_t tasks, size_t slots);
  int add_lane(const LaneSpec& lane);  // returns the existing index for an equal spec
  int add_slot(const Slot& slot);
  int add_task(Task task);
  // Appends `slot` to outputs; a Temp slot becomes an Output slot.
  void add_output(int slot);
  // Inputs and outputs, in call order. An output may also be an input (identity).
  std::vector<int> inputs, outputs;
  // Per output, the rank that computes it when that is another rank (placement on ranks: its
  // slot is never written here, and reading it raises naming the rank); -1 or empty: this one.
  std::vector<int> output_ranks;
  // A plan placed on ranks is one rank's part: part_rank of a world of part_ranks (-1, 0: not).
  int part_rank = -1, part_ranks = 0;

  // Computes the execution order and successors; call once after building.
  void finalize();

  const std::vector<LaneSpec>& lanes() const { return lanes_; }
  const std::vector<Slot>& slots() const { return slots_; }
  const std::vector<Task>& tasks() const { return tasks_; }
  const std::vector<int>& order() const { return order_; }  // a topological order of tasks
  // Tasks on the longest dependency path: equal to tasks().size() when the plan is a chain, which
  // no scheduler can run faster than one task after another.
  int critical_path() const { return critical_path_; }
  // The tasks of order() that touch slots: all a call needs to visit to bind buffers (a plan of
  // host callbacks binds nothing, whatever its size).
  const std::vector<int>& slot_tasks() const { return slot_tasks_; }
  // The collective tasks (Native tasks of an Op::AllReduce .. Recv): every rank of a group
  // issues its collectives in this order (distributed/engine.h). In task order when that is a
  // topological order (lowering adds tasks after their producers): the ranks of a plan placed
  // on ranks lower different tasks from one graph, and the order of the tasks they share must
  // not depend on the others; otherwise in order().
  const std::vector<int>& collectives() const { return collectives_; }
  std::span<const int> successors(int task) const { return succ_[task]; }
  std::span<const int> producers(int slot) const { return producers_[slot]; }
  // The plan input whose memory `slot` holds: the input slot itself, or the destination of a copy
  // of it (which the executor may turn into an alias); -1 otherwise.
  int input_of(int slot) const;
  // Temporaries that never live at the same time share storage: storage(slot) is its group
  // (-1 for inputs, outputs and copies), storage_bytes(group) the group's size.
  int storage(int slot) const { return storage_.empty() ? -1 : storage_[slot]; }
  size_t storage_bytes(int group) const { return storage_bytes_[group]; }
  size_t storage_groups() const { return storage_bytes_.size(); }
  // Outputs that may take over an input's buffer; empty until plan_donations() runs.
  const std::vector<Donation>& donations() const { return donations_; }
  // Chooses donations for the inputs [first, end) (compile: the captured state; call arguments
  // and eager inputs are the user's arrays). After finalize() (executor/donation.cpp).
  void plan_donations(int first, int end);
  std::string str() const;

 private:
  friend struct PlanRuntimeAccess;  // the executor's caches (executor/executor.cpp) only
  std::vector<LaneSpec> lanes_;
  std::vector<Slot> slots_;
  std::vector<Task> tasks_;
  std::vector<int> order_;
  int critical_path_ = 0;
  std::vector<int> slot_tasks_;
  std::vector<int> collectives_;
  IndexLists succ_;
  IndexLists producers_;
  std::vector<int> storage_;
  std::vector<size_t> storage_bytes_;
  std::vector<Donation> donations_;
  void assign_storage();
  void mark_in_place();
  std::unique_ptr<PlanRuntime> runtime_;  // executor-owned; mutable through const Plans
};

}  // namespace kiln
