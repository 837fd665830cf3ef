// Host memory for the cpu backend: 64-byte aligned blocks from a process-wide pool. Eager
// evaluation allocates a temporary per op; fresh large allocations page-fault on first touch
// (on this machine that made an unfused gelu ~700 ms instead of ~100 ms), so freed large blocks
// are kept and handed out again. Freed small blocks are kept too, up to kSmallCached bytes: an
// aligned allocation and its free cost more than a small kernel's launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "graph/buffer.h"

namespace kiln::cpu {

struct PoolStats {
  int64_t reused = 0;          // allocations served from a kept block
  int64_t fresh = 0;           // allocations that went to the system allocator
  size_t cached_bytes = 0;     // bytes of free blocks kept now
  size_t live_bytes = 0;       // bytes of blocks handed out and not yet given back
  size_t peak_live_bytes = 0;  // the most live_bytes has been since reset_peak()
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Blocks at least this large are pooled.
  static constexpr size_t kPooledMin = size_t{1} << 16;
  // Smaller blocks are kept per size (64-byte steps) up to this many bytes in all.
  static constexpr size_t kSmallCached = size_t{8} << 20;

  static std::shared_ptr<BufferPool> instance();
  explicit BufferPool(size_t max_cached_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  std::shared_ptr<Buffer> allocate(size_t bytes, Device device);
  PoolStats stats() const;
  void trim();  // frees every kept block
  // Starts a new peak of live bytes from what is live now (a benchmark measuring one step).
  void reset_peak();

 private:
  friend class PooledBuffer;
  struct Block {
    void* data;
    size_t capacity;
  };
  Block take(size_t bytes);
  void give_back(Block b);

  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kiln::cpu
