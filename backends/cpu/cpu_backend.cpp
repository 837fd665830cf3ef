#include "backends/cpu/cpu_backend.h"

#include <tbb/info.h>

#include <optional>

#include "backends/canonical.h"
#include "backends/cpu/buffer_pool.h"
#include "backends/cpu/execute.h"
#include "backends/cpu/jit.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/native_ops.h"
#include "backends/cpu/row_walk.h"
#include "backends/cpu/streaming_stores.h"
#include "backends/launch_check.h"
#include "backends/split_reduce.h"
#include "graph/device_hooks.h"
#include "graph/error.h"

namespace kiln {

namespace {

using cpu::Launch;

// Full reductions of at least 2^20 elements run as 16 partials in float64 (split_reduce.h): one
// core reads only ~8 of the ~16 GB/s two cores read on this machine.
constexpr SplitOptions kSplit{16, int64_t{1} << 20, true};

// A full reduction run as parallel partials (split_reduce.h).
struct SplitLaunch {
  Launch part, combine;
  std::optional<Launch> tail;
  size_t scratch_bytes = 0;
};

struct CpuKernel : CompiledKernel {
  // The JIT code of every launch below: holding it keeps the code loaded whatever the JIT's
  // cache evicts.
  std::vector<cpu::JitCodePtr> code;
  Kernel ir;  // as compiled, to check every launch against
  LaunchCheck check;
  Launch launch;
  std::optional<SplitLaunch> split;
  // A row kernel the backend does not walk runs as its passes (row_walk.h).
  std::vector<std::shared_ptr<const CompiledKernel>> passes;
  std::string name;
};

class CpuQueue : public Queue {
 public:
  EventPtr enqueue_kernel(const CompiledKernel& ck, const KernelArgs& args) override {
    auto& k = static_cast<const CpuKernel&>(ck);
    k.check(k.ir, args);
    if (!k.passes.empty()) {
      for (const auto& p : k.passes) enqueue_kernel(*p, args);
      return nullptr;
    }
    // Pointers on the stack for the usual kernel (a heap vector cost ~0.1 us per small launch),
    // one slot spare for a split reduction's scratch.
    constexpr size_t kOnStack = 32;
    size_t n = args.buffers.size();
    void* stack[kOnStack];
    std::vector<void*> heap(n + 1 > kOnStack ? n + 1 : 0);
    void** ptrs = heap.empty() ? stack : heap.data();
    for (size_t i = 0; i < n; ++i) {
      Buffer* b = args.buffers[i];
      if (!b || !(ptrs[i] = b->host_ptr()))
        throw_error("cpu backend: kernel ", k.name, " got a missing or non-host buffer");
    }
    if (k.split) {
      run_split(*k.split, ptrs, n, args.params.data());
    } else {
      cpu::run_launch(k.launch, ptrs, args.params.data());
    }
    return nullptr;
  }
  // Partials in parallel (each part is one TBB task), the tail and the combine inline. `ptrs`
  // has room for one more pointer after its `n`.
  static void run_split(const SplitLaunch& s, void** ptrs, size_t n, const int64_t* params) {
    std::vector<double> scratch((s.scratch_bytes + 7) / 8);  // 8-byte aligned
    ptrs[n] = scratch.data();
    cpu::run_launch(s.part, ptrs, params);  // launch scalars; every Dim is constant
    if (s.tail) cpu::run_launch(*s.tail, ptrs, params);
    cpu::run_launch(s.combine, ptrs, params);
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
  EventPtr enqueue_native(const NativeArgs& a) override {
    cpu::run_native(a);
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
                       std::to_string(tbb::info::default_concurrency()) + " threads; " +
                       cpu::matmul_libraries();
    return {DeviceInfo{Device{"cpu", 0}, desc, true, ""}};
  }
  bool uses_host_memory() const override { return true; }
  bool runs_row_kernels() const override { return true; }
  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    check_device(device);
    return cpu::BufferPool::instance()->allocate(bytes, Device{"cpu", device});
  }
  std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) override {
    check_device(device);
    k.validate();
    auto ck = std::make_shared<CpuKernel>();
    if (k.is_rows()) {
      if (cpu::row_walk_fits(k)) {  // one walk over the rows, each row's passes in cache
        cpu::CodegenOptions options;
        options.streaming_stores = cpu::streams_output(k);  // past the last-level cache
        ck->launch = launch_of(k, k.hash(), ck->code, options);
        ck->launch.kept = k.ndim() - k.row_axes();  // the launch splits the rows
      } else {
        for (size_t i = 0; i < k.passes.size(); ++i)
          ck->passes.push_back(compile(device, k.pass_kernel(i)));
      }
    } else {
      Kernel canon = merge_axes(k);
      ck->launch = launch_of(canon, k.hash(), ck->code);
      if (auto split = split_full_reduction(canon, kSplit))
        ck->split = compile_split(*split, ck->code);
    }
    ck->ir = k;
    ck->check = LaunchCheck(k);
    ck->name = k.name;
    return ck;
  }
  std::unique_ptr<Queue> create_queue(int device) override {
    check_device(device);
    return std::make_unique<CpuQueue>();
  }

 private:
  // `key` is the hash of the kernel as the user built it (merge_axes is deterministic).
  static Launch launch_of(const Kernel& k, uint64_t key, std::vector<cpu::JitCodePtr>& code,
                          const cpu::CodegenOptions& options = {}) {
    code.push_back(cpu::Jit::instance().get(k, key, options));
    return Launch{code.back()->fn(), k.domain, k.kept_axes()};
  }
  static Launch launch_of(const Kernel& k, std::vector<cpu::JitCodePtr>& code) {
    k.validate();  // a rewrite bug surfaces as kiln::Error, never as wrong memory accesses
    return launch_of(k, k.hash(), code);
  }

  static SplitLaunch compile_split(const SplitReduce& s, std::vector<cpu::JitCodePtr>& code) {
    SplitLaunch l;
    l.part = launch_of(s.part, code);
    if (s.tail) l.tail = launch_of(*s.tail, code);
    l.combine = launch_of(s.combine, code);
    l.scratch_bytes = static_cast<size_t>(s.combine.domain[0].value) * s.partial_dtype.size();
    return l;
  }

  static void check_device(int device) {
    if (device != 0)
      throw_error("cpu backend: device cpu:", device, " does not exist (cpu:0 only)");
  }
};

}  // namespace

std::shared_ptr<Backend> make_cpu_backend() { return std::make_shared<CpuBackend>(); }

}  // namespace kiln
