#include "backends/opencl/opencl_backend.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "backends/canonical.h"
#include "backends/launch_check.h"
#include "backends/native.h"
#include "backends/native_kernels.h"
#include "backends/opencl/codegen.h"
#include "backends/opencl/completion_poller.h"
#include "backends/opencl/device.h"
#include "backends/opencl/events.h"
#include "backends/opencl/gather.h"
#include "backends/opencl/host_gate.h"
#include "backends/opencl/matmul.h"
#include "backends/opencl/memory.h"
#include "backends/opencl/program_cache.h"
#include "backends/opencl/scan.h"
#include "backends/opencl/scatter.h"
#include "backends/opencl/sort.h"
#include "graph/at_exit.h"
#include "graph/env.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln {

namespace opencl {

namespace {

std::atomic<int64_t> g_built{0}, g_from_disk{0}, g_memory_hits{0};

// One entry point of a built program. cl_kernel argument state is shared, so setting arguments
// and enqueueing happen under `mu`.
struct Entry {
  cl_kernel kernel = nullptr;
  size_t local = 1;  // work-group size: a power of two within the device's and kernel's limits
  std::mutex mu;
  ~Entry() {
    if (kernel) clReleaseKernel(kernel);
  }
};

struct ClKernel : CompiledKernel {
  ClDevice* dev = nullptr;
  cl_program program = nullptr;
  Generated gen;
  Kernel ir;     // as the caller built it: launches are checked against it
  Kernel canon;  // merge_axes(ir): what the code walks (fewer axes, less index arithmetic)
  LaunchCheck check;
  std::unique_ptr<Entry> map, reduce, rows, part, final;
  ~ClKernel() override {
    map.reset(), reduce.reset(), rows.reset(), part.reset(), final.reset();
    if (program) clReleaseProgram(program);
  }
};

// On a CPU device a map's work-group is one work-item walking one contiguous run (codegen), and
// a group costs PoCL a hand-off to one of its threads: runs of at least this many elements.
// With 256 items a group, each a run of n / 2048 (the launch before), a 1,000-float map gave
// each item one element, in the scalar tail of its loop: ~3 us of the kernel where the run
// takes ~0.1 us. Runs of 1,024 to 16,384 measured the same from 1,000 to 2^20 floats; 256 was
// slower at 1,000 (four groups handed off for 1 us of work) (docs/performance.md).
constexpr int64_t kCpuRun = 4096;

std::unique_ptr<Entry> make_entry(const ClDevice& dev, cl_program p, const char* name) {
  auto e = std::make_unique<Entry>();
  cl_int err = CL_SUCCESS;
  e->kernel = clCreateKernel(p, name, &err);
  cl_check(err, "clCreateKernel");
  e->local = local_size(dev, e->kernel);
  return e;
}

ClBuffer& cl_buffer(Buffer* b, const ClDevice& dev, const std::string& kernel) {
  auto* cb = dynamic_cast<ClBuffer*>(b);
  if (!cb || &cb->cl_device() != &dev)
    throw_error("opencl: kernel ", kernel, " got a buffer that is not on ", dev.label(),
                " (the plan must copy it there first)");
  return *cb;
}

class Launcher {
 public:
  Launcher(const ClKernel& k, const KernelArgs& args, cl_command_queue q)
      : k_(k), args_(args), q_(q) {}

  // Sets the arguments every entry shares; returns the next argument index.
  cl_uint common(cl_kernel kn) const {
    cl_uint i = 0;
    for (Buffer* b : args_.buffers) {
      cl_mem m = cl_buffer(b, *k_.dev, k_.ir.name).mem();
      cl_check(clSetKernelArg(kn, i++, sizeof m, &m), "clSetKernelArg (buffer)");
    }
    for (int p = 0; p < k_.gen.num_params; ++p) {
      cl_long v = args_.params[p];
      cl_check(clSetKernelArg(kn, i++, sizeof v, &v), "clSetKernelArg (param)");
    }
    for (const ScalarArg& s : k_.gen.scalars) {
      float f = static_cast<float>(scalar_from_word(args_.params[s.param], s.dtype).f);
      cl_check(clSetKernelArg(kn, i++, sizeof f, &f), "clSetKernelArg (scalar)");
    }
    return i;
  }

  cl_uint locals(cl_kernel kn, cl_uint i, size_t local) const {
    cl_check(clSetKernelArg(kn, i++, local * k_.gen.acc_size, nullptr), "clSetKernelArg (local)");
    cl_check(clSetKernelArg(kn, i++, local * sizeof(cl_long), nullptr), "clSetKernelArg (local)");
    cl_check(clSetKernelArg(kn, i++, local * sizeof(cl_int), nullptr), "clSetKernelArg (local)");
    return i;
  }

  cl_event run(Entry& e, size_t groups, const std::vector<std::pair<size_t, const void*>>& extra,
               bool with_locals) const {
    std::lock_guard<std::mutex> lock(e.mu);
    cl_uint i = common(e.kernel);
    if (with_locals) i = locals(e.kernel, i, e.local);
    for (const auto& [size, ptr] : extra)
      cl_check(clSetKernelArg(e.kernel, i++, size, ptr), "clSetKernelArg");
    size_t global = groups * e.local, local = e.local;
    cl_event ev = nullptr;
    cl_check(clEnqueueNDRangeKernel(q_, e.kernel, 1, nullptr, &global, &local, 0, nullptr, &ev),
             "clEnqueueNDRangeKernel");
    return ev;
  }

 private:
  const ClKernel& k_;
  const KernelArgs& args_;
  cl_command_queue q_;
};

int64_t product(const std::vector<int64_t>& e, int from, int to) {
  int64_t p = 1;
  for (int a = from; a < to; ++a) p *= e[a];
  return p;
}

size_t groups_for(int64_t work, size_t local, size_t cap) {
  int64_t g = (work + static_cast<int64_t>(local) - 1) / static_cast<int64_t>(local);
  return static_cast<size_t>(std::max<int64_t>(1, std::min<int64_t>(g, static_cast<int64_t>(cap))));
}

// The live command queues. Lanes (and so their queues) live for the process, so at exit,
// before the libraries' own finalisers run (the driver's among them), every queue finishes its
// work here (graph/at_exit.h): a driver thread still running enqueued work while its code is
// torn down crashes.
struct LiveQueues {
  std::mutex mu;
  std::set<cl_command_queue> queues;
};
LiveQueues& live_queues() {
  static Immortal<LiveQueues> q;
  return q.get();
}
void finish_at_exit() {
  LiveQueues& l = live_queues();
  std::lock_guard<std::mutex> lock(l.mu);
  for (cl_command_queue q : l.queues) clFinish(q);
}

// PoCL's time per command grows with the commands queued before it (a 1,000-float step of a
// device loop: 5.7 us with 250 queued, 11.8 us with 20,000; docs/performance.md), so a caller
// that runs far ahead waits for the oldest of its calls. From 8 to 128 the loop measured the
// same; a GPU with 64 commands queued is not starved either.
size_t calls_ahead_limit() {
  static const size_t n = env_count("KILN_OPENCL_CALLS_AHEAD",
                                    "the device-only calls a caller may keep in flight on an "
                                    "opencl stream before waiting for the oldest (0: no bound)")
                              .value_or(64);
  return n;
}

// A loop x = f(x) keeps its calls' outputs alive while they are in flight; once those outgrow
// the device's cache every step reads and writes memory. On PoCL (32 MiB of L3 reported), a
// step of f on 2^20 floats took 75 us with 2 calls in flight and 172 us with 64; 2^18 floats
// held 26-29 us up to 16 in flight and 52 us at 64 (docs/performance.md). So the outputs in
// flight stay within a quarter of the cache: room for the inputs they read and other data.
size_t bytes_ahead_limit(const ClDevice& dev) {
  static const std::optional<uint64_t> n =
      env_count("KILN_OPENCL_BYTES_AHEAD",
                "the bytes of outputs a caller may keep in flight on an opencl stream before "
                "waiting for the oldest call (0: no bound; unset: a quarter of the device's "
                "cache)");
  return n ? static_cast<size_t>(*n) : static_cast<size_t>(dev.cache / 4);
}

class ClQueue : public Queue {
 public:
  ClQueue(ClDevice& dev, std::shared_ptr<ClPool> pool, Backend& backend, int device)
      : dev_(dev), pool_(std::move(pool)), backend_(backend), device_(device) {
    static const bool registered = (at_exit_finish(ExitStage::Devices, finish_at_exit), true);
    (void)registered;
    cl_int err = CL_SUCCESS;
    q_ = clCreateCommandQueue(dev.context, dev.id, 0, &err);  // in order
    cl_check(err, "clCreateCommandQueue");
    std::lock_guard<std::mutex> lock(live_queues().mu);
    live_queues().queues.insert(q_);
  }
  ~ClQueue() override {
    {
      std::lock_guard<std::mutex> lock(live_queues().mu);
      live_queues().queues.erase(q_);
    }
    clFinish(q_);
    clReleaseCommandQueue(q_);
  }

  // Every command goes through the gate (host_gate.h), which issues it now or, behind a host
  // wait that a blocking call must not sit behind, later in order.
  EventPtr enqueue_kernel(const CompiledKernel& ck, const KernelArgs& args) override {
    return gate_->submit(false, "kernel", [this, &ck, args] { return kernel(ck, args); });
  }
  EventPtr kernel(const CompiledKernel& ck, const KernelArgs& args) {
    auto& k = static_cast<const ClKernel&>(ck);
    if (k.dev != &dev_)
      throw_error("opencl: kernel ", k.ir.name, " was compiled for ", k.dev->label(),
                  ", not for this queue's ", dev_.label());
    k.check(k.ir, args);
    std::vector<int64_t> e = k.canon.extents(args.params);
    int kept = k.canon.kept_axes();
    int64_t nout = product(e, 0, kept), nred = product(e, kept, k.canon.ndim());
    if (nout == 0) return nullptr;  // an empty domain: nothing to do
    Launcher l(k, args, q_);
    std::vector<std::shared_ptr<void>> keep;
    cl_event ev = nullptr;
    if (!k.ir.reduce) {
      // On GPUs the launch covers the domain. On a CPU device each group is one contiguous
      // run: a few per compute unit balance the threads, and a small domain gets fewer, each
      // at least kCpuRun elements.
      ev = dev_.cpu ? l.run(*k.map, groups_for(nout, kCpuRun, dev_.compute_units * 4), {}, false)
                    : l.run(*k.map,
                            groups_for((nout + k.gen.map_points - 1) / k.gen.map_points,
                                       k.map->local, SIZE_MAX / k.map->local),
                            {}, false);
    } else if (k.gen.split && nred >= static_cast<int64_t>(32 * k.part->local)) {
      ev = split(k, l, nred, keep);
    } else if (k.rows && nout >= static_cast<int64_t>(4 * dev_.compute_units * k.rows->local)) {
      ev = l.run(*k.rows, groups_for(nout, k.rows->local, SIZE_MAX / k.rows->local), {}, false);
    } else {
      ev = l.run(*k.reduce, static_cast<size_t>(std::min<int64_t>(nout, 1 << 16)), {}, true);
    }
    return submitted(ev, "kernel " + k.ir.name, std::move(keep));
  }

  EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) override {
    if (bytes == 0) return nullptr;
    auto* s = dynamic_cast<ClBuffer*>(&src);
    auto* d = dynamic_cast<ClBuffer*>(&dst);
    // Between devices the copy reads the other device's buffer with a blocking read.
    bool blocks = !(s && d && &s->cl_device() == &d->cl_device()) && !(d && src.host_ptr()) &&
                  !(s && dst.host_ptr());
    return gate_->submit(blocks, "copy",
                         [this, &src, &dst, bytes] { return copy(src, dst, bytes); });
  }
  EventPtr copy(Buffer& src, Buffer& dst, size_t bytes) {
    auto* s = dynamic_cast<ClBuffer*>(&src);
    auto* d = dynamic_cast<ClBuffer*>(&dst);
    cl_event ev = nullptr;
    if (s && d && &s->cl_device() == &d->cl_device()) {
      cl_check(clEnqueueCopyBuffer(q_, s->mem(), d->mem(), 0, 0, bytes, 0, nullptr, &ev),
               "clEnqueueCopyBuffer");
    } else if (d && src.host_ptr()) {
      cl_check(
          clEnqueueWriteBuffer(q_, d->mem(), CL_FALSE, 0, bytes, src.host_ptr(), 0, nullptr, &ev),
          "clEnqueueWriteBuffer");
    } else if (s && dst.host_ptr()) {
      cl_check(
          clEnqueueReadBuffer(q_, s->mem(), CL_FALSE, 0, bytes, dst.host_ptr(), 0, nullptr, &ev),
          "clEnqueueReadBuffer");
    } else if (dst.host_ptr()) {  // from another device: its own blocking read
      src.read(dst.host_ptr(), 0, bytes);
      return nullptr;
    } else {  // between two devices with no host pointer: through host memory
      auto staging = std::make_shared<std::vector<char>>(bytes);
      src.read(staging->data(), 0, bytes);
      dst.write(staging->data(), 0, bytes);
      return nullptr;
    }
    return submitted(ev, "copy", {});
  }

  // Gathers, scatter_add, sorts and scans have kernels of their own (gather.h, scatter.h,
  // sort.h, scan.h); scatter_add of a dtype without atomics here runs Kernel IR reductions
  // (backends/native_kernels.h).
  EventPtr enqueue_native(const NativeArgs& a) override {
    return gate_->submit(false, native_name(a), [this, a] { return native(a); });
  }
  EventPtr native(const NativeArgs& a) {
    if (a.op == Op::Scan) return scan(a);
    if (a.op == Op::ScatterAdd && opencl::has_scatter_add_kernel(dev_, a.dtype)) return scatter(a);
    if (a.op == Op::Sort || a.op == Op::Argsort) return enqueue_sort(a);
    if (a.op != Op::Gather) return enqueue_native_as_kernels(backend_, device_, *this, a);
    cl_event ev = opencl::enqueue_gather(dev_, q_, a);
    if (!ev) return nullptr;
    return submitted(ev, native_name(a), {});
  }
  EventPtr scatter(const NativeArgs& a) {
    std::vector<std::shared_ptr<void>> keep;
    cl_event ev = opencl::enqueue_scatter_add(dev_, *pool_, q_, a, keep);
    if (!ev) return nullptr;
    return submitted(ev, native_name(a), std::move(keep));
  }
  EventPtr scan(const NativeArgs& a) {
    std::vector<std::shared_ptr<void>> keep;
    cl_event ev = opencl::enqueue_scan(dev_, *pool_, q_, a, keep);
    if (!ev) return nullptr;
    return submitted(ev, native_name(a), std::move(keep));
  }
  EventPtr enqueue_matmul(const MatmulArgs& a) override {
    return gate_->submit(opencl::matmul_may_block(dev_, a), "matmul",
                         [this, a] { return matmul(a); });
  }
  EventPtr matmul(const MatmulArgs& a) {
    std::vector<std::shared_ptr<void>> keep;
    cl_event ev = opencl::enqueue_matmul(dev_, *pool_, q_, a, keep);
    if (!ev) return nullptr;
    return submitted(ev, "matmul", std::move(keep));
  }

  void finish() override {
    gate_->wait_idle();
    cl_check(clFinish(q_), "clFinish");
  }
  bool runs_inline() const override { return false; }
  std::vector<std::string> held() const override { return gate_->deferred(); }
  size_t calls_ahead() const override { return calls_ahead_; }
  size_t bytes_ahead() const override { return bytes_ahead_; }
  bool waits_on_device() const override { return true; }
  std::shared_ptr<Signal> create_signal() override {
    return std::make_shared<ClSignal>(dev_.context);
  }

  // A barrier with a wait list: later commands on this in-order queue start after `events`
  // complete, on the device. Events of another context (another device) cannot be waited on.
  bool enqueue_wait(const std::vector<EventPtr>& events) override {
    std::vector<cl_event> list;
    for (const EventPtr& e : events) {
      auto* ce = dynamic_cast<const ClEvent*>(e.get());
      if (!ce) return false;
      cl_context c = nullptr;
      clGetEventInfo(ce->handle(), CL_EVENT_CONTEXT, sizeof c, &c, nullptr);
      if (c != dev_.context) return false;
      list.push_back(ce->handle());
    }
    if (list.empty()) return true;
    gate_->submit(false, "wait", [this, list, events] {
      cl_check(
          clEnqueueBarrierWithWaitList(q_, static_cast<cl_uint>(list.size()), list.data(), nullptr),
          "clEnqueueBarrierWithWaitList");
      return EventPtr{};
    });
    gate_->note_waits(list);
    return true;
  }

 private:
  EventPtr enqueue_sort(const NativeArgs& a) {
    std::vector<std::shared_ptr<void>> keep;
    cl_event ev = opencl::enqueue_sort(dev_, *pool_, q_, a, keep);
    if (!ev) return nullptr;
    return submitted(ev, native_name(a), std::move(keep));
  }

  // Work just enqueued: flushed (so the device starts it without waiting for more) and its
  // event, completed by polling on a GPU (completion_poller.h) or by the driver's callback.
  EventPtr submitted(cl_event ev, std::string what, std::vector<std::shared_ptr<void>> keep) {
    clFlush(q_);
    return std::make_shared<ClEvent>(ev, std::move(what), std::move(keep), !dev_.cpu);
  }

  // The split scheme: `part` reduces contiguous chunks into partials, `final` combines them.
  cl_event split(const ClKernel& k, const Launcher& l, int64_t nred,
                 std::vector<std::shared_ptr<void>>& keep) {
    size_t parts = groups_for(nred, k.part->local, dev_.compute_units * 16);
    auto sa = pool_->allocate(parts * k.gen.acc_size);
    auto sp = pool_->allocate(parts * sizeof(cl_long));
    auto sh = pool_->allocate(parts * sizeof(cl_int));
    cl_mem ma = sa->mem(), mp = sp->mem(), mh = sh->mem();
    cl_long np = static_cast<cl_long>(parts);
    cl_event first =
        l.run(*k.part, parts, {{sizeof ma, &ma}, {sizeof mp, &mp}, {sizeof mh, &mh}}, true);
    clReleaseEvent(first);  // the in-order queue orders `final` after it
    keep = {sa, sp, sh};
    return l.run(*k.final, 1,
                 {{sizeof ma, &ma}, {sizeof mp, &mp}, {sizeof mh, &mh}, {sizeof np, &np}}, true);
  }

  ClDevice& dev_;
  std::shared_ptr<ClPool> pool_;
  Backend& backend_;  // immortal (the registry's), for the kernels of native primitives
  int device_;
  cl_command_queue q_ = nullptr;
  std::shared_ptr<HostGate> gate_ = std::make_shared<HostGate>(dev_.context, !dev_.cpu);
  size_t calls_ahead_ = calls_ahead_limit();
  size_t bytes_ahead_ = bytes_ahead_limit(dev_);
};

// Buffers kept for reuse: 512 MiB on a CPU device (its memory is the host's, shared with the
// cpu backend), a quarter of its memory on a GPU: there a 1 GiB buffer that is not kept costs a
// driver allocation at every call that needs one.
size_t pool_limit(const ClDevice& d) {
  if (std::optional<uint64_t> v =
          env_count("KILN_OPENCL_POOL_BYTES", "the bytes of freed device buffers kept for reuse"))
    return *v;
  const size_t floor = size_t{512} << 20;
  return d.cpu ? floor : std::max<size_t>(floor, d.memory / 4);
}

class OpenClBackend : public Backend {
 public:
  OpenClBackend() {
    place_pocl_cache();
    devices_ = discover();
    for (auto& d : devices_)
      pools_.push_back(d->available ? std::make_shared<ClPool>(*d, pool_limit(*d)) : nullptr);
  }

  std::string name() const override { return "opencl"; }
  std::vector<DeviceInfo> devices() override {
    std::vector<DeviceInfo> out;
    for (size_t i = 0; i < devices_.size(); ++i) {
      const ClDevice& d = *devices_[i];
      out.push_back(
          DeviceInfo{Device{"opencl", static_cast<int>(i)},
                     d.name.empty() ? "opencl" : d.description() + "; " + matmul_libraries(),
                     d.available, d.reason});
    }
    return out;
  }
  bool uses_host_memory() const override { return false; }

  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    return pools_[usable(device).index]->allocate(bytes);
  }

  std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) override {
    ClDevice& dev = usable(device);
    k.validate();
    std::string canon = k.canonical();
    std::promise<std::shared_ptr<const ClKernel>> mine;
    std::shared_future<std::shared_ptr<const ClKernel>> fut;
    bool builder = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find({device, canon});
      if (it != cache_.end()) {
        fut = it->second;
      } else {
        cache_.emplace(std::make_pair(device, canon), mine.get_future().share());
        builder = true;
      }
    }
    if (!builder) {
      ++g_memory_hits;
      return fut.get();  // waits for another thread's build; rethrows its error
    }
    try {
      auto built = build(dev, k);
      mine.set_value(built);
      return built;
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        cache_.erase({device, canon});  // a failed build is retried by the next call
      }
      mine.set_exception(std::current_exception());
      throw;
    }
  }

  std::unique_ptr<Queue> create_queue(int device) override {
    ClDevice& dev = usable(device);
    return std::make_unique<ClQueue>(dev, pools_[dev.index], *this, device);
  }

 private:
  ClDevice& usable(int device) {
    if (device < 0 || device >= static_cast<int>(devices_.size()))
      throw_error("opencl: device opencl:", device, " does not exist (", devices_.size(),
                  " OpenCL device(s))");
    ClDevice& d = *devices_[device];
    if (!d.available) throw_error("opencl: device opencl:", device, " is not usable: ", d.reason);
    return d;
  }

  static std::shared_ptr<const ClKernel> build(ClDevice& dev, const Kernel& k) {
    auto ck = std::make_shared<ClKernel>();
    ck->dev = &dev;
    ck->canon = merge_axes(k);
    ck->gen = generate(ck->canon, dev.caps(), dev.label());
    BuiltProgram p = build_program(dev, ck->gen.source, k.name);
    ck->program = p.program;
    ++(p.from_cache ? g_from_disk : g_built);
    if (ck->gen.reduction) {
      ck->reduce = make_entry(dev, p.program, "kiln_reduce");
      if (ck->canon.kept_axes() > 0) ck->rows = make_entry(dev, p.program, "kiln_rows");
      if (ck->gen.split) {
        ck->part = make_entry(dev, p.program, "kiln_part");
        ck->final = make_entry(dev, p.program, "kiln_final");
      }
    } else {
      ck->map = make_entry(dev, p.program, "kiln_map");
      if (dev.cpu) ck->map->local = 1;  // each work-group one contiguous run (kCpuRun)
    }
    ck->ir = k;
    ck->check = LaunchCheck(k);
    return ck;
  }

  std::vector<std::unique_ptr<ClDevice>> devices_;
  std::vector<std::shared_ptr<ClPool>> pools_;
  std::mutex mu_;
  // Keyed by the kernel's structure (canonical text), so equal kernels share one program.
  std::map<std::pair<int, std::string>, std::shared_future<std::shared_ptr<const ClKernel>>> cache_;
};

}  // namespace

BuildStats build_stats() { return {g_built.load(), g_from_disk.load(), g_memory_hits.load()}; }

}  // namespace opencl

std::shared_ptr<Backend> make_opencl_backend() { return std::make_shared<opencl::OpenClBackend>(); }

}  // namespace kiln
