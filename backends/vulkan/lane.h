// The submission side of one vulkan stream: its command pool, the timeline semaphore that orders
// its work, and the batch that coalesces calls while earlier work is in flight (lavapipe spends
// more per vkQueueSubmit and per command buffer than per dispatch; docs/backends/vulkan.md).
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/vulkan/memory.h"
#include "backends/vulkan/vk_context.h"

namespace kiln::vulkan {

// Orders everything before it (shader, transfer and host writes) before everything after it.
void full_barrier(VkCommandBuffer cb);

// A call is recorded into the lane's open batch (one command buffer) and the batch submitted
// at once when fewer than kInFlight submissions are in flight, so a lone call waits for
// nothing. Otherwise the batch grows until one of them completes (the completion thread submits
// it), a host or device wait needs one of its events (GpuEvent::ensure_submitted), a call that
// waits for other work arrives, or it holds kBatchCalls calls. Something is always in flight
// while a batch is open, so every batch gets submitted without anyone asking.
class Lane : public Submitter, public std::enable_shared_from_this<Lane> {
 public:
  // Params buffers of this size are recycled between launches (creating one cost a good part
  // of a launch); larger ones are made for the launch and destroyed after it.
  static constexpr size_t kParamBytes = 4096;
  // Two: the queue holds the next submission while the device runs one, so it never idles
  // while the completion thread wakes to submit the batch.
  static constexpr uint64_t kInFlight = 2;
  // Bounds the time a call waits in a batch and what the batch holds (descriptor sets, params);
  // past ~16 dispatches per submission lavapipe's per-submission cost is a small part.
  static constexpr int kBatchCalls = 64;

  explicit Lane(std::shared_ptr<Context> c);
  ~Lane() override;
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  const std::shared_ptr<Context> ctx;
  std::mutex mu;  // the fields below, the pool, and the open batch
  std::vector<std::unique_ptr<Allocation>> free_params;
  // Partials of split reductions, shared by the lane's launches (its work runs in order), so
  // that their descriptor sets can be cached; replaced by a larger one when needed.
  std::shared_ptr<Allocation> scratch;
  // Other lanes' timeline values the next call waits for (Queue::enqueue_wait), with what
  // keeps their semaphores alive.
  struct Wait {
    VkSemaphore sem;
    uint64_t value;
    std::shared_ptr<void> keep;
  };
  std::vector<Wait> waits;
  // Host-signaled values among the last enqueue_wait's events: a host-to-device transfer
  // enqueued next runs once they complete (its source is a cpu task's output).
  std::vector<std::shared_ptr<GpuEvent>> host_waits;
  // Deferred transfers not known to be done yet (finish() waits for them).
  std::vector<std::shared_ptr<GpuEvent>> deferred;

  VkSemaphore timeline() const { return timeline_; }

  // Records one call, `rec(cb)`, after a full barrier, and returns the event its batch's
  // submission completes. `keep` (the call's resources) lives until then.
  template <typename Record>
  std::shared_ptr<GpuEvent> record(std::shared_ptr<void> keep, Record&& rec) {
    std::lock_guard<std::mutex> lock(mu);
    VkCommandBuffer cb = begin_call();
    rec(cb);
    return end_call(std::move(keep));
  }

  // Calls recorded and batches submitted, over every lane in the process (tests, benchmarks).
  struct Stats {
    int64_t calls = 0, submissions = 0;
  };
  static Stats stats();

  void submit_through(uint64_t value) override;
  // Submits the open batch, if any; returns the last value given to submitted work.
  uint64_t flush();

 private:
  struct Batch {
    VkCommandBuffer cb = VK_NULL_HANDLE;
    uint64_t value = 0;  // signalled when the batch completes
    std::vector<Wait> waits;
    std::vector<std::shared_ptr<GpuEvent>> events;
    std::vector<std::shared_ptr<void>> keep;
  };
  VkCommandBuffer begin_call();
  std::shared_ptr<GpuEvent> end_call(std::shared_ptr<void> keep);
  void open_batch();
  void submit_open();
  void completed(uint64_t value, VkCommandBuffer cb);

  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t value_ = 0;      // the last value given to a batch
  uint64_t submitted_ = 0;  // the last value submitted
  uint64_t completed_ = 0;  // the last value the completion thread saw signalled
  std::optional<Batch> open_;
};

}  // namespace kiln::vulkan
