// Memory counters with mlx.core's names, read from the cpu backend's buffer pool: the bytes of
// host arrays Kiln holds now, at its peak, and in its cache of free blocks. A benchmark resets
// the peak before a step and reads it after, as bench_train does in C++.
#include "kiln_py.h"
#ifdef KILN_HAVE_CPU_BACKEND
#include "backends/cpu/buffer_pool.h"
#endif

namespace kiln::py {
namespace {

#ifdef KILN_HAVE_CPU_BACKEND
cpu::PoolStats stats() { return cpu::BufferPool::instance()->stats(); }
#else
[[noreturn]] void no_pool() {
  throw Error("memory counters read the cpu backend's buffer pool, which this build lacks");
}
#endif

}  // namespace

void init_memory(nb::module_& m) {
#ifdef KILN_HAVE_CPU_BACKEND
  m.def(
      "get_active_memory", [] { return stats().live_bytes; },
      "Bytes of cpu-backend buffers in use now.");
  m.def(
      "get_peak_memory", [] { return stats().peak_live_bytes; },
      "The most bytes of cpu-backend buffers in use at once since reset_peak_memory().");
  m.def(
      "get_cache_memory", [] { return stats().cached_bytes; },
      "Bytes of free cpu-backend buffers kept for reuse.");
  m.def(
      "reset_peak_memory", [] { cpu::BufferPool::instance()->reset_peak(); },
      "Starts a new peak from what is in use now.");
#else
  for (const char* name :
       {"get_active_memory", "get_peak_memory", "get_cache_memory", "reset_peak_memory"})
    m.def(name, [] { no_pool(); });
#endif
}

}  // namespace kiln::py
