#include "graph/at_exit.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <utility>
#include <vector>

#include "graph/immortal.h"

namespace kiln {

namespace {

struct ExitSteps {
  std::mutex mu;
  std::vector<std::pair<ExitStage, void (*)()>> steps;
};
ExitSteps& exit_steps() {
  static Immortal<ExitSteps> s;  // read by the atexit handler, after static destructors began
  return s.get();
}

}  // namespace

void at_exit_finish(ExitStage stage, void (*finish)()) {
  ExitSteps& s = exit_steps();
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& step : s.steps)
    if (step.second == finish) return;
  s.steps.emplace_back(stage, finish);
  std::stable_sort(s.steps.begin(), s.steps.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

void arm_exit_finish() {
  std::atexit([] { run_exit_finish(); });
}

void run_exit_finish(ExitStage from) {
  std::vector<std::pair<ExitStage, void (*)()>> steps;
  {
    ExitSteps& s = exit_steps();
    std::lock_guard<std::mutex> lock(s.mu);
    steps = s.steps;  // a step may add another (a backend first used at exit)
  }
  for (const auto& step : steps)
    if (step.first >= from) step.second();
}

}  // namespace kiln
