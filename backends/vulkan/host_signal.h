// Host-side completions the device can wait for: a timeline semaphore that the host signals.
// The executor enqueues device work before the cpu task producing its input has run
// (Queue::create_signal); the work waits for the signal on the device, and no host thread waits.
#pragma once

#include <atomic>
#include <functional>
#include <memory>

#include "backends/backend.h"
#include "backends/vulkan/vk_context.h"

namespace kiln::vulkan {

class HostSignal : public Signal {
 public:
  explicit HostSignal(std::shared_ptr<Context> ctx);
  // An uncompleted signal completes with an error, so that no device work waits forever.
  ~HostSignal() override;
  EventPtr event() override { return event_; }
  // Signals the semaphore even on error (the device must go on; the executor fails the work
  // that depended on the failed task), then completes the host-side event.
  void complete(std::exception_ptr error) override;
  const std::shared_ptr<GpuEvent>& gpu_event() const { return event_; }

 private:
  struct Semaphore;  // destroys the VkSemaphore when the last holder (a submission) lets go
  std::shared_ptr<Semaphore> sem_;
  std::shared_ptr<GpuEvent> event_;
  std::atomic<bool> done_{false};
};

// Runs `copy` once every event in `after` has completed (on the thread completing the last),
// then signals the returned HostSignal: with the error of a failed event, skipping the copy.
// The vulkan queue defers host-to-device transfers whose source a cpu task is still producing.
std::shared_ptr<HostSignal> run_after(std::shared_ptr<Context> ctx,
                                      const std::vector<std::shared_ptr<GpuEvent>>& after,
                                      std::function<void()> copy);

}  // namespace kiln::vulkan
