#include "executor/executor.h"

#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include "backends/registry.h"
#include "backends/row_passes.h"
#include "distributed/engine.h"
#include "distributed/group.h"
#include "executor/cancel.h"
#include "executor/in_flight.h"
#include "executor/inline_policy.h"
#include "executor/lane_worker.h"
#include "executor/lanes.h"
#include "executor/profile_record.h"
#include "executor/runtime.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln {

namespace flow = oneapi::tbb::flow;

// Everything one call needs; lives on the caller's stack for the duration of the call.
struct CallState {
  const Plan* plan = nullptr;
  const Binding* binding = nullptr;
  std::vector<Lane*> lanes;                      // per plan lane
  std::vector<std::shared_ptr<Buffer>> buffers;  // per slot
  std::vector<std::shared_ptr<Buffer>> storage;  // per shared-storage group of temps
  std::vector<bool> aliased_copy;                // per task: a copy that became an alias
  const std::vector<const CompiledKernel*>* task_kernels = nullptr;  // per task (the binding's)
  std::vector<std::exception_ptr> errors;                            // per task
  std::atomic<bool> failed{false};
  bool profiling = false;
  std::shared_ptr<CancelToken> cancel;  // the caller's (a job's), checked before every task
  std::vector<uint64_t> positions;      // per collective task: its place in its group's order
  // pending_work(): the call's record while it runs, and each task's phase.
  InFlightCall record;
  bool registered = false;
  std::unique_ptr<std::atomic<TaskPhase>[]> phases;
  size_t phases_capacity = 0;
};

namespace {

void mark(CallState& st, int t, TaskPhase p) { st.phases[t].store(p, std::memory_order_relaxed); }

// Registers the call for pending_work() (and starts the watchdog with the first call).
void register_call(CallState& st) {
  size_t n = st.plan->tasks().size();
  if (st.phases_capacity < n) {
    st.phases = std::make_unique<std::atomic<TaskPhase>[]>(n);
    st.phases_capacity = n;
  }
  for (size_t t = 0; t < n; ++t) st.phases[t].store(TaskPhase::Waiting, std::memory_order_relaxed);
  st.record.plan = st.plan;
  st.record.lanes = &st.lanes;
  st.record.phases = st.phases.get();
  start_watchdog();
  call_started(st.record);
  st.registered = true;
}

void unregister_call(CallState& st) {
  if (!st.registered) return;
  call_ended(st.record);
  st.registered = false;
}

}  // namespace

namespace {

bool dependency_failed(CallState& st, int t) {
  if (!st.failed.load(std::memory_order_acquire)) return false;
  for (int d : st.plan->tasks()[t].deps)
    if (st.errors[d]) {
      st.errors[t] = st.errors[d];
      return true;
    }
  return false;
}

void record_error(CallState& st, int t, std::exception_ptr e) {
  st.errors[t] = e;
  st.failed.store(true, std::memory_order_release);
}

void record_profile(CallState& st, int t, int64_t start) {
  const Task& task = st.plan->tasks()[t];
  Lane* lane = st.lanes[task.lane];
  profile_record(
      TaskEvent{task.name, lane->stream.device, lane->stream, start, profile_now_ns(), 0});
}

// A cancelled or overdue caller stops at the next task boundary: the task fails (and with it
// everything that depends on it) with the reason.
bool stopped(CallState& st, int t) {
  std::string why;
  if (!st.cancel || !st.cancel->stop_requested(&why)) return false;
  record_error(st, t, std::make_exception_ptr(Error(why)));
  return true;
}

// A queue on `d` for copies out of its memory into a lane that runs inline (a cpu lane reading an
// opencl result): the device transfers asynchronously and completes an event, where the inline
// lane's own copy would block a TBB worker on a blocking read. One per device, for the process.
Queue& copy_out_queue(const Device& d) {
  struct Queues {
    std::mutex mu;
    std::map<Device, std::unique_ptr<Queue>> queues;
  };
  static Immortal<Queues> all;
  std::lock_guard<std::mutex> lock(all->mu);
  auto& q = all->queues[d];
  if (!q) q = backend_for(d).create_queue(d.index);
  return *q;
}

// Per-thread KernelArgs reused across launches (their vectors keep their capacity); a depth
// counter gives a launch started while another runs on this thread (a TBB worker that picks up
// a flow-graph task inside a kernel's parallel loop) its own.
struct ArgsLease {
  struct Pool {
    std::vector<std::unique_ptr<KernelArgs>> args;
    size_t depth = 0;
  };
  static Pool& pool() {
    thread_local Pool p;
    return p;
  }
  KernelArgs* args;
  ArgsLease() {
    Pool& p = pool();
    if (p.depth == p.args.size()) p.args.push_back(std::make_unique<KernelArgs>());
    args = p.args[p.depth++].get();
  }
  ~ArgsLease() {
    args->buffers.clear();
    args->params.clear();
    pool().depth--;
  }
  ArgsLease(const ArgsLease&) = delete;
  ArgsLease& operator=(const ArgsLease&) = delete;
};

bool is_collective_task(const Task& task) {
  return task.kind == TaskKind::Native && is_collective(task.native.op);
}

// A collective that will not run still takes its place in the group's order (the lane would
// wait for it forever otherwise).
void skip_collective(CallState& st, int t) {
  const Task& task = st.plan->tasks()[t];
  if (!is_collective_task(task)) return;
  std::string why = "its input failed";
  try {
    if (st.errors[t]) std::rethrow_exception(st.errors[t]);
  } catch (const std::exception& e) {
    why = e.what();
  } catch (...) {
  }
  distributed::skip_position(task.native, st.positions[t], why);
}

// Starts task t. Returns an event for device work still in flight, or null when done.
EventPtr start_task_now(CallState& st, int t) {
  if (dependency_failed(st, t) || stopped(st, t)) {
    skip_collective(st, t);
    return nullptr;
  }
  const Task& task = st.plan->tasks()[t];
  try {
    switch (task.kind) {
      case TaskKind::Host:
        if (task.host) task.host();
        return nullptr;
      case TaskKind::Kernel: {
        if (!(*st.task_kernels)[t]) std::rethrow_exception(st.binding->build_errors[t]);
        ArgsLease lease;
        KernelArgs& args = *lease.args;
        for (int s : task.slots) args.buffers.push_back(st.buffers[s].get());
        args.params.assign(task.params.begin(), task.params.end());
        Queue& q = *st.lanes[task.lane]->queue;
        const CompiledKernel& ck = *(*st.task_kernels)[t];
        if (task.kernel->is_rows())
          if (const PassKernels* p = as_passes(ck))
            return enqueue_passes(*p, args, [&](const CompiledKernel& c, const KernelArgs& a) {
              return q.enqueue_kernel(c, a);
            });
        return q.enqueue_kernel(ck, args);
      }
      case TaskKind::Copy: {
        if (st.aliased_copy[t]) return nullptr;
        Buffer& src = *st.buffers[task.slots[0]];
        Buffer& dst = *st.buffers[task.slots[1]];
        Lane& lane = *st.lanes[task.lane];
        Queue* q = lane.queue.get();
        if (lane.inline_queue && !src.host_ptr() && src.device() != lane.stream.device)
          q = &copy_out_queue(src.device());
        return q->enqueue_copy(src, dst, st.plan->slots()[task.slots[1]].bytes());
      }
      case TaskKind::Matmul: {
        MatmulArgs args = task.matmul;
        args.a = st.buffers[task.slots[0]].get();
        args.b = st.buffers[task.slots[1]].get();
        args.c = st.buffers[task.slots[2]].get();
        return st.lanes[task.lane]->queue->enqueue_matmul(args);
      }
      case TaskKind::Native: {
        NativeArgs args = task.native;
        args.buffers.clear();
        for (int s : task.slots) args.buffers.push_back(st.buffers[s].get());
        // Collectives run on their group's communication lane, not the device's queue.
        if (is_collective(args.op)) return distributed::start_collective(args, st.positions[t]);
        return st.lanes[task.lane]->queue->enqueue_native(args);
      }
    }
  } catch (...) {
    record_error(st, t, std::current_exception());
  }
  return nullptr;
}

EventPtr start_task(CallState& st, int t) {
  mark(st, t, TaskPhase::Starting);
  EventPtr ev = start_task_now(st, t);
  mark(st, t, ev ? TaskPhase::Queued : TaskPhase::Done);
  return ev;
}

// Runs task t to completion on the calling thread (the direct path).
void run_task_blocking(CallState& st, int t) {
  int64_t t0 = st.profiling ? profile_now_ns() : 0;
  EventPtr ev = start_task(st, t);
  if (ev) {
    BlockedScope blocked("a task", st.record.id);
    try {
      ev->wait();
    } catch (...) {
      record_error(st, t, std::current_exception());
    }
    mark(st, t, TaskPhase::Done);
  }
  // A copy the binding turned into an alias did no work: not a profiled task.
  if (st.profiling && !st.aliased_copy[t]) record_profile(st, t, t0);
}

// A plan whose tasks all run on one device queue: the queue keeps submission order, so every
// task is enqueued at once, in a topological order, and the calling thread waits for the events
// at the end (no flow graph, no per-task completion round trip; kernels pipeline on the device).
// A host task waits for the device work before it. A device error reaches the tasks that
// consumed the failed task's output. Profiled end times are when the caller saw completion.
void run_in_order(CallState& st) {
  const Plan& plan = *st.plan;
  std::vector<std::pair<int, EventPtr>> pending;
  std::vector<int64_t> started(plan.tasks().size(), 0);
  auto wait_pending = [&] {
    for (auto& [t, ev] : pending) {
      BlockedScope blocked("a task", st.record.id);
      try {
        ev->wait();
      } catch (...) {
        record_error(st, t, std::current_exception());
      }
      mark(st, t, TaskPhase::Done);
      if (st.profiling) record_profile(st, t, started[t]);
    }
    pending.clear();
  };
  for (int t : plan.order()) {
    if (plan.tasks()[t].kind == TaskKind::Host) wait_pending();
    started[t] = st.profiling ? profile_now_ns() : 0;
    if (EventPtr ev = start_task(st, t))
      pending.emplace_back(t, std::move(ev));
    else if (st.profiling && !st.aliased_copy[t])
      record_profile(st, t, started[t]);
  }
  wait_pending();
  if (!st.failed.load()) return;
  for (int t : plan.order())
    for (int d : plan.tasks()[t].deps)
      if (!st.errors[t] && st.errors[d]) st.errors[t] = st.errors[d];
}

}  // namespace

// One flow graph for one plan and one inline/async lane pattern. Re-run per call; one call at a
// time (the pool hands out instances).
struct GraphInstance {
  flow::graph g;
  std::vector<std::unique_ptr<flow::graph_node>> nodes;
  std::vector<flow::receiver<flow::continue_msg>*> roots;
  CallState* state = nullptr;

  GraphInstance(const Plan& plan, const std::vector<bool>& inline_lanes) {
    int n = static_cast<int>(plan.tasks().size());
    std::vector<flow::receiver<flow::continue_msg>*> in(n);
    std::vector<flow::sender<flow::continue_msg>*> out(n);
    for (int t = 0; t < n; ++t) {
      const Task& task = plan.tasks()[t];
      // Copies may complete asynchronously even on an inline lane (copy_out_queue), and
      // collectives always do (their group's communication lane completes them).
      if (inline_lanes[task.lane] && task.kind != TaskKind::Copy && !is_collective_task(task)) {
        auto node = std::make_unique<flow::continue_node<flow::continue_msg>>(
            // The host callable is copied into the node so the hot loop touches no Task.
            g, [this, t, is_host = task.kind == TaskKind::Host,
                host = task.host](const flow::continue_msg&) {
              CallState& st = *state;
              // Fast path for host tasks: the graph's edges already order this load after any
              // failure recorded by a predecessor, so a relaxed load is enough.
              if (is_host && !st.profiling && !st.cancel &&
                  !st.failed.load(std::memory_order_relaxed)) {
                mark(st, t, TaskPhase::Starting);
                try {
                  if (host) host();
                } catch (...) {
                  record_error(st, t, std::current_exception());
                }
                mark(st, t, TaskPhase::Done);
                return;
              }
              int64_t t0 = st.profiling ? profile_now_ns() : 0;
              start_task(st, t);
              if (st.profiling && !st.aliased_copy[t]) record_profile(st, t, t0);
            });
        in[t] = node.get();
        out[t] = node.get();
        nodes.push_back(std::move(node));
      } else {
        using Async = flow::async_node<std::pair<EventPtr, int64_t>, flow::continue_msg>;
        auto starter = std::make_unique<flow::continue_node<std::pair<EventPtr, int64_t>>>(
            g, [this, t](const flow::continue_msg&) {
              int64_t t0 = state->profiling ? profile_now_ns() : 0;
              return std::make_pair(start_task(*state, t), t0);
            });
        auto waiter = std::make_unique<Async>(
            g, flow::unlimited,
            [this, t](const std::pair<EventPtr, int64_t>& ev, Async::gateway_type& gw) {
              CallState* st = state;
              if (!ev.first) {
                if (st->profiling && !st->aliased_copy[t]) record_profile(*st, t, ev.second);
                gw.try_put(flow::continue_msg());
                return;
              }
              gw.reserve_wait();
              int64_t t0 = ev.second;
              ev.first->on_complete([st, t, t0, &gw](std::exception_ptr e) {
                if (e) record_error(*st, t, e);
                mark(*st, t, TaskPhase::Done);
                if (st->profiling) record_profile(*st, t, t0);
                gw.try_put(flow::continue_msg());
                gw.release_wait();
              });
            });
        flow::make_edge(*starter, *waiter);
        in[t] = starter.get();
        out[t] = &flow::output_port<0>(*waiter);  // async_node takes successors on its port
        nodes.push_back(std::move(starter));
        nodes.push_back(std::move(waiter));
      }
    }
    for (int t = 0; t < n; ++t) {
      for (int s : plan.successors(t)) flow::make_edge(*out[t], *in[s]);
      if (plan.tasks()[t].deps.empty()) roots.push_back(in[t]);
    }
  }

  void run(CallState& st) {
    state = &st;
    for (auto* r : roots) r->try_put(flow::continue_msg());
    BlockedScope blocked("its call's flow graph", st.record.id);
    g.wait_for_all();
    state = nullptr;
  }
};

PlanRuntime::PlanRuntime() = default;
PlanRuntime::~PlanRuntime() = default;

// The one way to a plan's executor-owned caches (Plan keeps them private).
struct PlanRuntimeAccess {
  static PlanRuntime& of(const Plan& plan) { return *plan.runtime_; }
};

namespace {

// Whether a lane's kernels can use `buf` in place (a copy task then becomes an alias). Host
// backends read any host memory. A device backend needs its own memory: a HostBuffer carries the
// device of the array it was made for (array(0.5f, device("vulkan"))) but is still host memory.
bool usable_on(Buffer& buf, const Lane& lane) {
  if (buf.host_ptr() != nullptr && lane.backend->uses_host_memory()) return true;
  return buf.device() == lane.stream.device && dynamic_cast<HostBuffer*>(&buf) == nullptr;
}

// Compiles the kernel of every kernel task not compiled yet for its lane's device into `rt`,
// and points the binding at them. Several kernels compile concurrently on the TBB arena (a cold
// LLVM compile is milliseconds); the work is isolated so a thread waiting here, with the plan's
// lock held, never picks up an unrelated task that might want the same lock.
void compile_kernels(const Plan& plan, const std::vector<Lane*>& lanes, PlanRuntime& rt,
                     Binding& b) {
  using Compiled = std::vector<std::shared_ptr<const CompiledKernel>>;
  size_t n = plan.tasks().size();
  b.kernels.assign(n, nullptr);
  b.build_errors.assign(n, nullptr);
  // Per task, its device's compiled kernels in `rt` (one map lookup per run of tasks on one
  // lane: an eager plan has a task per op). Kernels compiled before (an eager kernel shared by
  // structure) are taken here; only the others go to the parallel build.
  std::vector<Compiled*> compiled(n, nullptr);
  const Lane* last = nullptr;
  Compiled* vec = nullptr;
  std::vector<size_t> todo;
  for (size_t t = 0; t < n; ++t) {
    const Task& task = plan.tasks()[t];
    if (task.kind != TaskKind::Kernel) continue;
    const Lane* lane = lanes[task.lane];
    if (lane != last) {
      last = lane;
      vec = &rt.kernels[lane->stream.device];
      if (vec->size() != n) vec->resize(n);
    }
    compiled[t] = vec;
    auto& k = (*vec)[t];
    if (!k && task.binaries) k = task.binaries->find(lane->stream.device);
    if (!k) todo.push_back(t);
  }
  auto build = [&](size_t t) {
    const Task& task = plan.tasks()[t];
    Lane& lane = *lanes[task.lane];
    try {
      auto compile = [&]() -> std::shared_ptr<const CompiledKernel> {
        Backend& be = *lane.backend;
        int device = lane.stream.device.index;
        if (task.kernel->is_rows() && !be.runs_row_kernels())  // each pass on its own
          return compile_passes(*task.kernel,
                                [&](const Kernel& k) { return be.compile(device, k); });
        return be.compile(device, *task.kernel);
      };
      (*compiled[t])[t] =
          task.binaries ? task.binaries->get(lane.stream.device, compile) : compile();
    } catch (...) {
      b.build_errors[t] = std::current_exception();
    }
  };
  if (todo.size() == 1) {
    build(todo[0]);
  } else if (todo.size() > 1) {
    oneapi::tbb::this_task_arena::isolate([&] {
      oneapi::tbb::parallel_for(size_t{0}, todo.size(), [&](size_t i) { build(todo[i]); });
    });
  }
  for (size_t t = 0; t < n; ++t)
    if (compiled[t] && !b.build_errors[t]) b.kernels[t] = (*compiled[t])[t].get();
}

// The binding of `plan` to these lanes, built on first use: lanes sorted for the order locks
// and every kernel task compiled for its lane's device (backends cache by content hash).
// A kernel that fails to build fails its task (and what depends on it), not the whole call;
// such a binding is not cached, so the next call tries again.
std::shared_ptr<const Binding> binding_for(const Plan& plan, const std::vector<Lane*>& lanes) {
  PlanRuntime& rt = PlanRuntimeAccess::of(plan);
  std::lock_guard<std::mutex> lock(rt.mu);
  for (const auto& b : rt.bindings)
    if (b->lanes == lanes) return b;
  auto b = std::make_shared<Binding>();
  b->lanes = lanes;
  for (Lane* l : lanes) {
    b->inline_lanes.push_back(l->inline_queue);
    b->all_inline = b->all_inline && l->inline_queue;
  }
  b->distinct = lanes;
  std::sort(b->distinct.begin(), b->distinct.end(),
            [](Lane* x, Lane* y) { return x->stream < y->stream; });
  b->distinct.erase(std::unique(b->distinct.begin(), b->distinct.end()), b->distinct.end());
  compile_kernels(plan, lanes, rt, *b);
  bool failed = std::any_of(b->build_errors.begin(), b->build_errors.end(),
                            [](const std::exception_ptr& e) { return e != nullptr; });
  if (!failed) rt.bindings.push_back(b);
  return b;
}

// Per-thread CallStates reused across calls (their vectors keep their capacity); a depth counter
// keeps a call made from inside a task on its own state.
struct CallStateLease {
  struct Pool {
    std::vector<std::unique_ptr<CallState>> states;
    size_t depth = 0;
  };
  static Pool& pool() {
    thread_local Pool p;
    return p;
  }
  CallState* st;
  CallStateLease() {
    Pool& p = pool();
    if (p.depth == p.states.size()) p.states.push_back(std::make_unique<CallState>());
    st = p.states[p.depth++].get();
    st->failed.store(false, std::memory_order_relaxed);
  }
  ~CallStateLease() {
    st->buffers.clear();  // release this call's memory now
    st->storage.clear();
    st->errors.clear();
    st->cancel.reset();
    pool().depth--;
  }
};

std::atomic<size_t> g_donated_bytes{0};

// Per plan input, whether the call may write into its buffer: the plan chose an output for it
// and this call's `inputs` hold the only reference (the caller dropped its arrays: nobody else
// can read the buffer again, so writing into it changes nothing anyone sees).
std::vector<bool> donatable(const Plan& plan, const std::vector<std::shared_ptr<Buffer>>& inputs) {
  std::vector<bool> d(inputs.size(), false);
  for (const Donation& x : plan.donations())
    d[x.input] = inputs[x.input] && inputs[x.input].use_count() == 1 &&
                 inputs[x.input]->bytes() == plan.slots()[x.output].bytes();
  return d;
}

// Binds the outputs task t writes into donated inputs' buffers, where the input reached the
// kernel as its own memory (its copy became an alias), before bind_buffers allocates them.
void bind_donations(const Plan& plan, CallState& st, int t, const std::vector<bool>& donate) {
  for (const Donation& d : plan.donations()) {
    if (d.task != t || !donate[d.input]) continue;
    const auto& in = st.buffers[plan.inputs[d.input]];
    if (st.buffers[d.via] != in || st.buffers[d.output]) continue;
    st.buffers[d.output] = in;
    g_donated_bytes.fetch_add(in->bytes(), std::memory_order_relaxed);
  }
}

void bind_buffers(const Plan& plan, CallState& st,
                  const std::vector<std::shared_ptr<Buffer>>& inputs) {
  const auto& slots = plan.slots();
  std::vector<bool> donate;  // decided before this call adds references of its own
  if (!plan.donations().empty()) donate = donatable(plan, inputs);
  st.buffers.assign(slots.size(), nullptr);
  st.storage.assign(plan.storage_groups(), nullptr);
  st.aliased_copy.assign(plan.tasks().size(), false);
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    const Slot& s = slots[plan.inputs[i]];
    if (!inputs[i] || inputs[i]->bytes() < s.bytes())
      throw_error("plan input ", i, " needs ", s.bytes(), " bytes of ", s.dtype, ", got ",
                  inputs[i] ? inputs[i]->bytes() : 0);
    st.buffers[plan.inputs[i]] = inputs[i];
  }
  // In execution order, so a copy's source is bound before the copy decides to alias it.
  for (int t : plan.slot_tasks()) {
    const Task& task = plan.tasks()[t];
    Lane& lane = *st.lanes[task.lane];
    if (task.kind == TaskKind::Copy) {
      auto& src = st.buffers[task.slots[0]];
      auto& dst = st.buffers[task.slots[1]];
      if (!src) throw_error("plan: copy task ", t, " reads an unbound slot");
      if (!dst && usable_on(*src, lane)) {
        dst = src;
        st.aliased_copy[t] = true;
        continue;
      }
    }
    if (!donate.empty() && task.kind == TaskKind::Kernel) bind_donations(plan, st, t, donate);
    for (int sl : task.slots) {
      if (st.buffers[sl]) continue;
      const Slot& s = slots[sl];
      Lane& home = *st.lanes[s.lane];
      int group = plan.storage(sl);
      if (group < 0) {
        st.buffers[sl] = home.backend->allocate(home.stream.device.index, s.bytes());
        continue;
      }
      auto& shared = st.storage[group];
      if (!shared)
        shared = home.backend->allocate(home.stream.device.index, plan.storage_bytes(group));
      st.buffers[sl] = shared;
    }
  }
}

std::unique_ptr<GraphInstance> acquire_graph(const Plan& plan, const std::vector<bool>& key) {
  PlanRuntime& rt = PlanRuntimeAccess::of(plan);
  {
    std::lock_guard<std::mutex> lock(rt.mu);
    auto& idle = rt.idle[key];
    if (!idle.empty()) {
      auto g = std::move(idle.back());
      idle.pop_back();
      return g;
    }
  }
  return std::make_unique<GraphInstance>(plan, key);
}

void release_graph(const Plan& plan, const std::vector<bool>& key,
                   std::unique_ptr<GraphInstance> g) {
  PlanRuntime& rt = PlanRuntimeAccess::of(plan);
  std::lock_guard<std::mutex> lock(rt.mu);
  rt.idle[key].push_back(std::move(g));
}

}  // namespace

namespace {

// A plan's lanes resolved for one call, its binding, and what the caller's thread contributes
// (cancel token, profiling), decided on the calling thread even when the plan runs elsewhere.
struct Call {
  std::shared_ptr<const Binding> binding;  // its lanes are this call's, per plan lane
  std::shared_ptr<CancelToken> cancel;
  bool profiling = false;
};

Call resolve_call(const Plan& plan, const std::vector<std::shared_ptr<Buffer>>& inputs) {
  if (inputs.size() != plan.inputs.size())
    throw_error("plan takes ", plan.inputs.size(), " inputs, got ", inputs.size());
  Call c;
  Stream caller = current_stream();
  thread_local std::vector<Lane*> lanes;  // scratch: the binding keeps its own copy
  lanes.clear();
  for (const LaneSpec& spec : plan.lanes()) lanes.push_back(&lane_for(resolve_lane(spec, caller)));
  c.binding = binding_for(plan, lanes);
  c.cancel = current_cancel_token();
  c.profiling = profile_active();
  return c;
}

// Each group's collectives in this call take the next positions of the group's order, in the
// plan's order (the same on every rank), whatever order their tasks become ready in; each cut
// edge's message takes the next position of its own (distributed::Channel).
void reserve_positions(const Plan& plan, CallState& st) {
  if (plan.collectives().empty()) return;
  st.positions.assign(plan.tasks().size(), 0);
  std::map<distributed::Channel, int> count;
  for (int t : plan.collectives()) count[distributed::channel_of(plan.tasks()[t].native)]++;
  std::map<distributed::Channel, uint64_t> next;
  for (auto [channel, n] : count) next[channel] = distributed::reserve_positions(channel, n);
  for (int t : plan.collectives())
    st.positions[t] = next[distributed::channel_of(plan.tasks()[t].native)]++;
}

void setup_state(const Plan& plan, const Call& c, CallState& st,
                 const std::vector<std::shared_ptr<Buffer>>& inputs) {
  st.plan = &plan;
  st.lanes = c.binding->lanes;
  st.binding = c.binding.get();
  st.task_kernels = &c.binding->kernels;
  bind_buffers(plan, st, inputs);
  st.errors.assign(plan.tasks().size(), nullptr);
  st.profiling = c.profiling;
  st.cancel = c.cancel;
  reserve_positions(plan, st);
}

// An output computed on another rank (placement on ranks) exists only there.
std::exception_ptr remote_output(const Plan& plan, size_t i) {
  int owner = plan.output_ranks.empty() ? -1 : plan.output_ranks[i];
  if (owner < 0) return nullptr;
  return std::make_exception_ptr(Error(
      "this array was computed on rank " + std::to_string(owner) + " (placed there with " +
      "compute_on) and exists only there; this is rank " +
      std::to_string(distributed::init().rank()) + ". Read it on rank " + std::to_string(owner) +
      ", or compute what every rank needs from it outside the rank placement (a value computed "
      "outside any rank placement is computed on every rank, and each receives its inputs)"));
}

RunResult collect(const Plan& plan, const CallState& st) {
  RunResult r;
  r.errors.reserve(plan.outputs.size());
  r.outputs.reserve(plan.outputs.size());
  for (size_t i = 0; i < plan.outputs.size(); ++i) {
    int slot = plan.outputs[i];
    std::exception_ptr err = remote_output(plan, i);
    for (int t : plan.producers(slot))
      if (st.errors[t]) err = st.errors[t];
    r.errors.push_back(err);
    r.outputs.push_back(err ? nullptr : st.buffers[slot]);
  }
  return r;
}

RunResult failed_result(const Plan& plan, std::exception_ptr e) {
  RunResult r;
  r.outputs.assign(plan.outputs.size(), nullptr);
  r.errors.assign(plan.outputs.size(), e);
  return r;
}

// Submissions to one stream run in submission order: hold each lane's order lock (in a fixed
// order, so two submissions touching the same streams cannot deadlock).
struct OrderLocks {
  const std::vector<Lane*>& lanes;
  explicit OrderLocks(const std::vector<Lane*>& l) : lanes(l) {
    for (Lane* x : lanes) x->order.lock();
  }
  ~OrderLocks() {
    for (auto it = lanes.rbegin(); it != lanes.rend(); ++it) (*it)->order.unlock();
  }
};

bool has_host_tasks(const Plan& plan) {
  for (const Task& t : plan.tasks())
    if (t.kind == TaskKind::Host) return true;
  return false;
}

// Whether every device task can be enqueued at submission: one device queue and nothing else,
// or queues of one device that order work on the device (Queue::enqueue_wait, signals for the
// host lanes' tasks), with host lanes (whose memory is host memory) or without.
bool device_lanes_only(const Binding& b) {
  if (b.all_inline || b.distinct.empty()) return false;
  if (b.distinct.size() == 1) return true;
  const Lane* first = nullptr;
  for (Lane* l : b.distinct) {
    // A host lane's data must be host memory: the device then reads it with a transfer that
    // waits for the signal. Other memory (a test double's) is read by a blocking transfer at
    // enqueue, before its producer has run.
    if (l->inline_queue && !l->backend->uses_host_memory()) return false;
    if (l->inline_queue) continue;
    if (!l->queue->waits_on_device() || (first && !(l->stream.device == first->stream.device)))
      return false;
    if (!first) first = l;
  }
  return true;
}

// Runs a resolved call to completion on this thread.
RunResult run_call(const Plan& plan, const Call& c,
                   const std::vector<std::shared_ptr<Buffer>>& inputs, const RunOptions& options) {
  CallStateLease lease;
  CallState& st = *lease.st;
  setup_state(plan, c, st, inputs);
  register_call(st);
  struct Unregister {
    CallState& st;
    ~Unregister() { unregister_call(st); }
  } unregister{st};
  const Binding& binding = *c.binding;
  OrderLocks locks(binding.distinct);

  // Small plans and chains (nothing to run in parallel) of host work run on this thread.
  int ntasks = static_cast<int>(plan.tasks().size());
  // Not with collectives: waiting for each in turn would hold back a send that another rank's
  // recv, issued first, waits for (the flow graph completes them through their events).
  bool direct =
      options.path == RunOptions::Path::Direct ||
      (options.path == RunOptions::Path::Auto && binding.all_inline && plan.collectives().empty() &&
       (ntasks <= options.direct_max_tasks || plan.critical_path() == ntasks));
  bool one_queue = options.path == RunOptions::Path::Auto && !binding.all_inline &&
                   binding.distinct.size() == 1 && plan.collectives().empty();
  // A plan on one host lane measures its runs: whether later ones run inline depends on it.
  bool timed = binding.all_inline && binding.distinct.size() == 1;
  int64_t t0 = timed ? profile_now_ns() : 0;
  if (direct) {
    for (int t : plan.order()) run_task_blocking(st, t);
  } else if (one_queue) {
    run_in_order(st);
  } else {
    auto g = acquire_graph(plan, binding.inline_lanes);
    g->run(st);
    release_graph(plan, binding.inline_lanes, std::move(g));
  }
  if (timed) binding.run_ns.add(profile_now_ns() - t0);
  return collect(plan, st);
}

// Earlier asynchronous submissions to these host lanes run before a synchronous one.
void drain_workers(const std::vector<Lane*>& lanes) {
  for (Lane* l : lanes)
    if (l->inline_queue)
      if (LaneWorker* w = l->worker_if_any()) w->drain();
}

void fail_readers(const Plan& plan, const std::vector<InFlightInput>& after, RunResult& r);

// Runs f now or, when called inside another run_flat on this thread, right after it: runs that
// complete each other in a chain (a loop's steps, each waiting for the one before) stay flat on
// the stack however long the chain.
void run_flat(std::function<void()> f) {
  thread_local std::vector<std::function<void()>>* queue = nullptr;
  if (queue) return queue->push_back(std::move(f));
  std::vector<std::function<void()>> q;
  q.push_back(std::move(f));
  queue = &q;
  struct Reset {
    ~Reset() { queue = nullptr; }
  } reset;
  for (size_t i = 0; i < q.size(); ++i) {
    std::function<void()> g = std::move(q[i]);  // q may grow while g runs
    g();
  }
}

// CallStates of device submissions, reused. A submission's completion runs on a driver's
// thread: freeing the state's vectors there, while the submitting thread allocates the next
// call's, made the two contend for the allocator's lock on every call (a device loop's steps).
// Kept states keep their vectors' capacity; what they held is released when given back.
class DeviceStates {
 public:
  std::unique_ptr<CallState> take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<CallState> st = std::move(idle_.back());
        idle_.pop_back();
        return st;
      }
    }
    return std::make_unique<CallState>();
  }
  void give(std::unique_ptr<CallState> st) {
    st->buffers.clear();  // the call's buffers go back to their pools now
    st->storage.clear();
    st->errors.clear();
    st->cancel.reset();
    st->positions.clear();
    st->failed.store(false, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    if (idle_.size() < kKept) idle_.push_back(std::move(st));
  }

 private:
  static constexpr size_t kKept = 64;  // enough for the calls one thread keeps in flight
  std::mutex mu_;
  std::vector<std::unique_ptr<CallState>> idle_;
};

DeviceStates& device_states() {
  static Immortal<DeviceStates> s;  // completions may run on driver threads until exit
  return s.get();
}

// An asynchronous submission: either a job on a host lane's worker, or device work enqueued on
// one device queue whose events complete it.
class AsyncRun : public Pending, public std::enable_shared_from_this<AsyncRun> {
 public:
  AsyncRun(const Plan& plan, std::shared_ptr<const void> keep, Call call, RunDone done)
      : plan_(plan), keep_(std::move(keep)), call_(std::move(call)), done_(std::move(done)) {
    for (Lane* l : call_.binding->distinct) l->async_started();
    if (call_.profiling) profile_hold();
  }

  void wait() override {
    if (worker_) return worker_->wait(ticket_);
    BlockedScope blocked("a call", call_id_);
    std::unique_lock<std::mutex> lock(mu_);
    wait_or_give_up(
        lock, cv_, [&] { return finished_; },
        [&] { return "call " + std::to_string(call_id_) + ": " + unfinished_tasks(call_id_); });
  }

  // Host lane: the whole plan runs as one job of the lane's worker. Returns whether the worker's
  // thread had to be started for it.
  bool submit_to_worker(std::vector<std::shared_ptr<Buffer>> inputs) {
    Lane& lane = *call_.binding->distinct[0];
    worker_ = &lane.worker();
    auto self = shared_from_this();
    bool started = false;
    ticket_ = worker_->submit(
        [self, inputs = std::move(inputs)]() mutable {
          RunResult r;
          try {
            // The inputs go before the results are published: a later call that finds them ready
            // must not see this job's references (they would stop it donating those buffers).
            auto in = std::move(inputs);
            r = run_call(self->plan_, self->call_, in, RunOptions{});
          } catch (...) {
            r = failed_result(self->plan_, std::current_exception());
          }
          self->complete(std::move(r));
        },
        &started);
    return started;
  }

  // Device queues (of one device) and possibly host lanes: every device task is enqueued now,
  // in a topological order (each in-order queue keeps it; between queues, device-side waits);
  // a host task runs on the TBB arena once its dependencies complete, and device work reading
  // its output waits on the device for a signal it completes (an OpenCL user event). Device
  // events' callbacks complete the run, on the driver's thread.
  void enqueue_on_device(const std::vector<std::shared_ptr<Buffer>>& inputs) {
    state_ = device_states().take();
    CallState& st = *state_;
    setup_state(plan_, call_, st, inputs);
    register_call(st);
    call_id_ = st.record.id;
    size_t n = plan_.tasks().size();
    std::vector<Lane*> device_lanes;
    for (Lane* l : call_.binding->distinct)
      if (!l->inline_queue) device_lanes.push_back(l);
    // Signals and dependency counts serve host tasks only; with one device lane and no host
    // lane, no task waits for another lane's events (the queue is in order).
    bool host_lanes = device_lanes.size() != call_.binding->distinct.size();
    bool cross_lane = host_lanes || device_lanes.size() > 1;
    if (st.profiling) started_.assign(n, 0);
    if (host_lanes) {
      signals_.assign(n, nullptr);
      deps_left_ = std::make_unique<std::atomic<int>[]>(n);
      for (size_t t = 0; t < n; ++t) deps_left_[t].store(0);
      for (size_t t = 0; t < n; ++t)
        for (int s : plan_.successors(static_cast<int>(t))) deps_left_[s].fetch_add(1);
    }
    std::vector<std::pair<int, EventPtr>> events;
    std::vector<int> done_now, ready_host;
    // Per task, the device events that stand for its completion: its own, its signal, or
    // (work that completed at once, an aliased copy) its dependencies'. A task waits, on its
    // lane's queue, for those of its dependencies on other lanes; its own queue is in order.
    std::vector<std::vector<std::pair<Lane*, EventPtr>>> frontier(cross_lane ? n : 0);
    {
      OrderLocks locks(device_lanes);
      order_after_producers(device_lanes, host_lanes);
      for (int t : plan_.order()) {
        Lane* lane = st.lanes[plan_.tasks()[t].lane];
        if (lane->inline_queue) {
          if (feeds_device(t)) {
            signals_[t] = device_lanes[0]->queue->create_signal();
            if (!signals_[t])
              throw_error("executor: ", device_lanes[0]->stream.str(),
                          " has no signals for work of a cpu lane");
            frontier[t].emplace_back(lane, signals_[t]->event());
          }
          if (deps_left_[t].load() == 0) ready_host.push_back(t);
          continue;
        }
        std::vector<EventPtr> waits;
        if (cross_lane)
          for (int d : plan_.tasks()[t].deps)
            for (const auto& [l, ev] : frontier[d])
              if (l != lane) waits.push_back(ev);
        if (!waits.empty() && !lane->queue->enqueue_wait(waits))
          record_error(st, t,
                       std::make_exception_ptr(
                           Error("executor: the queue of " + lane->stream.str() +
                                 " cannot wait for work of another lane on the device")));
        if (st.profiling) started_[t] = profile_now_ns();
        if (EventPtr ev = start_task(st, t)) {
          if (cross_lane) frontier[t].emplace_back(lane, ev);
          events.emplace_back(t, std::move(ev));
        } else {
          if (st.profiling && !st.aliased_copy[t]) record_profile(st, t, started_[t]);
          done_now.push_back(t);
          if (cross_lane)
            for (int d : plan_.tasks()[t].deps)
              frontier[t].insert(frontier[t].end(), frontier[d].begin(), frontier[d].end());
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int slot : plan_.outputs) outputs_.push_back(st.buffers[slot]);
      for (auto& e : events) events_.push_back(e.second);
      device_lanes_ = std::move(device_lanes);
    }
    // Completes after its producers: their errors reach the outputs reading them (`done`).
    remaining_.store(static_cast<int>(n + 1 + after_.size()));
    auto self = shared_from_this();
    for (const InFlightInput& in : after_)
      static_cast<AsyncRun&>(*in.producer).when_finished([self] { self->event_done(); });
    for (auto& [t, ev] : events)
      ev->on_complete([self, t = t](std::exception_ptr e) { self->task_done(t, e, true); });
    for (int t : done_now) task_done(t, nullptr, false);
    for (int t : ready_host) schedule(t);
    event_done();
  }

  // Inputs still in flight on earlier submissions (execute_async's `after`).
  void set_after(std::vector<InFlightInput> after) { after_ = std::move(after); }

  // The bytes of its outputs' buffers (0 once complete).
  size_t output_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t sum = 0;
    for (const auto& b : outputs_)
      if (b) sum += b->bytes();
    return sum;
  }

  // Output i's buffer while the device work writing it is in flight; null once complete.
  std::shared_ptr<Buffer> output_buffer(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return !finished_ && i < outputs_.size() ? outputs_[i] : nullptr;
  }
  // Output i's error, once complete.
  std::exception_ptr output_error(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_ && i < errors_.size() ? errors_[i] : nullptr;
  }
  // Calls f once this run has completed (now, if it has).
  void when_finished(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!finished_) return on_finish_.push_back(std::move(f));
    }
    run_flat(std::move(f));
  }

  // Undoes the submission's bookkeeping when it could not start.
  void abandon() {
    done_ = nullptr;
    if (state_) unregister_call(*state_);
    state_.reset();
    finished_ = true;
    for (Lane* l : call_.binding->distinct) l->async_finished();
    if (call_.profiling) profile_release();
  }

 private:
  // Orders this run after the device work computing its in-flight inputs: nothing when both
  // are on the one in-order queue, else a wait on the device (queues of one device), else on
  // the host (the producer's device is another, or the run has host lanes too).
  void order_after_producers(const std::vector<Lane*>& device_lanes, bool host_lanes) {
    for (const InFlightInput& in : after_) {
      auto& p = static_cast<AsyncRun&>(*in.producer);
      std::vector<EventPtr> events;
      {
        std::lock_guard<std::mutex> lock(p.mu_);
        if (p.finished_) continue;
        // A loop's common case, decided without copying the producer's events.
        if (!host_lanes && p.device_lanes_ == device_lanes && device_lanes.size() == 1) continue;
        events = p.events_;
      }
      bool waits = !host_lanes;
      for (Lane* l : device_lanes)
        waits = waits && l->queue->waits_on_device() && l->queue->enqueue_wait(events);
      if (!waits) p.wait();
    }
  }

  bool feeds_device(int t) const {
    for (int s : plan_.successors(t))
      if (!state_->lanes[plan_.tasks()[s].lane]->inline_queue) return true;
    return false;
  }

  // A task finished (device event, work done at once, or a host task): its host successors
  // whose dependencies are all done run next.
  void task_done(int t, std::exception_ptr e, bool record) {
    CallState& st = *state_;
    if (e) record_error(st, t, e);
    mark(st, t, TaskPhase::Done);
    if (record && st.profiling && !st.aliased_copy[t]) record_profile(st, t, started_[t]);
    for (int s : plan_.successors(t))
      if (st.lanes[plan_.tasks()[s].lane]->inline_queue && deps_left_[s].fetch_sub(1) == 1)
        schedule(s);
    event_done();
  }

  static oneapi::tbb::task_arena& arena() {
    static Immortal<oneapi::tbb::task_arena> a;
    return a.get();
  }

  // A host task of a mixed plan runs on the TBB arena (never on a driver's callback thread).
  void schedule(int t) {
    auto self = shared_from_this();
    arena().enqueue([self, t] { self->run_host(t); });
  }

  void run_host(int t) {
    CallState& st = *state_;
    if (st.profiling) started_[t] = profile_now_ns();
    EventPtr ev = start_task(st, t);  // fails at once when a dependency failed
    auto finish = [self = shared_from_this(), t](std::exception_ptr e) {
      CallState& s = *self->state_;
      if (e) record_error(s, t, e);
      if (self->signals_[t]) self->signals_[t]->complete(s.errors[t]);
      self->task_done(t, nullptr, true);
    };
    if (ev)
      ev->on_complete(finish);  // a copy out of device memory, on the device's queue
    else
      finish(nullptr);
  }

  void event_done() {
    if (remaining_.fetch_sub(1) != 1) return;
    CallState& st = *state_;
    // A task whose input failed reports that failure (the root cause, not the device's
    // "an event in the wait list failed").
    if (st.failed.load())
      for (int t : plan_.order())
        for (int d : plan_.tasks()[t].deps)
          if (st.errors[d]) st.errors[t] = st.errors[d];
    RunResult r = collect(plan_, st);
    unregister_call(st);
    device_states().give(std::move(state_));  // the call's buffers go back to their pools now
    complete(std::move(r));
  }

  void complete(RunResult r) {
    auto self = shared_from_this();  // `done_` may drop the last other reference
    fail_readers(plan_, after_, r);  // the producers have completed
    std::vector<std::exception_ptr> errors = r.errors;
    {
      RunDone done = std::move(done_);  // and what it holds goes before anyone sees the end
      done(std::move(r));
    }
    std::vector<Lane*> lanes = call_.binding->distinct;
    bool profiling = call_.profiling;
    std::vector<std::function<void()>> then;
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_ = true;
      call_ = Call{};
      keep_.reset();
      errors_ = std::move(errors);
      outputs_.clear();
      events_.clear();
      after_.clear();
      then.swap(on_finish_);
    }
    cv_.notify_all();
    for (auto& f : then) run_flat(std::move(f));
    for (Lane* l : lanes) l->async_finished();
    if (profiling) profile_release();
  }

  const Plan& plan_;
  std::shared_ptr<const void> keep_;  // keeps plan_ alive
  Call call_;
  RunDone done_;
  std::unique_ptr<CallState> state_;               // device path
  std::vector<int64_t> started_;                   // device path, profiling: per task, enqueued
  std::atomic<int> remaining_{0};                  // device path: tasks not complete, plus one
  std::unique_ptr<std::atomic<int>[]> deps_left_;  // device path, host lanes: deps not done
  std::vector<std::shared_ptr<Signal>> signals_;   // device path, host lanes: per host task
  LaneWorker* worker_ = nullptr;                   // host path
  std::vector<InFlightInput> after_;               // device path: producers of inputs
  std::vector<std::shared_ptr<Buffer>> outputs_;   // device path: per plan output, until complete
  std::vector<EventPtr> events_;                   // device path: the enqueued work's, until then
  std::vector<Lane*> device_lanes_;                // device path: the queues it runs on
  std::vector<std::exception_ptr> errors_;         // per plan output, once complete
  std::vector<std::function<void()>> on_finish_;   // when_finished's, until complete
  uint64_t ticket_ = 0;
  uint64_t call_id_ = 0;  // pending_work()'s id of the device path's call
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
};

// Whether each plan output reads the plan's slot `slot` (an input's), through any chain of tasks.
std::vector<bool> outputs_reading(const Plan& plan, int slot) {
  std::vector<bool> reads(plan.tasks().size(), false);
  for (int t : plan.order()) {
    const Task& task = plan.tasks()[t];
    bool r = std::find(task.slots.begin(), task.slots.end(), slot) != task.slots.end();
    for (int d : task.deps) r = r || reads[d];
    reads[t] = r;
  }
  std::vector<bool> out(plan.outputs.size(), false);
  for (size_t o = 0; o < out.size(); ++o) {
    out[o] = plan.outputs[o] == slot;
    for (int t : plan.producers(plan.outputs[o])) out[o] = out[o] || reads[t];
  }
  return out;
}

// Gives the error of each failed producer in `after` to the outputs of `r` made by tasks that
// read its input, directly or through other tasks. The producers have completed.
void fail_readers(const Plan& plan, const std::vector<InFlightInput>& after, RunResult& r) {
  for (const InFlightInput& in : after) {
    std::exception_ptr e = static_cast<AsyncRun&>(*in.producer).output_error(in.output);
    if (!e) continue;
    std::vector<bool> reads = outputs_reading(plan, plan.inputs[in.input]);
    for (size_t o = 0; o < reads.size(); ++o)
      if (reads[o]) {
        r.errors[o] = e;
        r.outputs[o] = nullptr;
      }
  }
}

void wait_for(const std::vector<InFlightInput>& after) {
  for (const InFlightInput& in : after) in.producer->wait();
}

}  // namespace

std::shared_ptr<Buffer> in_flight_output(Pending& work, size_t output) {
  auto* run = dynamic_cast<AsyncRun*>(&work);
  return run ? run->output_buffer(output) : nullptr;
}

size_t donated_bytes() { return g_donated_bytes.load(std::memory_order_relaxed); }

void prepare(const Plan& plan) {
  Stream caller = current_stream();
  std::vector<Lane*> lanes;
  for (const LaneSpec& spec : plan.lanes()) lanes.push_back(&lane_for(resolve_lane(spec, caller)));
  binding_for(plan, lanes);
}

RunResult execute(const Plan& plan, const std::vector<std::shared_ptr<Buffer>>& inputs,
                  const RunOptions& options) {
  Call c = resolve_call(plan, inputs);
  drain_workers(c.binding->distinct);
  return run_call(plan, c, inputs, options);
}

std::shared_ptr<Pending> execute_async(const Plan& plan, std::shared_ptr<const void> keep,
                                       std::vector<std::shared_ptr<Buffer>>&& inputs, RunDone done,
                                       std::vector<InFlightInput> after) {
  Call c = resolve_call(plan, inputs);
  const Binding& b = *c.binding;
  bool on_worker = b.all_inline && b.distinct.size() == 1;
  // Collectives start only once their inputs are computed: never enqueued ahead on a device.
  bool on_device = device_lanes_only(b) && !has_host_tasks(plan) && plan.collectives().empty();
  if (!on_device) wait_for(after);  // host work reads the inputs: they must be complete
  if (on_device && !b.all_inline) drain_workers(b.distinct);  // earlier cpu jobs run first
  if (!on_worker && !on_device) {  // several lanes: run here, as execute() does
    drain_workers(b.distinct);
    RunResult r = run_call(plan, c, inputs, RunOptions{});
    fail_readers(plan, after, r);
    done(std::move(r));
    return nullptr;
  }
  // A small plan on an idle host lane runs here (executor/inline_policy.h): it takes less time
  // than handing it off would cost, and there is nothing queued on the lane for it to overlap.
  bool quiet = on_worker && b.distinct[0]->quiet();
  if (quiet && run_inline(b.run_ns)) {
    RunResult r = run_call(plan, c, inputs, RunOptions{});
    inputs.clear();  // as a worker's job does: a later call may donate these buffers
    fail_readers(plan, after, r);
    done(std::move(r));
    return nullptr;
  }
  int64_t t0 = quiet ? profile_now_ns() : 0;
  auto run = std::make_shared<AsyncRun>(plan, std::move(keep), std::move(c), std::move(done));
  run->set_after(std::move(after));
  if (on_worker) {
    // What handing off cost the caller, when the lane was idle (the case the rule decides).
    if (!run->submit_to_worker(std::move(inputs)) && quiet)
      handoff_cost().add(profile_now_ns() - t0);
  } else {
    try {
      run->enqueue_on_device(inputs);
    } catch (...) {  // binding the buffers failed: nothing ran, the caller gets the error
      run->abandon();
      throw;
    }
    if (b.distinct.size() == 1) b.distinct[0]->bound_ahead(run, run->output_bytes());
  }
  return run;
}

}  // namespace kiln
