#include "backends/opencl/memory.h"

#include "graph/error.h"

namespace kiln::opencl {

namespace {

// Size classes: powers of two up to 1 MiB, then whole MiBs (at most 1/2 and 1/1024 wasted).
size_t size_class(size_t bytes) {
  size_t b = bytes == 0 ? 1 : bytes;
  if (b >= (size_t{1} << 20)) return (b + (size_t{1} << 20) - 1) & ~((size_t{1} << 20) - 1);
  size_t c = 64;
  while (c < b) c <<= 1;
  return c;
}

}  // namespace

ClBuffer::ClBuffer(std::shared_ptr<ClPool> pool, ClDevice& dev, cl_mem mem, size_t bytes,
                   size_t capacity)
    : pool_(std::move(pool)), dev_(dev), mem_(mem), bytes_(bytes), capacity_(capacity) {}

ClBuffer::~ClBuffer() { pool_->release(mem_, capacity_); }

void ClBuffer::read(void* dst, size_t offset, size_t n) const {
  if (n == 0) return;
  if (offset + n > bytes_)
    throw_error("opencl: read of bytes ", offset, "..", offset + n, " of a ", bytes_,
                "-byte buffer");
  std::lock_guard<std::mutex> lock(dev_.transfer_mu);
  cl_check(clEnqueueReadBuffer(dev_.transfer, mem_, CL_TRUE, offset, n, dst, 0, nullptr, nullptr),
           "clEnqueueReadBuffer");
}

void ClBuffer::write(const void* src, size_t offset, size_t n) {
  if (n == 0) return;
  if (offset + n > bytes_)
    throw_error("opencl: write of bytes ", offset, "..", offset + n, " of a ", bytes_,
                "-byte buffer");
  std::lock_guard<std::mutex> lock(dev_.transfer_mu);
  cl_check(clEnqueueWriteBuffer(dev_.transfer, mem_, CL_TRUE, offset, n, src, 0, nullptr, nullptr),
           "clEnqueueWriteBuffer");
}

ClPool::ClPool(ClDevice& dev, size_t max_cached) : dev_(dev), max_cached_(max_cached) {}

// Kept blocks are left to process exit (see ClDevice's destructor).
ClPool::~ClPool() = default;

std::shared_ptr<ClBuffer> ClPool::allocate(size_t bytes) {
  size_t cap = size_class(bytes);
  if (cap > dev_.max_alloc)
    throw_error("opencl: a buffer of ", bytes, " bytes exceeds ", dev_.label(),
                "'s largest allocation (", dev_.max_alloc, " bytes)");
  cl_mem mem = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(cap);
    if (it != free_.end() && !it->second.empty()) {
      mem = it->second.back();
      it->second.pop_back();
      stats_.cached_bytes -= cap;
      ++stats_.reused;
    } else {
      ++stats_.fresh;
    }
  }
  if (!mem) {
    cl_int err = CL_SUCCESS;
    mem = clCreateBuffer(dev_.context, CL_MEM_READ_WRITE, cap, nullptr, &err);
    if (err != CL_SUCCESS) {
      trim();  // release what the pool keeps and try once more
      mem = clCreateBuffer(dev_.context, CL_MEM_READ_WRITE, cap, nullptr, &err);
    }
    cl_check(err, "clCreateBuffer");
  }
  return std::make_shared<ClBuffer>(shared_from_this(), dev_, mem, bytes, cap);
}

void ClPool::release(cl_mem mem, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stats_.cached_bytes + capacity <= max_cached_) {
      free_[capacity].push_back(mem);
      stats_.cached_bytes += capacity;
      return;
    }
  }
  clReleaseMemObject(mem);
}

ClPoolStats ClPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void ClPool::trim() {
  std::map<size_t, std::vector<cl_mem>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(free_);
    stats_.cached_bytes = 0;
  }
  for (auto& [cap, mems] : all)
    for (cl_mem m : mems) clReleaseMemObject(m);
}

}  // namespace kiln::opencl
