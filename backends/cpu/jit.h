// The process-wide JIT: one LLVM ORC LLJIT, created lazily on first use (thread-safe), that
// turns Kernel IR into native functions. Compiled kernels are cached in memory by
// Kernel::hash() and on disk as object files (disk_cache.h); every path goes through an object
// file (O3 pipeline for the host CPU, then the object layer), so a warm disk cache only skips
// LLVM's optimiser and code generator. No LLVM type appears here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "backends/kernel_ir.h"

namespace kiln::cpu {

// See codegen.h: runs points [begin, end) of the flattened kept domain.
using KernelFn = void (*)(void* const* buffers, const int64_t* params, int64_t begin, int64_t end);

// Bumped whenever generated code changes meaning or ABI: it is part of the disk-cache key.
constexpr int kCodegenVersion = 7;

struct JitStats {
  int64_t memory_hits = 0;
  int64_t disk_hits = 0;
  int64_t disk_rejected = 0;  // corrupt or stale entries that were rebuilt
  int64_t compiled = 0;       // kernels LLVM optimised and compiled
};

class Jit {
 public:
  static Jit& instance();
  // The compiled function for `k` (which must be the canonical kernel the codegen will see);
  // `key` is the cache key. Throws kiln::Error if LLVM fails.
  KernelFn get(const Kernel& k, uint64_t key);
  // The optimised LLVM IR of a kernel, for inspection and the vectorisation test.
  std::string optimized_ir(const Kernel& k);
  JitStats stats() const;
  // Forgets the in-memory cache (tests use it to force loads from disk).
  void clear_memory_cache();
  ~Jit();

 private:
  Jit();
  struct Impl;  // holds every LLVM object; defined in jit.cpp
  std::unique_ptr<Impl> impl_;
};

// "LLVM 15.0.6 ORC JIT, <cpu> (avx512f, avx2, fma)" without creating the JIT.
std::string host_description();

}  // namespace kiln::cpu
