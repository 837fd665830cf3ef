// The on-disk cache of compiled kernels: one object file per kernel under
// $KILN_CACHE_DIR/cpu (default ~/.cache/kiln/cpu), so a second process skips LLVM entirely.
// An entry is keyed by the kernel hash and an environment key (LLVM version, host CPU name and
// features, Kiln's codegen version); its header carries both plus the payload size and an
// FNV-1a checksum. Anything that does not verify (truncated, wrong magic or key, bad checksum)
// is reported as a miss so the caller rebuilds and overwrites it: it is never executed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

class DiskCache {
 public:
  // `env_key` describes everything besides the kernel that the object depends on.
  explicit DiskCache(std::string env_key);

  // The folder in use now ($KILN_CACHE_DIR is read on every call so tests can redirect it).
  static std::string directory();
  std::string path_for(uint64_t kernel_hash) const;

  enum class Status { Hit, Missing, Rejected };
  struct Lookup {
    Status status = Status::Missing;
    std::vector<char> object;
    std::string why;  // for Rejected
  };
  Lookup load(uint64_t kernel_hash) const;
  // Best effort (a read-only home must not break compilation): false when it could not write.
  bool store(uint64_t kernel_hash, const std::vector<char>& object) const;

 private:
  std::string env_key_;
  uint64_t env_hash_;
};

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ULL);

}  // namespace kiln::cpu
