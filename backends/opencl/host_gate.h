// The rule that keeps an OpenCL queue from hanging its caller: no host thread makes a call that
// may block inside the driver (a library call such as CLBlast's GEMM, which writes its arguments
// with blocking transfers) while a command before it in the queue waits for host work not yet
// done (a user event that a cpu task completes). Such a call is deferred, with every command
// after it, and issued in order by the gate's own thread once those waits have completed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/opencl/events.h"

namespace kiln::opencl {

class HostGate : public std::enable_shared_from_this<HostGate> {
 public:
  // Enqueues one command on the gate's queue; returns its event, or null when it did no work.
  using Issue = std::function<EventPtr()>;

  HostGate(cl_context ctx, bool poll) : ctx_(ctx), poll_(poll) {}

  // Runs `issue` now, or defers it (and every later command) when `may_block` and a host wait
  // before it is pending. A deferred command's event is a user event completed with the real
  // one. `what` names the command for stand-ins and pending_work().
  EventPtr submit(bool may_block, const std::string& what, Issue issue);
  // Notes that the queue's next commands wait for `events` (its user events are host waits).
  void note_waits(const std::vector<cl_event>& events);
  // Blocks until no command is deferred (finish() does this before clFinish).
  void wait_idle();
  // The deferred commands' names and the host waits they are held behind (pending_work()).
  std::vector<std::string> deferred() const;

 private:
  struct Held {
    uint64_t seq;
    bool may_block;
    std::string what;
    Issue issue;
    std::shared_ptr<ClEvent> stand_in;
  };
  struct HostWait {
    uint64_t seq;  // the position in the queue's order it was noted at
    cl_event event;
  };
  bool blocked(uint64_t seq) const;  // by a pending host wait noted before seq (mu_ held)
  void prune();                      // drops completed host waits (mu_ held)
  void drain();                      // issues what is no longer blocked (the gate's thread)
  EventPtr issue_now(const Issue& issue);
  static void CL_CALLBACK wait_ended(cl_event, cl_int, void* user);

  cl_context ctx_;
  bool poll_;
  mutable std::mutex mu_;
  std::condition_variable idle_;
  std::deque<Held> held_;
  std::vector<HostWait> host_waits_;
  uint64_t next_seq_ = 0;
};

}  // namespace kiln::opencl
