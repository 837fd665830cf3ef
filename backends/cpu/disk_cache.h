// The on-disk cache of compiled kernels: one object file per kernel under $KILN_CACHE_DIR/cpu
// (default $XDG_CACHE_HOME/kiln/cpu, ~/.cache/kiln/cpu, or /tmp/kiln-<uid>/cpu without a home),
// so a second process skips LLVM entirely. The folder must be the user's own and writable by
// nobody else (objects become code here): otherwise Kiln warns once and compiles in memory only.
// An entry is keyed by the kernel hash and an environment key (LLVM version, host CPU name and
// features, Kiln's codegen version); it carries both, the kernel's full canonical text (so a
// hash collision is a miss, never another kernel's code), the payload size and an FNV-1a
// checksum. Anything that does not verify (unreadable, truncated, wrong magic, key or kernel,
// bad checksum) is reported as a miss so the caller rebuilds and overwrites it: it is never
// executed.
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

class DiskCache {
 public:
  // `env_key` describes everything besides the kernel that the object depends on.
  explicit DiskCache(std::string env_key);

  // The folder in use now ($KILN_CACHE_DIR is read on every call so tests can redirect it), or
  // "" when it is refused (not the user's own, or writable by others).
  static std::string directory();
  std::string path_for(uint64_t kernel_hash) const;

  enum class Status { Hit, Missing, Rejected };
  struct Lookup {
    Status status = Status::Missing;
    std::vector<char> object;
    std::string why;  // for Rejected
  };
  // `kernel` is Kernel::canonical() of the kernel wanted: an entry for another is rejected.
  Lookup load(uint64_t kernel_hash, const std::string& kernel) const;
  // Best effort (a read-only home must not break compilation): false when it could not write.
  bool store(uint64_t kernel_hash, const std::vector<char>& object,
             const std::string& kernel) const;
  // store() on a background thread, so a compile does not wait for the file system (creating
  // a file costs ~0.3-1 ms here, more when the disk is busy). load() sees queued entries at
  // once; flush() (and the destructor) wait until every queued entry is written.
  void store_later(uint64_t kernel_hash, std::vector<char> object, std::string kernel);
  void flush();
  ~DiskCache();

 private:
  std::string env_key_;
  uint64_t env_hash_;
  bool write(uint64_t kernel_hash, const std::string& path, const std::vector<char>& object,
             const std::string& kernel) const;
  void write_queued();  // the writer thread's loop
  struct Writer;        // the queue and its thread, started on first use
  std::unique_ptr<Writer> writer_;
};

}  // namespace kiln::cpu
