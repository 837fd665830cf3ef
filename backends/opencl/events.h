// Kiln's Events over OpenCL events: ClEvent for enqueued work (holding what the work uses until
// it completes), ClSignal for a completion the host gives (a user event that device commands
// wait for), and a stand-in for a command the queue has not issued yet (host_gate.h).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/opencl/cl_api.h"

namespace kiln::opencl {

// Completion of enqueued OpenCL work. Holds what the work uses (scratch buffers, host staging)
// until it completes.
class ClEvent : public Event, public std::enable_shared_from_this<ClEvent> {
 public:
  // `poll`: completion found by completion_poller (GPU devices) instead of the driver's callback.
  ClEvent(cl_event e, std::string what, std::vector<std::shared_ptr<void>> keep, bool poll);
  ~ClEvent() override;

  void on_complete(std::function<void(std::exception_ptr)> f) override;
  void wait() override;
  cl_event handle() const { return ev_; }
  const std::string& what() const { return what_; }
  // A user event's error, reported in place of the driver's status (set before the status).
  void set_cause(std::exception_ptr e);

 private:
  struct Callback {
    std::function<void(std::exception_ptr)> f;
    std::shared_ptr<ClEvent> self;
  };
  static void CL_CALLBACK callback(cl_event, cl_int status, void* user);
  std::exception_ptr failure(cl_int status) const;

  cl_event ev_;
  std::string what_;
  std::vector<std::shared_ptr<void>> keep_;
  bool poll_ = false;
  mutable std::mutex cause_mu_;
  std::exception_ptr cause_;
};

// A user event of `ctx`, not complete: what a host-given completion or a deferred command's
// stand-in is.
std::shared_ptr<ClEvent> user_event(cl_context ctx, std::string what, bool poll);

// Completes a user event made by user_event(): with `error` (status -1) or CL_COMPLETE.
void complete_user_event(ClEvent& e, std::exception_ptr error);

// A user event: device commands wait for it in their wait lists until the executor completes
// it from the host (a cpu task finished). Dropped uncompleted, it fails, releasing its waiters.
class ClSignal : public Signal {
 public:
  explicit ClSignal(cl_context ctx);
  ~ClSignal() override;
  EventPtr event() override { return event_; }
  void complete(std::exception_ptr error) override;

 private:
  std::shared_ptr<ClEvent> event_;
  std::atomic<bool> done_{false};
};

}  // namespace kiln::opencl
