// What is in flight and what waits for it, as data and as text, so a user with a stuck program
// never needs a debugger: every call that has started and not completed, its tasks that have
// not completed (not started, inside a backend's call, queued on a device), what each waits for,
// the commands a device queue holds back, and every thread blocked waiting for Kiln.
// KILN_WATCHDOG=<seconds> prints it to stderr when a wait lasts longer; so does SIGQUIT (Ctrl-\)
// unless the program has a handler of its own. Kiln goes beyond MLX here (docs/debugging.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct PendingTask {
  uint64_t call = 0;   // the call it belongs to (PendingCall::id)
  std::string stream;  // its lane: "stream 1 on opencl:0"
  std::string task;    // its name in the plan: "matmul", "copy", a kernel's name
  std::string state;   // "not started", "running on the host", "inside the backend's call",
                       // "queued on the device"
  std::vector<std::string> waits_for;  // its unfinished inputs: "<task> on <stream> (<state>)"
};

struct PendingCall {
  uint64_t id = 0;
  double seconds = 0;  // since it started
  int tasks = 0, done = 0;
};

struct BlockedThread {
  std::string thread;     // "thread 4242 (main)"
  std::string waits_for;  // "call 7", "a job", "task matmul of call 7"
  double seconds = 0;     // how long it has waited
};

struct PendingWork {
  std::vector<PendingCall> calls;
  std::vector<PendingTask> tasks;
  std::vector<BlockedThread> threads;
  std::vector<std::string> held;  // "<stream>: <command> (why it is held)"
  bool empty() const { return calls.empty() && threads.empty() && held.empty(); }
  std::string str() const;  // the text the watchdog prints
};

PendingWork pending_work();

}  // namespace kiln
