#include "backends/cpu/cpu_backend.h"

#include <tbb/info.h>

#include <optional>

#include "backends/cpu/buffer_pool.h"
#include "backends/cpu/canonical.h"
#include "backends/cpu/execute.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/split_reduce.h"
#include "graph/error.h"

namespace kiln {

namespace {

using cpu::Launch;

// A full reduction run as parallel partials (split_reduce.h).
struct SplitLaunch {
  Launch part, combine;
  std::optional<Launch> tail;
  size_t scratch_bytes = 0;
};

struct CpuKernel : CompiledKernel {
  Launch launch;
  std::optional<SplitLaunch> split;
  std::string name;
  size_t nbuffers = 0;
  int nparams = 0;  // launch must supply at least this many params
};

int params_needed(const Kernel& k) {
  int n = 0;
  auto see = [&](const Dim& d) { n = std::max(n, d.param + 1); };
  auto see_map = [&](const IndexMap& m) {
    for (const Dim& d : m.strides) see(d);
    see(m.offset);
  };
  for (const Dim& d : k.domain) see(d);
  for (const KernelBuffer& b : k.buffers) see_map(b.map);
  for (const Value& v : k.body)
    if (v.kind == ValueKind::Index) see_map(v.map);
  return n;
}

class CpuQueue : public Queue {
 public:
  EventPtr enqueue_kernel(const CompiledKernel& ck, const KernelArgs& args) override {
    auto& k = static_cast<const CpuKernel&>(ck);
    if (args.buffers.size() != k.nbuffers)
      throw_error("cpu backend: kernel ", k.name, " takes ", k.nbuffers, " buffers, got ",
                  args.buffers.size());
    if (static_cast<int>(args.params.size()) < k.nparams)
      throw_error("cpu backend: kernel ", k.name, " needs ", k.nparams, " runtime params, got ",
                  args.params.size());
    std::vector<void*> ptrs;
    for (Buffer* b : args.buffers) {
      if (!b || !b->host_ptr())
        throw_error("cpu backend: kernel ", k.name, " got a missing or non-host buffer");
      ptrs.push_back(b->host_ptr());
    }
    if (k.split) {
      run_split(*k.split, ptrs);
    } else {
      cpu::run_launch(k.launch, ptrs.data(), args.params.data());
    }
    return nullptr;
  }
  // Partials in parallel (each part is one TBB task), the tail and the combine inline.
  static void run_split(const SplitLaunch& s, std::vector<void*> ptrs) {
    std::vector<double> scratch((s.scratch_bytes + 7) / 8);  // 8-byte aligned
    ptrs.push_back(scratch.data());
    cpu::run_launch(s.part, ptrs.data(), nullptr);
    if (s.tail) cpu::run_launch(*s.tail, ptrs.data(), nullptr);
    cpu::run_launch(s.combine, ptrs.data(), nullptr);
  }

  EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) override {
    if (!dst.host_ptr()) throw_error("cpu backend: copy into a non-host buffer");
    src.read(dst.host_ptr(), 0, bytes);
    return nullptr;
  }
  EventPtr enqueue_matmul(const MatmulArgs& a) override {
    cpu::matmul(a);
    return nullptr;
  }
  void finish() override {}
  bool runs_inline() const override { return true; }
};

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::vector<DeviceInfo> devices() override {
    std::string desc = cpu::host_description() + ", " +
                       std::to_string(tbb::info::default_concurrency()) + " threads";
    return {DeviceInfo{Device{"cpu", 0}, desc, true, ""}};
  }
  bool uses_host_memory() const override { return true; }
  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    check_device(device);
    return cpu::BufferPool::instance()->allocate(bytes, Device{"cpu", device});
  }
  std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) override {
    check_device(device);
    k.validate();
    Kernel canon = cpu::merge_axes(k);
    auto ck = std::make_shared<CpuKernel>();
    ck->launch.fn = cpu::Jit::instance().get(canon, k.hash());
    ck->launch.domain = canon.domain;
    ck->launch.kept = canon.kept_axes();
    if (auto split = cpu::split_full_reduction(canon)) ck->split = compile_split(*split);
    ck->name = k.name;
    ck->nbuffers = k.buffers.size();
    ck->nparams = params_needed(k);
    return ck;
  }
  std::unique_ptr<Queue> create_queue(int device) override {
    check_device(device);
    return std::make_unique<CpuQueue>();
  }

 private:
  static Launch launch_of(const Kernel& k) {
    k.validate();  // a rewrite bug surfaces as kiln::Error, never as wrong memory accesses
    return Launch{cpu::Jit::instance().get(k, k.hash()), k.domain, k.kept_axes()};
  }

  static SplitLaunch compile_split(const cpu::SplitReduce& s) {
    SplitLaunch l;
    l.part = launch_of(s.part);
    if (s.tail) l.tail = launch_of(*s.tail);
    l.combine = launch_of(s.combine);
    l.scratch_bytes = static_cast<size_t>(s.combine.domain[0].value) * s.partial_dtype.size();
    return l;
  }

  static void check_device(int device) {
    if (device != 0)
      throw_error("cpu backend: device cpu:", device, " does not exist (cpu:0 only)");
  }
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend() {
  return std::make_shared<CpuBackend>();
}

}  // namespace kiln
