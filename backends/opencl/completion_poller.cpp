#include "backends/opencl/completion_poller.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "graph/immortal.h"

namespace kiln::opencl {

namespace {

struct Watched {
  cl_event event;
  std::function<void(cl_int)> done;
};

// One thread for the process; it sleeps on a condition variable while nothing is watched. It
// lives until exit and is never joined (a static destructor joining it could run while a
// driver thread still completes work).
class Poller {
 public:
  Poller() {
    std::thread([this] { loop(); }).detach();
  }

  void add(cl_event e, std::function<void(cl_int)> done) {
    clRetainEvent(e);
    {
      std::lock_guard<std::mutex> lock(mu_);
      incoming_.push_back({e, std::move(done)});
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    std::vector<Watched> watched;
    int idle_rounds = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (watched.empty()) cv_.wait(lock, [&] { return !incoming_.empty(); });
        for (Watched& w : incoming_) watched.push_back(std::move(w));
        incoming_.clear();
      }
      bool any = false;
      for (size_t i = 0; i < watched.size();) {
        cl_int status = CL_QUEUED;
        cl_int err = clGetEventInfo(watched[i].event, CL_EVENT_COMMAND_EXECUTION_STATUS,
                                    sizeof status, &status, nullptr);
        if (err != CL_SUCCESS) status = err;
        if (status > CL_COMPLETE) {  // queued, submitted or running
          ++i;
          continue;
        }
        Watched w = std::move(watched[i]);
        watched[i] = std::move(watched.back());
        watched.pop_back();
        w.done(status);
        clReleaseEvent(w.event);
        any = true;
      }
      // Back off while work runs: yield at first (a short kernel ends within microseconds),
      // then sleep up to 50 us, the latency a long kernel's completion may see.
      idle_rounds = any ? 0 : idle_rounds + 1;
      if (watched.empty() || any) continue;
      if (idle_rounds < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(idle_rounds < 256 ? 10 : 50));
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Watched> incoming_;
};

Poller& poller() {
  static Immortal<Poller> p;  // lives until exit with its thread
  return p.get();
}

}  // namespace

void watch_completion(cl_event event, std::function<void(cl_int status)> done) {
  poller().add(event, std::move(done));
}

}  // namespace kiln::opencl
