// Which tasks of a plan must finish before which: one bitset row of ancestors per task. Buffer
// planning asks it (temporaries sharing storage, outputs taking over an input's memory). It costs
// tasks^2 / 64 words, so callers use it for plans of moderate size only.
#pragma once

#include <cstdint>
#include <vector>

#include "executor/plan.h"

namespace kiln {

class Ancestors {
 public:
  // `order` is a topological order of `tasks` (Plan::order()).
  Ancestors(const std::vector<Task>& tasks, const std::vector<int>& order);
  // Whether task a is an ancestor of task b: every schedule finishes a before b starts.
  bool before(int a, int b) const { return (bits_[b * words_ + a / 64] >> (a % 64)) & 1; }
  // Records a new dependency: `b` now waits for `a` (and so does everything after b). The
  // caller adds it to the plan too, and makes sure b is not an ancestor of a (no cycle).
  void add_edge(int a, int b) {
    size_t n = bits_.size() / words_;
    for (size_t x = 0; x < n; ++x) {
      if (static_cast<int>(x) != b && !before(b, static_cast<int>(x))) continue;
      for (size_t w = 0; w < words_; ++w) bits_[x * words_ + w] |= bits_[a * words_ + w];
      bits_[x * words_ + a / 64] |= uint64_t{1} << (a % 64);
    }
  }
  // Plans up to this many tasks are worth the bitsets.
  static constexpr int kMaxTasks = 4096;

 private:
  size_t words_;
  std::vector<uint64_t> bits_;
};

inline Ancestors::Ancestors(const std::vector<Task>& tasks, const std::vector<int>& order)
    : words_((tasks.size() + 63) / 64), bits_(tasks.size() * words_, 0) {
  for (int t : order)
    for (int d : tasks[t].deps) {
      for (size_t w = 0; w < words_; ++w) bits_[t * words_ + w] |= bits_[d * words_ + w];
      bits_[t * words_ + d / 64] |= uint64_t{1} << (d % 64);
    }
}

}  // namespace kiln
