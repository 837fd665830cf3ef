// The process-wide JIT: one LLVM ORC LLJIT, created lazily on first use, that turns Kernel IR
// into native functions. Every path goes through an object file (O3 pipeline for the host CPU,
// then the object layer), cached on disk (disk_cache.h), so a warm disk cache only skips LLVM's
// optimiser and code generator. Loaded kernels are kept in an in-memory LRU cache under a byte
// budget; each is its own ORC resource (one JITDylib and ResourceTracker) whose machine code is
// freed when the last handle to it goes. Compiles of different kernels run concurrently.
// No LLVM type appears here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/cpu/codegen_options.h"
#include "backends/cpu/kernel_cache.h"
#include "backends/kernel_ir.h"

namespace kiln::cpu {

// Bumped whenever generated code changes meaning or ABI: it is part of the disk-cache key.
constexpr int kCodegenVersion = 11;

struct JitStats {
  int64_t memory_hits = 0;  // served without loading: from the cache or a handle still alive
  int64_t disk_hits = 0;
  int64_t disk_rejected = 0;   // corrupt or stale entries that were rebuilt
  int64_t compiled = 0;        // kernels LLVM optimised and compiled
  int64_t evicted = 0;         // cache entries dropped to stay within the budget
  int64_t freed = 0;           // kernels whose machine code was released (no handle left)
  int64_t cached_kernels = 0;  // in the in-memory cache now
  int64_t cached_bytes = 0;    // their estimated memory (JitCode::bytes; <= budget_bytes)
  int64_t loaded_kernels = 0;  // kernels whose code is mapped now (cached or held elsewhere)
  int64_t budget_bytes = 0;
  // Where compile time went, summed over all kernels (per thread: concurrent compiles add up).
  double codegen_ms = 0;   // Kernel IR -> LLVM IR, verified
  double optimize_ms = 0;  // the O3 pipeline
  double emit_ms = 0;      // instruction selection, register allocation, object emission
  double link_ms = 0;      // ORC: loading objects into the JIT and resolving the symbol
  double disk_ms = 0;      // reading and verifying disk-cache entries
};

class Jit {
 public:
  // The process JIT. Its cache budget comes from KILN_KERNEL_CACHE_MB (megabytes, a
  // non-negative integer; 0 keeps nothing cached beyond the handles users hold); a malformed
  // value raises kiln::Error.
  static Jit& instance();
  // The compiled function for `k` (which must be the canonical kernel the codegen will see)
  // built with `options`; `key` is the cache key of `k` (the options are folded into it).
  // Thread-safe: different kernels compile concurrently, concurrent requests for one kernel
  // build it once. Throws kiln::Error if LLVM fails.
  JitCodePtr get(const Kernel& k, uint64_t key, const CodegenOptions& options = {});
  // The optimised LLVM IR of a kernel, for inspection and the vectorisation test.
  std::string optimized_ir(const Kernel& k, const CodegenOptions& options = {});
  // The host assembly of a kernel, for inspection and the streaming-store test.
  std::string assembly(const Kernel& k, const CodegenOptions& options = {});
  JitStats stats() const;
  // Sets the cache's byte budget, evicting least recently used kernels down to it now.
  void set_cache_budget(int64_t bytes);
  // Waits until every compiled kernel is written to the disk cache (writes happen on a
  // background thread, off the compile's critical path).
  void flush_disk_cache();
  // Forgets the in-memory cache (tests use it to force loads from disk). Code held elsewhere
  // stays loaded and is still shared by later requests.
  void clear_memory_cache();
  ~Jit();

  struct Impl;  // holds every LLVM object; defined in jit.cpp

 private:
  Jit();
  // get() for one cache key; the code returned may be another kernel's on a hash collision.
  JitCodePtr get(const Kernel& k, const CodegenOptions& options, uint64_t key,
                 const std::string& text);
  std::shared_ptr<Impl> impl_;  // shared with every JitCode: the JIT outlives its code
};

// "LLVM 15.0.6 ORC JIT, <cpu> (avx512f, avx2, fma)" without creating the JIT.
std::string host_description();

}  // namespace kiln::cpu
