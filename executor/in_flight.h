// The registry behind pending_work(): calls register while they run (their tasks' phases are
// read from the call's own state), and threads register while they block waiting for Kiln.
// Cheap enough for every call: a lock and two pointer writes at its start and end, one relaxed
// store per task phase. Private to the executor and the layers above it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

class Plan;
struct Lane;

enum class TaskPhase : uint8_t { Waiting, Starting, Queued, Done };

// A call's view for pending_work(); registered from its start to its end. `phases` and `lanes`
// belong to the call and stay valid while it is registered.
struct InFlightCall {
  uint64_t id = 0;
  const Plan* plan = nullptr;
  const std::vector<Lane*>* lanes = nullptr;
  const std::atomic<TaskPhase>* phases = nullptr;
  int64_t start_ns = 0;
  InFlightCall* prev = nullptr;
  InFlightCall* next = nullptr;
};

void call_started(InFlightCall& c);  // assigns c.id and c.start_ns
void call_ended(InFlightCall& c);

// RAII: the calling thread is blocked waiting for `what` (a string literal) of call `call` (0:
// none in particular) while this lives.
class BlockedScope {
 public:
  explicit BlockedScope(const char* what, uint64_t call = 0);
  ~BlockedScope();
  BlockedScope(const BlockedScope&) = delete;
  BlockedScope& operator=(const BlockedScope&) = delete;

  const char* what;
  uint64_t call;
  int64_t start_ns;
  int tid;
  BlockedScope* prev = nullptr;
  BlockedScope* next = nullptr;
};

// Starts the watchdog (KILN_WATCHDOG) and the SIGQUIT handler once per process.
void start_watchdog();

// What call `call` has not finished: "<task> on <stream> (<state>)", joined by "; ".
std::string unfinished_tasks(uint64_t call);

// Waits on `cv` (with `lock` held) until done(), or until the calling thread's cancel token (a
// job's cancel or deadline, Ctrl-C in Python, kiln run --timeout) asks to stop: then raises
// kiln::Error saying why and what it waited for (`waited_for()`, asked only then). The work
// waited for goes on and releases what it holds when it ends.
void wait_or_give_up(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     const std::function<bool()>& done,
                     const std::function<std::string()>& waited_for);

}  // namespace kiln
