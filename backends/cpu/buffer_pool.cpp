#include "backends/cpu/buffer_pool.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "graph/env.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln::cpu {

struct BufferPool::State {
  mutable std::mutex mu;
  std::multimap<size_t, void*> free;  // capacity -> block, large blocks
  // Small blocks, per capacity / 64 - 1, and their bytes (counted in stats.cached_bytes too).
  std::vector<void*> small[BufferPool::kPooledMin / 64];
  size_t small_bytes = 0;
  size_t max_cached;
  PoolStats stats;
  // Live bytes are counted for every block, small ones too, without the lock: atomics.
  std::atomic<size_t> live{0}, peak{0};
  void add_live(size_t bytes) {
    size_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    size_t p = peak.load(std::memory_order_relaxed);
    while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
  }
};

namespace {

// Large blocks are rounded to 64 KiB so slightly different sizes share blocks.
size_t capacity_for(size_t bytes) {
  size_t unit = bytes >= BufferPool::kPooledMin ? BufferPool::kPooledMin : 64;
  size_t c = (bytes + unit - 1) / unit * unit;
  return c == 0 ? 64 : c;
}

}  // namespace

// A block of the pool; returns it on destruction. Holds the pool alive.
class PooledBuffer : public Buffer {
 public:
  PooledBuffer(std::shared_ptr<BufferPool> pool, BufferPool::Block b, size_t bytes, Device d)
      : pool_(std::move(pool)), block_(b), bytes_(bytes), device_(std::move(d)) {}
  ~PooledBuffer() override { pool_->give_back(block_); }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;

  size_t bytes() const override { return bytes_; }
  Device device() const override { return device_; }
  void* host_ptr() override { return block_.data; }
  void read(void* dst, size_t offset, size_t n) const override {
    if (offset + n > bytes_)
      throw_error("cpu buffer: read of ", n, " bytes at ", offset, " past its ", bytes_, " bytes");
    std::memcpy(dst, static_cast<const char*>(block_.data) + offset, n);
  }
  void write(const void* src, size_t offset, size_t n) override {
    if (offset + n > bytes_)
      throw_error("cpu buffer: write of ", n, " bytes at ", offset, " past its ", bytes_, " bytes");
    std::memcpy(static_cast<char*>(block_.data) + offset, src, n);
  }

 private:
  std::shared_ptr<BufferPool> pool_;
  BufferPool::Block block_;
  size_t bytes_;
  Device device_;
};

std::shared_ptr<BufferPool> BufferPool::instance() {
  // Keep up to 4 GiB of free blocks unless KILN_CPU_POOL_BYTES says otherwise.
  static Immortal<std::shared_ptr<BufferPool>> pool([] {
    std::optional<uint64_t> max =
        env_count("KILN_CPU_POOL_BYTES", "the bytes of free cpu buffers kept for reuse");
    return std::make_shared<BufferPool>(max ? *max : size_t{4} << 30);
  }());
  return pool.get();
}

BufferPool::BufferPool(size_t max_cached_bytes) : s_(std::make_unique<State>()) {
  s_->max_cached = max_cached_bytes;
}

BufferPool::~BufferPool() { trim(); }

BufferPool::Block BufferPool::take(size_t bytes) {
  size_t cap = capacity_for(bytes);
  if (cap < kPooledMin) {
    std::lock_guard<std::mutex> lock(s_->mu);
    auto& kept = s_->small[cap / 64 - 1];
    if (!kept.empty()) {
      Block b{kept.back(), cap};
      kept.pop_back();
      s_->small_bytes -= cap;
      s_->stats.cached_bytes -= cap;
      ++s_->stats.reused;
      s_->add_live(cap);
      return b;
    }
  } else {
    std::lock_guard<std::mutex> lock(s_->mu);
    // The smallest kept block that fits without wasting more than half of it.
    auto it = s_->free.lower_bound(cap);
    if (it != s_->free.end() && it->first <= 2 * cap) {
      it = std::prev(s_->free.upper_bound(it->first));  // the most recently freed: cache-warm
      Block b{it->second, it->first};
      s_->free.erase(it);
      s_->stats.cached_bytes -= b.capacity;
      ++s_->stats.reused;
      s_->add_live(b.capacity);
      return b;
    }
  }
  void* p = std::aligned_alloc(64, cap);
  if (!p) throw_error("cpu backend: out of host memory allocating ", bytes, " bytes");
  std::lock_guard<std::mutex> lock(s_->mu);
  ++s_->stats.fresh;
  s_->add_live(cap);
  return Block{p, cap};
}

void BufferPool::give_back(Block b) {
  s_->live.fetch_sub(b.capacity, std::memory_order_relaxed);
  if (b.capacity < kPooledMin) {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->small_bytes + b.capacity <= kSmallCached &&
        s_->stats.cached_bytes + b.capacity <= s_->max_cached) {
      s_->small[b.capacity / 64 - 1].push_back(b.data);
      s_->small_bytes += b.capacity;
      s_->stats.cached_bytes += b.capacity;
      return;
    }
  } else {
    std::lock_guard<std::mutex> lock(s_->mu);
    if (s_->stats.cached_bytes + b.capacity <= s_->max_cached) {
      s_->free.emplace(b.capacity, b.data);
      s_->stats.cached_bytes += b.capacity;
      return;
    }
  }
  std::free(b.data);
}

std::shared_ptr<Buffer> BufferPool::allocate(size_t bytes, Device device) {
  Block b = take(bytes);
  return std::make_shared<PooledBuffer>(shared_from_this(), b, bytes, std::move(device));
}

PoolStats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(s_->mu);
  PoolStats st = s_->stats;
  st.live_bytes = s_->live.load(std::memory_order_relaxed);
  st.peak_live_bytes = s_->peak.load(std::memory_order_relaxed);
  return st;
}

void BufferPool::reset_peak() { s_->peak.store(s_->live.load()); }

void BufferPool::trim() {
  std::lock_guard<std::mutex> lock(s_->mu);
  for (auto& kv : s_->free) std::free(kv.second);
  s_->free.clear();
  for (auto& kept : s_->small) {
    for (void* p : kept) std::free(p);
    kept.clear();
  }
  s_->small_bytes = 0;
  s_->stats.cached_bytes = 0;
}

}  // namespace kiln::cpu
