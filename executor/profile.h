// ProfileScope records every task the executor runs while the scope lives, from any thread:
// which kernel or copy ran, on which device and stream, and when. write_chrome_trace() writes the
// events as Chrome-trace JSON (chrome://tracing, Perfetto). Costs one atomic load per task when
// no scope is alive. events() and the scope's end first wait for asynchronous work submitted
// while profiling (compiled calls, async_eval) to complete. The executor's side is
// executor/profile_record.h.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "graph/device.h"

namespace kiln {

struct TaskEvent {
  std::string name;  // kernel name, "copy", "matmul" or a host task's name
  Device device;
  Stream stream;
  int64_t start_ns = 0;  // steady clock
  int64_t end_ns = 0;
  int thread = 0;  // small id of the thread that ran (or completed) the task
};

class ProfileScope {
 public:
  ProfileScope();
  ~ProfileScope();
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

  std::vector<TaskEvent> events() const;
  void write_chrome_trace(const std::string& path) const;

 private:
  friend struct ProfileRecorder;  // the executor's side (executor/profile_record.h)
  mutable std::mutex mu_;
  std::vector<TaskEvent> events_;
};

}  // namespace kiln
