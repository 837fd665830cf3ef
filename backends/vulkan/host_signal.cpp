#include "backends/vulkan/host_signal.h"

#include <mutex>

#include "graph/error.h"

namespace kiln::vulkan {

struct HostSignal::Semaphore {
  std::shared_ptr<Context> ctx;
  VkSemaphore handle;
  explicit Semaphore(std::shared_ptr<Context> c) : ctx(std::move(c)), handle(ctx->new_timeline()) {}
  ~Semaphore() { vkDestroySemaphore(ctx->device(), handle, nullptr); }
};

HostSignal::HostSignal(std::shared_ptr<Context> ctx)
    : sem_(std::make_shared<Semaphore>(ctx)), event_(std::make_shared<GpuEvent>()) {
  event_->set_timeline(ctx.get(), sem_->handle, 1, sem_);
  event_->set_host_signaled();
}

HostSignal::~HostSignal() {
  if (!done_.load())
    complete(std::make_exception_ptr(
        Error("vulkan: a cpu task that device work waited for was dropped before it ran")));
}

void HostSignal::complete(std::exception_ptr error) {
  if (done_.exchange(true)) return;
  VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
  si.semaphore = sem_->handle;
  si.value = 1;
  VkResult r = vkSignalSemaphore(sem_->ctx->device(), &si);
  if (r != VK_SUCCESS && !error) {
    try {
      check(r, "vkSignalSemaphore");
    } catch (...) {
      error = std::current_exception();
    }
  }
  event_->complete(error);
}

std::shared_ptr<HostSignal> run_after(std::shared_ptr<Context> ctx,
                                      const std::vector<std::shared_ptr<GpuEvent>>& after,
                                      std::function<void()> copy) {
  struct Join {
    std::mutex mu;
    size_t left;
    std::exception_ptr error;
    std::function<void()> copy;
    std::shared_ptr<HostSignal> done;
  };
  auto done = std::make_shared<HostSignal>(std::move(ctx));
  auto join = std::make_shared<Join>();
  join->left = after.size();
  join->copy = std::move(copy);
  join->done = done;
  for (const auto& ev : after)
    ev->on_complete([join](std::exception_ptr e) {
      {
        std::lock_guard<std::mutex> lock(join->mu);
        if (e && !join->error) join->error = e;
        if (--join->left != 0) return;
      }
      std::exception_ptr err = join->error;
      if (!err) {
        try {
          join->copy();
        } catch (...) {
          err = std::current_exception();
        }
      }
      join->copy = nullptr;
      std::shared_ptr<HostSignal> signal = std::move(join->done);
      signal->complete(err);
    });
  return done;
}

}  // namespace kiln::vulkan
