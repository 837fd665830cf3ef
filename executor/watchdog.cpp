// The watchdog behind KILN_WATCHDOG=<seconds> and SIGQUIT: one thread, started with the first
// call, that prints pending_work() to stderr when a thread has waited for Kiln longer than the
// limit (again at each further multiple of it), or at once when the process receives SIGQUIT.
// The signal handler only writes a byte to a pipe: printing is not async-signal-safe.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "executor/in_flight.h"
#include "executor/pending_work.h"
#include "graph/env.h"
#include "graph/log.h"

namespace kiln {

namespace {

int g_wake[2] = {-1, -1};

void on_sigquit(int) {
  char c = 1;
  ssize_t n = write(g_wake[1], &c, 1);
  (void)n;
}

// SIGQUIT's handler, unless the program has one of its own or KILN_SIGQUIT=0.
bool install_sigquit() {
  const char* e = std::getenv("KILN_SIGQUIT");
  if (e && std::string(e) == "0") return false;
  struct sigaction old {};
  if (sigaction(SIGQUIT, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) return false;
  struct sigaction sa {};
  sa.sa_handler = on_sigquit;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return sigaction(SIGQUIT, &sa, nullptr) == 0;
}

// A driver loaded later (its LLVM) may take SIGQUIT over and swallow it; once Kiln holds the
// signal it takes it back at each tick of the watchdog.
bool g_sigquit = false;
void reclaim_sigquit() {
  struct sigaction cur {};
  if (!g_sigquit || sigaction(SIGQUIT, nullptr, &cur) != 0 || cur.sa_handler == on_sigquit) return;
  struct sigaction sa {};
  sa.sa_handler = on_sigquit;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGQUIT, &sa, nullptr);
}

void print(const PendingWork& w, const char* why) {
  std::string text = "kiln: " + std::string(why) + "\n" + w.str();
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void loop(uint64_t limit_s) {
  std::map<std::string, uint64_t> printed;  // per wait (thread and start): multiples printed
  int tick_ms = limit_s ? static_cast<int>(std::min<uint64_t>(1000, limit_s * 250)) : 1000;
  for (;;) {
    reclaim_sigquit();
    pollfd p{g_wake[0], POLLIN, 0};
    int r = poll(&p, 1, tick_ms);
    if (r > 0) {
      char buf[64];
      ssize_t n = read(g_wake[0], buf, sizeof buf);
      (void)n;
      print(pending_work(), "SIGQUIT: what Kiln is waiting for");
      continue;
    }
    if (!limit_s) continue;
    PendingWork w = pending_work();
    std::map<std::string, uint64_t> still;
    bool due = false;
    for (const BlockedThread& t : w.threads) {
      auto k = static_cast<uint64_t>(t.seconds / static_cast<double>(limit_s));
      // A wait is known by its thread and what it waits for; one that is shorter than the
      // multiples printed for it is a new wait, counted again from zero.
      std::string key = t.thread + ": " + t.waits_for;
      uint64_t before = printed.count(key) ? printed[key] : 0;
      if (k < before) before = 0;
      still[key] = std::max(before, k);
      due = due || k > before;
    }
    printed.swap(still);
    if (due)
      print(w, ("a wait has lasted longer than KILN_WATCHDOG=" + std::to_string(limit_s) + " s")
                   .c_str());
  }
}

// At load, before any driver is loaded: a driver's LLVM registers handlers of its own for
// SIGQUIT (among its crash signals), and the first of the two to find SIGQUIT at its default
// keeps it. The pipe and the handler only: the thread starts with the first call.
const bool g_installed =
    (g_sigquit = pipe2(g_wake, O_CLOEXEC | O_NONBLOCK) == 0 && install_sigquit());

}  // namespace

void start_watchdog() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::optional<uint64_t> limit;
    try {
      limit = env_count("KILN_WATCHDOG",
                        "the seconds a wait may last before Kiln prints what "
                        "it waits for (docs/debugging.md)");
    } catch (const std::exception& e) {
      logging::warn(e.what());  // a bad setting must not fail the call that found it
    }
    if (g_wake[0] < 0 || (!g_sigquit && !(limit && *limit))) return;
    std::thread([l = limit.value_or(0)] { loop(l); }).detach();
  });
}

}  // namespace kiln
