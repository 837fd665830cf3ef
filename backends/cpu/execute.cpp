#include "backends/cpu/execute.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>

namespace kiln::cpu {

namespace {
// Element steps (kept points x reduced points) below which a launch stays on the caller, and
// the smallest chunk a worker takes: ~16K steps is a few microseconds of vector work, enough
// to amortise TBB's task overhead (~1 us).
constexpr int64_t kInlineSteps = int64_t{1} << 16;
constexpr int64_t kChunkSteps = int64_t{1} << 14;
}  // namespace

void run_launch(const Launch& l, void* const* buffers, const int64_t* params) {
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < static_cast<int>(l.domain.size()); ++a) {
    int64_t e = l.domain[a].eval(params);
    if (a < l.kept) {
      if (e <= 0) return;  // nothing to write
      outer *= e;
    } else {
      inner *= std::max<int64_t>(e, 1);
    }
  }
  if (outer == 1 || outer * inner < kInlineSteps) {
    l.fn(buffers, params, 0, outer);
    return;
  }
  int64_t grain = std::max<int64_t>(1, kChunkSteps / inner);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, outer, grain),
      [&](const tbb::blocked_range<int64_t>& r) { l.fn(buffers, params, r.begin(), r.end()); });
}

}  // namespace kiln::cpu
