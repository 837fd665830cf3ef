// Cooperative cancellation of running work. Whoever runs work on behalf of a cancellable owner
// (a job) installs a CancelScope on the thread that starts it; the executor captures the
// innermost scope's token when a run starts and checks it before every task, so a cancel or a
// passed deadline takes effect at the next task boundary and fails the tasks not yet started.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace kiln {

class CancelToken {
 public:
  using Clock = std::chrono::steady_clock;

  CancelToken() = default;
  explicit CancelToken(std::optional<Clock::time_point> deadline) : deadline_(deadline) {}

  // Asks work to stop; `reason` becomes the kiln::Error message of the tasks it stops.
  // Returns false if a stop was requested before (the first reason stays).
  bool cancel(const std::string& reason);
  // Whether work should stop now (cancelled, or the deadline passed); `why` gets the reason.
  bool stop_requested(std::string* why = nullptr) const;
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // A check the owner's waiting thread makes while it waits for work (the Python binding's:
  // Ctrl-C): `poll` returns true, with the reason, to cancel. Only poll_and_check() calls it,
  // and only from the thread whose CancelScope holds this token, never from a task boundary.
  void set_poll(std::function<bool(std::string*)> poll) { poll_ = std::move(poll); }
  // stop_requested(), after running the poll (a true poll cancels the token with its reason).
  bool poll_and_check(std::string* why);
  bool deadline_passed() const { return deadline_ && Clock::now() >= *deadline_; }
  std::optional<Clock::time_point> deadline() const { return deadline_; }

 private:
  std::atomic<bool> cancelled_{false};
  std::optional<Clock::time_point> deadline_;
  mutable std::mutex mu_;
  std::string reason_;
  std::function<bool(std::string*)> poll_;
};

// RAII: work the calling thread starts while this lives observes `token`.
class CancelScope {
 public:
  explicit CancelScope(std::shared_ptr<CancelToken> token);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  std::shared_ptr<CancelToken> previous_;
};

// The calling thread's innermost token, or null.
const std::shared_ptr<CancelToken>& current_cancel_token();

}  // namespace kiln
