// Device memory of the opencl backend: ClBuffer (a cl_mem that knows its device) and a pool per
// device that keeps released cl_mems by size class, so an eager loop or a repeated compiled call
// does not create and release device memory per temporary. Blocking read/write go through the
// device's transfer queue; plans move data with copy tasks on the lanes' queues instead.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/opencl/device.h"
#include "graph/buffer.h"

namespace kiln::opencl {

class ClPool;

class ClBuffer : public Buffer {
 public:
  ClBuffer(std::shared_ptr<ClPool> pool, ClDevice& dev, cl_mem mem, size_t bytes, size_t capacity);
  ~ClBuffer() override;
  ClBuffer(const ClBuffer&) = delete;
  ClBuffer& operator=(const ClBuffer&) = delete;

  size_t bytes() const override { return bytes_; }
  Device device() const override { return Device{"opencl", dev_.index}; }
  void read(void* dst, size_t offset, size_t n) const override;
  void write(const void* src, size_t offset, size_t n) override;

  cl_mem mem() const { return mem_; }
  ClDevice& cl_device() const { return dev_; }

 private:
  std::shared_ptr<ClPool> pool_;
  ClDevice& dev_;
  cl_mem mem_;
  size_t bytes_, capacity_;
};

struct ClPoolStats {
  int64_t reused = 0, fresh = 0;
  size_t cached_bytes = 0;
};

class ClPool : public std::enable_shared_from_this<ClPool> {
 public:
  // Keeps at most `max_cached` bytes of released memory (KILN_OPENCL_POOL_BYTES, default 512 MiB).
  ClPool(ClDevice& dev, size_t max_cached);
  ~ClPool();
  std::shared_ptr<ClBuffer> allocate(size_t bytes);
  void release(cl_mem mem, size_t capacity);
  ClPoolStats stats() const;
  void trim();

 private:
  ClDevice& dev_;
  size_t max_cached_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<cl_mem>> free_;
  ClPoolStats stats_;
};

}  // namespace kiln::opencl
