// Memory that holds an evaluated array. Backends implement Buffer for their devices; the graph
// layer only needs to read and write it. HostBuffer is plain aligned host memory: constants made
// from user values live there until a plan copies them to the device that needs them.
#pragma once

#include <cstddef>
#include <memory>

#include "graph/device.h"

namespace kiln {

class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual size_t bytes() const = 0;
  virtual Device device() const = 0;
  // Non-null when the bytes can be addressed directly from host code.
  virtual void* host_ptr() { return nullptr; }
  // Blocking transfers to and from host memory.
  virtual void read(void* dst, size_t offset, size_t n) const = 0;
  virtual void write(const void* src, size_t offset, size_t n) = 0;
};

class HostBuffer : public Buffer {
 public:
  HostBuffer(size_t bytes, Device device);
  ~HostBuffer() override;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  size_t bytes() const override { return bytes_; }
  Device device() const override { return device_; }
  void* host_ptr() override { return data_; }
  void read(void* dst, size_t offset, size_t n) const override;
  void write(const void* src, size_t offset, size_t n) override;

 private:
  size_t bytes_;
  Device device_;
  void* data_;
  // Scalars (the common 0-d constant) live inline: no aligned allocation per C++ scalar operand.
  alignas(16) unsigned char small_[16];
};

}  // namespace kiln
