// One long scan split across threads by look-back, for the cpu backend's scans (native_ops.cpp):
// chunk 0 is scanned at once from the identity; every later chunk's thread finds its carry by
// folding the input backwards from its chunk's start until it reaches a block whose running
// value an earlier thread has published, then scans its chunk from that carry, publishing too.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tbb/parallel_for.h>

namespace kiln::cpu {

// The running value is published after every block of this many elements of the scan order:
// a look-back stops at most one block past the block where the threads meet.
constexpr int64_t kLookbackBlock = 4096;

// The weight of every chunk after the first, the first's being 1: a later chunk's thread first
// folds the earlier input backwards at the rate of a total (r elements per ns) while the thread
// before it scans towards it (s), so they meet after a/(s+r) and, for all threads to end together,
// every later chunk holds r/(s+r) of the first chunk's elements (derivation in
// docs/performance.md). Measured once per key and host (tune.h, family "scan_split"): make()
// gives the work once of one thread's scan and of its total of the same elements, and the
// weight is t_scan/(t_scan + t_total), within [0.05, 1].
struct LookbackProbe {
  std::function<void()> scan, total;
};
double lookback_weight(const std::string& key, const std::function<LookbackProbe()>& make);

// The first block of each of `chunks` chunks over `blocks` blocks, and `blocks` last: chunk 0
// weighs 1, the others `later` each; chunks may be empty.
std::vector<int64_t> lookback_starts(int64_t blocks, int chunks, double later);

// Scans the n elements of one row's scan order on `chunks` tasks of the TBB arena. run(lo, hi,
// carry) scans [lo, hi) from `carry` (the value before lo; `identity` before element 0) and
// returns the value after hi; total(lo, hi) folds [lo, hi) from the identity; fold(earlier,
// later) combines two values in order. Each task takes the next chunk in order when it starts
// (so the first task to run scans chunk 0, and a late task takes a late chunk), and nothing
// waits for another thread: a look-back that finds nothing published folds further back, to
// the row's start if it must. For float sums the carries depend on where each look-back met
// the thread before it, so the last bits of a later chunk's values may differ from call to
// call, within the scans' bound.
template <class C, class Run, class Total, class Fold>
void scan_with_lookback(int64_t n, int chunks, double later, C identity, Run run, Total total,
                        Fold fold) {
  int64_t blocks = (n + kLookbackBlock - 1) / kLookbackBlock;
  std::vector<int64_t> start = lookback_starts(blocks, chunks, later);
  // Chunk c's count of published blocks (its first `done` blocks' ends are in end), one cache
  // line each: a thread stores its own and the next thread polls it.
  struct alignas(64) Published {
    std::atomic<int64_t> done{0};
  };
  std::vector<Published> published(static_cast<size_t>(chunks));
  std::vector<C> end(static_cast<size_t>(blocks));  // the running value after each block
  auto lo_of = [&](int64_t b) { return std::min(n, b * kLookbackBlock); };
  // Chunk c's carry: blocks [j, first) folded backwards into `after` until block j - 1's end is
  // published (or j reaches 0).
  auto carry_of = [&](int c) {
    int64_t first = start[c], j = first;
    int d = c - 1;  // the chunk holding block j - 1
    C after = identity;
    bool any = false;
    while (j > 0) {
      while (j - 1 < start[d]) --d;
      if (start[d] + published[d].done.load(std::memory_order_acquire) >= j)
        return any ? fold(end[j - 1], after) : end[j - 1];
      C t = total(lo_of(j - 1), lo_of(j));
      after = any ? fold(t, after) : t;
      any = true;
      --j;
    }
    return fold(identity, after);  // the whole row before chunk c, folded here (first > 0)
  };
  std::atomic<int> next{0};
  tbb::parallel_for(0, chunks, [&](int) {
    int c = next.fetch_add(1, std::memory_order_relaxed);
    int64_t first = start[c], last = start[c + 1];
    if (first == last) return;
    C acc = first == 0 ? identity : carry_of(c);
    for (int64_t b = first; b < last; ++b) {
      acc = run(lo_of(b), lo_of(b + 1), acc);
      end[b] = acc;
      published[c].done.store(b - first + 1, std::memory_order_release);
    }
  });
}

}  // namespace kiln::cpu
