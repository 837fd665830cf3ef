// What the opencl native kernels (gather, sort, scans, scatter_add, matmul) share: the check
// that an operand lives on the device, kernel creation, the per-(device, key) kernel cache and
// setting a kernel's arguments then enqueueing it over a 1-D range.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "backends/native.h"
#include "backends/opencl/memory.h"
#include "graph/immortal.h"

namespace kiln::opencl {

// The cl_mem of operand b of native op a; raises kiln::Error when b is not a buffer on dev (the
// plan must copy it there first).
cl_mem mem_on(ClDevice& dev, Buffer* b, const NativeArgs& a);

// Kernel `name` of program p; a failure says "clCreateKernel (<what>)".
cl_kernel make_kernel(cl_program p, const char* name, const char* what);

namespace detail {
template <class K>
struct KernelCache {
  std::mutex mu;
  std::map<std::pair<const ClDevice*, int64_t>, std::unique_ptr<K>> kernels;
};
template <class K>
KernelCache<K>& kernel_cache() {
  static Immortal<KernelCache<K>> cache;
  return cache.get();
}
}  // namespace detail

// The kernels of type K for (dev, key): made by make() (a std::unique_ptr<K>) on first use,
// under the cache's lock so each is built once, and never destroyed (work in flight at exit may
// still use them; graph/immortal.h). One cache per K.
template <class K, class Make>
K& cached_kernels(const ClDevice& dev, int64_t key, Make make) {
  auto& cache = detail::kernel_cache<K>();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto& slot = cache.kernels[{&dev, key}];
  if (!slot) slot = make();
  return *slot;
}

// A __local argument of `bytes` bytes (set with a null value).
struct LocalBytes {
  size_t bytes;
};

namespace detail {
void set_arg(cl_kernel k, cl_uint i, size_t size, const void* value, const char* what);
template <class T>
void set_arg(cl_kernel k, cl_uint i, const T& v, const char* what) {
  set_arg(k, i, sizeof(T), &v, what);
}
inline void set_arg(cl_kernel k, cl_uint i, const LocalBytes& l, const char* what) {
  set_arg(k, i, l.bytes, nullptr, what);
}
void enqueue(cl_command_queue q, cl_kernel k, size_t global, size_t local, cl_event* ev,
             const char* what);
}  // namespace detail

// Sets k's arguments in order (each value by its size, a LocalBytes as __local memory) and
// enqueues it over `global` work-items in work-groups of `local` (0: the driver chooses); `ev`
// receives its event when not null. Failures name `what` ("clSetKernelArg (<what>)").
template <class... Args>
void launch(cl_command_queue q, cl_kernel k, const char* what, size_t global, size_t local,
            cl_event* ev, const Args&... args) {
  cl_uint i = 0;
  (detail::set_arg(k, i++, args, what), ...);
  detail::enqueue(q, k, global, local, ev, what);
}

// The work-items for a loop over `total` elements in work-groups of `local`: one per element on a
// GPU; on a CPU device a few work-groups per compute unit, each work-item a contiguous run (as
// codegen.h's element-wise kernels). Returns the global size and sets the run length.
size_t chunked_grid(const ClDevice& dev, size_t local, int64_t total, cl_long& chunk);

}  // namespace kiln::opencl
