// The Vulkan instance (one per process, with VK_LAYER_KHRONOS_validation when
// KILN_VULKAN_VALIDATION=1), the physical devices it sees and why some are unusable, and the live
// state of one logical device: its queue, memory type, pipeline cache and the completion thread
// that waits on timeline semaphores and completes Events (so no TBB worker waits on the GPU).
#pragma once

#include <vulkan/vulkan.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "backends/host_event.h"

namespace kiln::vulkan {

struct PhysicalInfo {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name, driver, description;
  bool usable = false;
  std::string reason;
  bool float64 = false, int64 = false;
  // shaderBufferInt64Atomics (Vulkan 1.2): 64-bit atomics on storage buffers (scatter_add).
  bool int64_atomics = false;
  // bufferDeviceAddress (Vulkan 1.2): kernels reach buffers beyond max_storage_range through
  // 64-bit addresses instead of descriptors.
  bool device_address = false;
  // Subgroup basic, arithmetic and shuffle operations in compute shaders (reductions use them).
  bool subgroups = false;
  uint32_t subgroup_size = 0;
  bool cpu = false;  // VK_PHYSICAL_DEVICE_TYPE_CPU (lavapipe, SwiftShader)
  // Float controls (Vulkan 1.2): shaders can ask that NaN, infinities and signed zeros, and
  // denormals, of 32- and 64-bit floats be kept. Without the request a driver may assume no NaN
  // (NVIDIA folds a NaN-passing select chain into a clamp that drops it) and flush denormals.
  bool keep_nan32 = false, keep_denorm32 = false, keep_nan64 = false, keep_denorm64 = false;
  uint32_t queue_family = 0;
  uint32_t max_groups[3] = {65535, 65535, 65535};
  uint32_t max_local_size = 128;  // min(maxComputeWorkGroupSize[0], ...Invocations)
  uint64_t max_storage_range = 0;
  // maxTexelBufferElements: texels a texel-buffer view may span (every view Kiln makes is of
  // 16-byte RGBA32UI texels).
  uint64_t max_texel_elements = 0;
  uint64_t device_local_bytes = 0;  // the largest device-local heap
  // maxPushConstantsSize: launch params that fit travel as push constants, which lets a
  // kernel's descriptor set be reused across launches (at least 128 bytes on every device).
  uint32_t max_push_bytes = 128;
  // Loop iterations a shader invocation may run in all before the driver ends its loops
  // (0: no limit). Kernels are split so that none comes near it; launches that would reach it
  // raise kiln::Error.
  int64_t loop_limit = 0;
  uint32_t driver_version = 0;
  uint32_t vendor_id = 0, device_id = 0;
  uint8_t cache_uuid[VK_UUID_SIZE] = {};
};

// Every physical device the loader reports (enumerated once); throws kiln::Error when there is
// no Vulkan loader/driver at all.
const std::vector<PhysicalInfo>& physical_devices();

// Validation-layer messages (warnings and errors) seen so far in this process.
int64_t validation_message_count();

class Context;

// Work recorded but not yet submitted to the queue (a lane's open batch, lane.h).
class Submitter {
 public:
  virtual ~Submitter() = default;
  // Submits the recorded work whose timeline value is `value` or less, if it is still held.
  virtual void submit_through(uint64_t value) = 0;
};

// The event of work on a queue: completed by the context's watcher thread when the timeline
// value it carries is signalled, so its waiting and callbacks are a HostEvent's.
class GpuEvent : public HostEvent {
 public:
  // The timeline value whose signal completes this event, on `ctx`'s device; `keep` holds the
  // semaphore alive for submissions of other lanes that wait on it.
  void set_timeline(const Context* ctx, VkSemaphore sem, uint64_t value,
                    std::shared_ptr<void> keep) {
    ctx_ = ctx, sem_ = sem, value_ = value, keep_ = std::move(keep);
  }
  const Context* context() const { return ctx_; }
  VkSemaphore semaphore() const { return sem_; }
  uint64_t value() const { return value_; }
  const std::shared_ptr<void>& keep() const { return keep_; }
  // Set for values the host signals (a cpu task's completion, a deferred host transfer).
  void set_host_signaled() { host_signaled_ = true; }
  bool host_signaled() const { return host_signaled_; }
  // Set (before the event is shared) when the work signalling value() may still be held in a
  // lane's batch: a wait on the host or on the device must submit it first, or nothing would.
  void set_submitter(std::weak_ptr<Submitter> s) { submitter_ = std::move(s); }
  void ensure_submitted() const {
    if (auto s = submitter_.lock()) s->submit_through(value_);
  }
  void wait() override {
    ensure_submitted();
    HostEvent::wait();
  }

 private:
  const Context* ctx_ = nullptr;
  VkSemaphore sem_ = VK_NULL_HANDLE;
  uint64_t value_ = 0;
  std::shared_ptr<void> keep_;
  bool host_signaled_ = false;
  std::weak_ptr<Submitter> submitter_;
};

// One logical device. Lives as long as anything (buffers, kernels, queues) holds it.
class Context {
 public:
  explicit Context(int index);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkDevice device() const { return device_; }
  const PhysicalInfo& info() const { return info_; }
  int index() const { return index_; }
  // Memory: buffers live in buffer_memory_type(); when staged() it is not mapped (device-local
  // memory the host cannot see, or KILN_VULKAN_STAGING=1) and transfers go through
  // host_memory_type() staging buffers; params buffers always use host_memory_type().
  uint32_t buffer_memory_type() const { return buffer_type_; }
  uint32_t host_memory_type() const { return host_type_; }
  bool staged() const { return staged_; }
  // Copies n bytes between two buffers of this device and waits for it (blocking transfers).
  void transfer(VkBuffer src, size_t src_offset, VkBuffer dst, size_t dst_offset, size_t n);
  VkPipelineCache pipeline_cache() const { return cache_; }
  std::string label() const;  // "vulkan:0 (llvmpipe)"

  // Submits under the queue's lock; raises kiln::Error on failure.
  void submit(const VkSubmitInfo& info, VkFence fence = VK_NULL_HANDLE);
  // Completes `events` (after running `cleanup`) once `sem` reaches `value`.
  void watch(VkSemaphore sem, uint64_t value, std::vector<std::shared_ptr<GpuEvent>> events,
             std::function<void()> cleanup);
  // Completes `events` with `error` (after running `cleanup`) on the completion thread: work
  // that failed to be submitted, whose callbacks must not run under the submitter's locks.
  void fail(std::vector<std::shared_ptr<GpuEvent>> events, std::exception_ptr error,
            std::function<void()> cleanup);
  // A timeline semaphore starting at 0.
  VkSemaphore new_timeline();
  // Writes the pipeline cache to the disk cache (after new pipelines were made).
  void persist_pipeline_cache();
  // Names the device and driver version for cache files.
  std::string cache_key() const;
  // At exit: waits (at most `limit`) until every watched submission has completed and been
  // processed, then stops the completion thread and lets the device go idle, so that no thread
  // is inside the driver when its finalisers run. Returns false (and leaves things as they are)
  // if work is still outstanding after `limit`.
  bool quiesce(std::chrono::milliseconds limit);

 private:
  struct Pending {
    VkSemaphore sem;
    uint64_t value;
    std::vector<std::shared_ptr<GpuEvent>> events;
    std::function<void()> cleanup;
    std::exception_ptr error;  // failed before it reached the queue: nothing to wait for
  };
  void completion_loop();

  int index_;
  PhysicalInfo info_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  std::mutex queue_mu_;
  uint32_t buffer_type_ = 0, host_type_ = 0;
  bool staged_ = false;
  std::mutex transfer_mu_;  // the transfer command buffer and fence
  VkCommandPool transfer_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer transfer_cb_ = VK_NULL_HANDLE;
  VkFence transfer_fence_ = VK_NULL_HANDLE;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::mutex cache_mu_;

  std::mutex mu_;  // pending_, stop_
  std::condition_variable cv_;
  std::vector<Pending> pending_;     // in submission order
  std::condition_variable idle_cv_;  // the completion thread parked with nothing pending
  bool processing_ = false;          // the completion thread is working on pending_
  bool stop_ = false;
  std::thread thread_;
};

// The context of vulkan:`index`, created on first use (thread-safe).
std::shared_ptr<Context> context(int index);

// Raises kiln::Error naming the call when r is not VK_SUCCESS.
void check(VkResult r, const char* what);

// Test hook: the n-th submission from now, to any queue of any device, fails as a vkQueueSubmit
// that returned VK_ERROR_OUT_OF_DEVICE_MEMORY (nothing is submitted); 0 cancels.
void fail_nth_submission(int64_t n);

}  // namespace kiln::vulkan
