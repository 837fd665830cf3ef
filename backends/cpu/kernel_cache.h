// The cpu backend's in-memory kernel cache: loaded kernels (JitCode handles) by kernel hash,
// least recently used first out once their estimated memory exceeds a budget. Eviction drops
// the cache's handle only; code that a compiled kernel still holds stays loaded, and a later
// request for it gets that same code back (a registry of weak handles) instead of loading a
// second copy. Not thread-safe: the Jit calls it under its lock, and destroys the handles it
// hands back (evicted ones) after unlocking, since freeing code calls back into the Jit.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

// See codegen.h: runs points [begin, end) of the flattened kept domain.
using KernelFn = void (*)(void* const* buffers, const int64_t* params, int64_t begin, int64_t end);

// What a loaded kernel costs beyond its object file's size: measured, a 2 KB fused-gelu object
// loaded from disk adds ~25 KB of RSS (a page each for code, constants and data, plus ORC's and
// RuntimeDyld's bookkeeping). The cache charges each kernel object size + this.
constexpr int64_t kLoadedKernelOverhead = 24 << 10;

// The budget when KILN_KERNEL_CACHE_MB is unset: 256 MB, about 10,000 typical kernels: far
// more than a program's working set, yet a bound on a process that makes kernels without end.
constexpr int64_t kDefaultKernelCacheMB = 256;

// One loaded kernel. Its machine code stays mapped while any handle to it lives; `release`
// (run by the destructor) frees it.
class JitCode {
 public:
  JitCode(KernelFn fn, int64_t bytes, std::string kernel, std::function<void()> release);
  ~JitCode();
  JitCode(const JitCode&) = delete;
  JitCode& operator=(const JitCode&) = delete;
  KernelFn fn() const { return fn_; }
  int64_t bytes() const { return bytes_; }  // the memory it is charged for (see above)
  // Kernel::canonical() of the kernel this code computes: a cache hit is confirmed against it.
  const std::string& kernel() const { return kernel_; }

 private:
  KernelFn fn_;
  int64_t bytes_;
  std::string kernel_;
  std::function<void()> release_;
};
using JitCodePtr = std::shared_ptr<const JitCode>;

// The budget in bytes from KILN_KERNEL_CACHE_MB (a non-negative integer number of megabytes),
// or the default; raises kiln::Error for anything else.
int64_t kernel_cache_budget_from_env();

class KernelCache {
 public:
  explicit KernelCache(int64_t budget_bytes) : budget_(budget_bytes) {}

  // The code for `key` if it is cached or still held elsewhere (then cached again); null if not.
  // Handles pushed to `dropped` must be destroyed by the caller after it unlocks.
  JitCodePtr find(uint64_t key, std::vector<JitCodePtr>& dropped);
  // Caches newly loaded code (most recently used), then evicts down to the budget.
  void insert(uint64_t key, JitCodePtr code, std::vector<JitCodePtr>& dropped);
  void set_budget(int64_t bytes, std::vector<JitCodePtr>& dropped);
  void clear(std::vector<JitCodePtr>& dropped);
  // Called when code for `key` was freed: forgets its weak handle unless a newer load replaced it.
  void forget(uint64_t key);

  int64_t entries() const { return static_cast<int64_t>(index_.size()); }
  int64_t bytes() const { return bytes_; }
  int64_t budget() const { return budget_; }
  int64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    JitCodePtr code;
    std::list<uint64_t>::iterator at;  // in lru_
  };
  void evict(std::vector<JitCodePtr>& dropped);
  void put(uint64_t key, JitCodePtr code, std::vector<JitCodePtr>& dropped);

  int64_t budget_;
  int64_t bytes_ = 0;
  int64_t evictions_ = 0;
  std::list<uint64_t> lru_;  // most recently used first
  std::unordered_map<uint64_t, Entry> index_;
  std::unordered_map<uint64_t, std::weak_ptr<const JitCode>> loaded_;  // every key with live code
};

}  // namespace kiln::cpu
