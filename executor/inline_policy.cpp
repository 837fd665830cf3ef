#include "executor/inline_policy.h"

namespace kiln {

namespace {
std::atomic<InlinePolicy> g_policy{InlinePolicy::Measured};
}  // namespace

// Weight 1/8: a few slow samples (a preempted run, a page fault) move the average a little, a
// lasting change moves it within a few dozen calls.
void RunningNs::add(int64_t sample) {
  int64_t old = ns_.load(std::memory_order_relaxed);
  ns_.store(old < 0 ? sample : old + (sample - old) / 8, std::memory_order_relaxed);
}

RunningNs& handoff_cost() {
  static RunningNs cost;  // trivially destructible in effect: an atomic integer
  return cost;
}

InlinePolicy set_inline_policy(InlinePolicy p) { return g_policy.exchange(p); }

bool run_inline(const RunningNs& run) {
  switch (g_policy.load(std::memory_order_relaxed)) {
    case InlinePolicy::Never: return false;
    case InlinePolicy::Always: return true;
    case InlinePolicy::Measured: break;
  }
  int64_t r = run.get(), h = handoff_cost().get();
  return r >= 0 && h >= 0 && r <= h;
}

}  // namespace kiln
