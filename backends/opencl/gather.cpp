#include "backends/opencl/gather.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "backends/native.h"
#include "backends/opencl/memory.h"
#include "backends/opencl/native_launch.h"
#include "backends/opencl/program_cache.h"
#include "graph/error.h"

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
  return cached_kernels<GatherKernel>(dev, static_cast<int64_t>(element_bytes), [&] {
    auto k = std::make_unique<GatherKernel>();
    k->program = build_program(dev, source(element_bytes), "gather").program;
    k->kernel = make_kernel(k->program, "kiln_gather", "gather");
    k->local = local_size(dev, k->kernel);
    return k;
  });
}

}  // namespace

cl_event enqueue_gather(ClDevice& dev, cl_command_queue q, const NativeArgs& a) {
  check_native_buffers(a);
  const int64_t total = a.out_elements();
  if (total == 0) return nullptr;
  cl_mem ma = mem_on(dev, a.buffers[0], a), mi = mem_on(dev, a.buffers[1], a),
         mo = mem_on(dev, a.buffers[2], a);
  GatherKernel& k = kernel_for(dev, a.dtype.size());
  cl_long chunk = 0, outer = a.outer, n = a.n, inner = a.inner, m = a.m;
  size_t global = chunked_grid(dev, k.local, total, chunk);
  cl_int shared = a.shared_index ? 1 : 0;
  std::lock_guard<std::mutex> lock(k.mu);
  cl_event ev = nullptr;
  launch(q, k.kernel, "gather", global, k.local, &ev, ma, mi, mo, outer, n, inner, m, shared,
         chunk);
  return ev;
}

}  // namespace kiln::opencl
