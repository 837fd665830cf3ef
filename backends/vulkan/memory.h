// Vulkan memory for the backend: an Allocation is a VkBuffer with its own memory (host memory
// for params and staging, or the context's buffer memory, addressable where the device has
// bufferDeviceAddress), and a per-device pool keeps freed large buffer allocations for reuse.
// Fresh large allocations page-fault on first touch on a CPU device and cost a driver call
// everywhere: on lavapipe a third of a compiled gelu's time was faulting in its output.
#pragma once

#include <vulkan/vulkan.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backends/vulkan/vk_context.h"

namespace kiln::vulkan {

struct Allocation {
  enum class Kind { Host, Buffer };

  std::shared_ptr<Context> ctx;
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;       // host memory, and buffer memory unless ctx->staged()
  size_t bytes = 0;             // as requested
  size_t capacity = 0;          // the VkBuffer's size: whole 16-byte words, at least 16
  VkDeviceAddress address = 0;  // buffers on a device with bufferDeviceAddress
  Kind kind;
  // Unique in the process, never reused (unlike VkBuffer handles): names this buffer in
  // descriptor-set cache keys.
  uint64_t id;

  // Raises kiln::Error when the device is out of memory.
  Allocation(std::shared_ptr<Context> c, size_t n, Kind k = Kind::Host);
  ~Allocation();
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;

  static size_t capacity_for(size_t n) { return (std::max<size_t>(n, 16) + 15) / 16 * 16; }
};

// A Kind::Buffer allocation of n bytes: a kept one of the same capacity, or a fresh one (after
// releasing every kept allocation when the device is out of memory).
std::unique_ptr<Allocation> take_buffer(const std::shared_ptr<Context>& ctx, size_t n);
// Keeps a large buffer allocation for reuse (up to a per-device byte budget, oldest evicted
// first) or frees it. The caller guarantees no GPU work still uses it.
void give_back_buffer(std::unique_ptr<Allocation> a);

}  // namespace kiln::vulkan
