#include "scheduler/lane_worker.h"

#include <chrono>

namespace kiln {

LaneWorker::~LaneWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

uint64_t LaneWorker::submit(std::function<void()> job) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ticket = ++submitted_;
    if (exited_ && thread_.joinable()) thread_.join();  // it left the loop and released mu_
    if (!thread_.joinable()) {
      exited_ = false;
      thread_ = std::thread([this] { loop(); });
    }
  }
  cv_.notify_all();
  return ticket;
}

// Runs the next job if none is running. Jobs run one at a time, so they finish in ticket order.
bool LaneWorker::take_and_run(std::unique_lock<std::mutex>& lock) {
  if (busy_ || queue_.empty()) return false;
  std::function<void()> job = std::move(queue_.front());
  queue_.pop_front();
  busy_ = true;
  lock.unlock();
  job();
  job = nullptr;  // release what it captured before others see it finished
  lock.lock();
  busy_ = false;
  ++finished_;
  cv_.notify_all();
  return true;
}

void LaneWorker::wait(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  while (finished_ < ticket)
    if (!take_and_run(lock)) cv_.wait(lock);
}

void LaneWorker::drain() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last = submitted_;
  }
  wait(last);
}

bool LaneWorker::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_ == submitted_;
}

// An idle worker's thread ends after a while (streams live for the whole process; an idle
// thread per stream ever used would not), and the next submission starts a new one.
void LaneWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (take_and_run(lock)) continue;
    if (stop_ && queue_.empty() && !busy_) return;
    if (cv_.wait_for(lock, std::chrono::seconds(2)) == std::cv_status::timeout && queue_.empty() &&
        !busy_ && !stop_) {
      exited_ = true;
      return;
    }
  }
}

}  // namespace kiln
