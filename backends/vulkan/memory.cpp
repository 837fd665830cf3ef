#include "backends/vulkan/memory.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

#include "backends/vulkan/descriptors.h"
#include "graph/env.h"
#include "graph/error.h"

namespace kiln::vulkan {

namespace {
uint64_t next_id() {
  static std::atomic<uint64_t> last{0};
  return ++last;
}
}  // namespace

Allocation::Allocation(std::shared_ptr<Context> c, size_t n, Kind k)
    : ctx(std::move(c)), bytes(n), capacity(capacity_for(n)), kind(k), id(next_id()) {
  uint32_t type = kind == Kind::Host ? ctx->host_memory_type() : ctx->buffer_memory_type();
  bool map = kind == Kind::Host || !ctx->staged();
  VkDevice dev = ctx->device();
  VkBufferCreateInfo bi{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  // Whole 16-byte words: packed byte types are read as uint words, contiguous 4-byte types as
  // 4-vectors.
  bi.size = capacity;
  bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  // Any buffer may be bound beyond maxStorageBufferRange, hence reached by address.
  bool addressed = kind == Kind::Buffer && ctx->info().device_address;
  if (addressed) bi.usage |= VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
  // Any buffer may be a kernel's input read through a texel-buffer view.
  if (kind == Kind::Buffer && texel_views_fit(ctx->info()))
    bi.usage |= VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
  bi.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(vkCreateBuffer(dev, &bi, nullptr, &buffer), "vkCreateBuffer");
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(dev, buffer, &req);
  if (!(req.memoryTypeBits & (1u << type))) {
    vkDestroyBuffer(dev, buffer, nullptr);
    throw_error("vulkan: ", ctx->label(), " cannot place a storage buffer in memory type ", type);
  }
  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = type;
  VkMemoryAllocateFlagsInfo flags{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
  flags.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
  if (addressed) ai.pNext = &flags;
  VkResult r = vkAllocateMemory(dev, &ai, nullptr, &memory);
  if (r != VK_SUCCESS) {
    vkDestroyBuffer(dev, buffer, nullptr);
    throw_error("vulkan: out of memory on ", ctx->label(), " allocating ", n, " bytes (VkResult ",
                static_cast<int>(r), ")");
  }
  check(vkBindBufferMemory(dev, buffer, memory, 0), "vkBindBufferMemory");
  if (map) check(vkMapMemory(dev, memory, 0, VK_WHOLE_SIZE, 0, &mapped), "vkMapMemory");
  if (addressed) {
    VkBufferDeviceAddressInfo info{VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO};
    info.buffer = buffer;
    address = vkGetBufferDeviceAddress(dev, &info);
  }
}

Allocation::~Allocation() {
  vkDestroyBuffer(ctx->device(), buffer, nullptr);
  vkFreeMemory(ctx->device(), memory, nullptr);
}

namespace {

// Kept allocations total at most budget() bytes and kMaxKept allocations per device. Small ones
// are kept too: a fresh buffer costs several driver calls, and a kept one keeps its allocation
// id, so launches that bind it reuse their cached descriptor sets (descriptors.h).
constexpr size_t kMaxKept = 512;

// 512 MiB on a CPU device (lavapipe: host memory, shared with the cpu backend), a quarter of
// the device-local memory on a GPU, where a 1 GiB buffer that is not kept costs an allocation
// at every call that needs one; KILN_VULKAN_POOL_BYTES sets it.
size_t budget(const Context& ctx) {
  if (std::optional<uint64_t> v =
          env_count("KILN_VULKAN_POOL_BYTES", "the bytes of freed device buffers kept for reuse"))
    return *v;
  const size_t floor = size_t{512} << 20;
  if (ctx.info().cpu) return floor;
  return std::max<size_t>(floor, ctx.info().device_local_bytes / 4);
}

struct Pool {
  explicit Pool(size_t limit) : limit(limit) {}
  const size_t limit;  // budget(), read once: the first buffer taken raises for a bad setting
  std::mutex mu;
  std::deque<std::unique_ptr<Allocation>> kept;  // oldest first
  size_t bytes = 0;
};

Pool& pool_of(const Context* ctx) {
  static std::mutex& mu = *new std::mutex;  // contexts live until exit; so do their pools
  static auto& pools = *new std::map<const Context*, std::unique_ptr<Pool>>;
  std::lock_guard<std::mutex> lock(mu);
  auto& p = pools[ctx];
  if (!p) p = std::make_unique<Pool>(budget(*ctx));
  return *p;
}

std::unique_ptr<Allocation> take_kept(Pool& p, size_t capacity) {
  std::lock_guard<std::mutex> lock(p.mu);
  for (auto it = p.kept.rbegin(); it != p.kept.rend(); ++it)
    if ((*it)->capacity == capacity) {
      std::unique_ptr<Allocation> a = std::move(*it);
      p.kept.erase(std::next(it).base());
      p.bytes -= capacity;
      return a;
    }
  return nullptr;
}

}  // namespace

std::unique_ptr<Allocation> take_buffer(const std::shared_ptr<Context>& ctx, size_t n) {
  Pool& p = pool_of(ctx.get());
  if (auto a = take_kept(p, Allocation::capacity_for(n))) {
    a->bytes = n;
    return a;
  }
  try {
    return std::make_unique<Allocation>(ctx, n, Allocation::Kind::Buffer);
  } catch (const Error&) {
    std::deque<std::unique_ptr<Allocation>> freed;
    {
      std::lock_guard<std::mutex> lock(p.mu);
      if (p.kept.empty()) throw;
      freed.swap(p.kept);
      p.bytes = 0;
    }
    freed.clear();
    return std::make_unique<Allocation>(ctx, n, Allocation::Kind::Buffer);
  }
}

void give_back_buffer(std::unique_ptr<Allocation> a) {
  if (!a) return;
  Pool& p = pool_of(a->ctx.get());
  const size_t limit = p.limit;
  if (a->capacity > limit) return;
  std::deque<std::unique_ptr<Allocation>> evicted;  // freed outside the lock
  std::lock_guard<std::mutex> lock(p.mu);
  while (!p.kept.empty() && (p.bytes + a->capacity > limit || p.kept.size() >= kMaxKept)) {
    p.bytes -= p.kept.front()->capacity;
    evicted.push_back(std::move(p.kept.front()));
    p.kept.pop_front();
  }
  p.bytes += a->capacity;
  p.kept.push_back(std::move(a));
}

}  // namespace kiln::vulkan
