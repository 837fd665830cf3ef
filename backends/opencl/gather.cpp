#include "backends/opencl/gather.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "backends/native.h"
#include "backends/opencl/memory.h"
#include "backends/opencl/program_cache.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln::opencl {

namespace {

struct GatherKernel {
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  size_t local = 1;  // work-group size: a power of two within the device's and kernel's limits
  std::mutex mu;     // argument state is shared
};

// Work-item t copies the output elements [t * chunk, (t + 1) * chunk); `shared`: one index
// per position j along m, else one per output element. The index rule: negative from the
// end, then clamped to [0, n - 1].
std::string source(size_t element_bytes) {
  const char* t = element_bytes == 1   ? "uchar"
                  : element_bytes == 2 ? "ushort"
                  : element_bytes == 4 ? "uint"
                                       : "ulong";
  return std::string("#define T ") + t + "\n" + R"(
__kernel void kiln_gather(__global const T* a, __global const long* idx, __global T* out,
    long outer, long n, long inner, long m, int shared, long chunk) {
  const long total = outer * m * inner;
  const long first = (long)get_global_id(0) * chunk;
  const long end = min(first + chunk, total);
  if (first >= end) return;
  // (o, j, k): the output position of g, divided out once and then stepped.
  long k = first % inner, row = first / inner;
  long j = row % m, o = row / m;
  for (long g = first; g < end; ++g) {
    long i = idx[shared ? j : g];
    if (i < 0) i += n;
    i = clamp(i, 0L, n - 1);
    out[g] = a[(o * n + i) * inner + k];
    if (++k == inner) {
      k = 0;
      if (++j == m) j = 0, ++o;
    }
  }
}
)";
}

GatherKernel& kernel_for(ClDevice& dev, size_t element_bytes) {
  struct Cache {
    std::mutex mu;
    std::map<std::pair<const ClDevice*, size_t>, std::unique_ptr<GatherKernel>> kernels;
  };
  static Immortal<Cache> cache;
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& slot = cache->kernels[{&dev, element_bytes}];
  if (!slot) {
    auto k = std::make_unique<GatherKernel>();
    k->program = build_program(dev, source(element_bytes), "gather").program;
    cl_int err = CL_SUCCESS;
    k->kernel = clCreateKernel(k->program, "kiln_gather", &err);
    cl_check(err, "clCreateKernel (gather)");
    k->local = local_size(dev, k->kernel);
    slot = std::move(k);
  }
  return *slot;
}

cl_mem mem_on(ClDevice& dev, Buffer* b, const NativeArgs& a) {
  auto* cb = dynamic_cast<ClBuffer*>(b);
  if (!cb || &cb->cl_device() != &dev)
    throw_error("opencl: ", native_name(a), " got a buffer that is not on ", dev.label(),
                " (the plan must copy it there first)");
  return cb->mem();
}

}  // namespace

cl_event enqueue_gather(ClDevice& dev, cl_command_queue q, const NativeArgs& a) {
  std::vector<size_t> bytes;
  for (Buffer* b : a.buffers) bytes.push_back(b ? b->bytes() : 0);
  check_native_args(a, bytes);
  const int64_t total = a.out_elements();
  if (total == 0) return nullptr;
  cl_mem ma = mem_on(dev, a.buffers[0], a), mi = mem_on(dev, a.buffers[1], a),
         mo = mem_on(dev, a.buffers[2], a);
  GatherKernel& k = kernel_for(dev, a.dtype.size());
  // A GPU gets one work-item per element; a CPU device a few work-groups per compute unit, each
  // work-item a contiguous run (as codegen.h's element-wise kernels).
  auto local = static_cast<int64_t>(k.local);
  int64_t groups = (total + local - 1) / local;
  if (dev.cpu) groups = std::min<int64_t>(groups, int64_t{4} * dev.compute_units);
  cl_long chunk = (total + groups * local - 1) / (groups * local);
  cl_long outer = a.outer, n = a.n, inner = a.inner, m = a.m;
  cl_int shared = a.shared_index ? 1 : 0;
  const std::pair<size_t, const void*> args[] = {
      {sizeof ma, &ma},       {sizeof mi, &mi},         {sizeof mo, &mo},
      {sizeof outer, &outer}, {sizeof n, &n},           {sizeof inner, &inner},
      {sizeof m, &m},         {sizeof shared, &shared}, {sizeof chunk, &chunk}};
  std::lock_guard<std::mutex> lock(k.mu);
  for (cl_uint i = 0; i < 9; ++i)
    cl_check(clSetKernelArg(k.kernel, i, args[i].first, args[i].second), "clSetKernelArg (gather)");
  size_t global = static_cast<size_t>(groups) * k.local, lsize = k.local;
  cl_event ev = nullptr;
  cl_check(clEnqueueNDRangeKernel(q, k.kernel, 1, nullptr, &global, &lsize, 0, nullptr, &ev),
           "clEnqueueNDRangeKernel (gather)");
  return ev;
}

}  // namespace kiln::opencl
