// An Event the host completes: work finished by a Kiln thread rather than a driver (the
// distributed progress thread, the vulkan backend's timeline watcher, test doubles of
// asynchronous queues). Completed exactly once;
// callbacks registered before completion run on the completing thread, later ones at once.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <vector>

#include "backends/backend.h"

namespace kiln {

class HostEvent : public Event {
 public:
  void on_complete(std::function<void(std::exception_ptr)> f) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!done_) {
      callbacks_.push_back(std::move(f));
      return;
    }
    lock.unlock();
    f(error_);
  }
  void wait() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    if (error_) std::rethrow_exception(error_);
  }
  // Whether complete() has run.
  bool completed() {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  // With the error that stopped the work, or nullptr.
  void complete(std::exception_ptr e) {
    std::vector<std::function<void(std::exception_ptr)>> cbs;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      error_ = e;
      cbs.swap(callbacks_);
    }
    cv_.notify_all();
    for (auto& f : cbs) f(e);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::vector<std::function<void(std::exception_ptr)>> callbacks_;
};

}  // namespace kiln
