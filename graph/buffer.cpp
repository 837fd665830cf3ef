#include "graph/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "graph/error.h"

namespace kiln {

HostBuffer::HostBuffer(size_t bytes, Device device) : bytes_(bytes), device_(std::move(device)) {
  if (bytes <= sizeof small_) {
    data_ = small_;
    return;
  }
  // 64-byte alignment keeps vector loads within cache lines; never allocate zero bytes.
  size_t rounded = ((bytes + 63) / 64) * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!data_) throw_error("out of host memory allocating ", bytes, " bytes");
}

HostBuffer::~HostBuffer() {
  if (data_ != small_) std::free(data_);
}

void HostBuffer::read(void* dst, size_t offset, size_t n) const {
  if (offset + n > bytes_)
    throw_error("buffer read of ", n, " bytes at ", offset, " past ", bytes_);
  std::memcpy(dst, static_cast<const char*>(data_) + offset, n);
}

void HostBuffer::write(const void* src, size_t offset, size_t n) {
  if (offset + n > bytes_)
    throw_error("buffer write of ", n, " bytes at ", offset, " past ", bytes_);
  std::memcpy(static_cast<char*>(data_) + offset, src, n);
}

}  // namespace kiln
