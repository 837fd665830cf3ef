// The serial runner behind an inline (host) lane's asynchronous submissions: a FIFO of jobs run
// one at a time in submission order, by the lane's own thread or by a thread that waits for one
// of them (it runs the jobs ahead of it itself instead of sleeping, so `f(x).item()` on a cpu
// stream costs no thread hand-off when the worker has not picked the job up yet). The thread
// ends after two idle seconds and the next submission starts another. Once the process starts
// to exit, workers take no further job (lane_worker.cpp's exit rule).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace kiln {

class LaneWorker {
 public:
  LaneWorker() = default;
  ~LaneWorker();  // runs what is queued, then joins the thread
  LaneWorker(const LaneWorker&) = delete;
  LaneWorker& operator=(const LaneWorker&) = delete;

  // Queues `job` (it must not throw); returns its ticket. `started_thread`: set to whether this
  // submission had to start the worker's thread (a cost far above a plain hand-off).
  uint64_t submit(std::function<void()> job, bool* started_thread = nullptr);
  // Returns once the job with `ticket` has run, running queued jobs on this thread meanwhile.
  void wait(uint64_t ticket);
  // Returns once every job submitted so far has run.
  void drain();
  bool idle();

 private:
  bool take_and_run(std::unique_lock<std::mutex>& lock, bool worker);
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t submitted_ = 0, finished_ = 0;  // tickets are 1, 2, ...; jobs finish in order
  bool busy_ = false, stop_ = false;
  bool exited_ = false;  // the thread left its loop after idling; join it before a new one
  std::thread thread_;   // started by a submission when none is running
};

}  // namespace kiln
