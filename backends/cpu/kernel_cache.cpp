#include "backends/cpu/kernel_cache.h"

#include <cstdlib>
#include <string>

#include "graph/error.h"

namespace kiln::cpu {

JitCode::JitCode(KernelFn fn, int64_t bytes, std::string kernel, std::function<void()> release)
    : fn_(fn), bytes_(bytes), kernel_(std::move(kernel)), release_(std::move(release)) {}

JitCode::~JitCode() {
  if (release_) release_();
}

int64_t kernel_cache_budget_from_env() {
  const char* env = std::getenv("KILN_KERNEL_CACHE_MB");
  if (!env || !*env) return kDefaultKernelCacheMB << 20;
  std::string s(env);
  bool digits = s.size() <= 12 && s.find_first_not_of("0123456789") == std::string::npos;
  if (!digits)
    throw_error("KILN_KERNEL_CACHE_MB='", s,
                "' is not a size: give the in-memory kernel cache's budget in megabytes as a "
                "non-negative integer (default ",
                kDefaultKernelCacheMB, "; 0 caches nothing beyond kernels in use)");
  return std::stoll(s) << 20;
}

JitCodePtr KernelCache::find(uint64_t key, std::vector<JitCodePtr>& dropped) {
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.at);
    return it->second.code;
  }
  auto live = loaded_.find(key);
  if (live == loaded_.end()) return nullptr;
  JitCodePtr code = live->second.lock();
  if (code) put(key, code, dropped);  // evicted while in use: resident again, no second copy
  return code;
}

void KernelCache::insert(uint64_t key, JitCodePtr code, std::vector<JitCodePtr>& dropped) {
  loaded_[key] = code;
  put(key, std::move(code), dropped);
}

void KernelCache::put(uint64_t key, JitCodePtr code, std::vector<JitCodePtr>& dropped) {
  if (auto it = index_.find(key); it != index_.end()) {  // a concurrent load won the race
    bytes_ -= it->second.code->bytes();
    dropped.push_back(std::move(it->second.code));
    lru_.erase(it->second.at);
    index_.erase(it);
  }
  bytes_ += code->bytes();
  lru_.push_front(key);
  index_.emplace(key, Entry{std::move(code), lru_.begin()});
  evict(dropped);
}

void KernelCache::evict(std::vector<JitCodePtr>& dropped) {
  while (bytes_ > budget_ && !lru_.empty()) {
    auto it = index_.find(lru_.back());
    bytes_ -= it->second.code->bytes();
    dropped.push_back(std::move(it->second.code));
    index_.erase(it);
    lru_.pop_back();
    ++evictions_;
  }
}

void KernelCache::set_budget(int64_t bytes, std::vector<JitCodePtr>& dropped) {
  budget_ = bytes;
  evict(dropped);
}

void KernelCache::clear(std::vector<JitCodePtr>& dropped) {
  for (auto& [key, e] : index_) dropped.push_back(std::move(e.code));
  index_.clear();
  lru_.clear();
  bytes_ = 0;
}

void KernelCache::forget(uint64_t key) {
  auto it = loaded_.find(key);
  if (it != loaded_.end() && it->second.expired()) loaded_.erase(it);
}

}  // namespace kiln::cpu
