// What tests/dist/cluster_test.sh runs on emulated hosts to cut a link under (issue 36, 4b):
// all_sums of 16 MB, one after another, for at most argv[1] seconds (default 120). Rank 0
// prints "all_sum N" every 10, so the test knows they run; a rank whose all_sum raises prints
//   rank R: all_sum N raised after S s: <what>
// and exits 3. A rank that reaches the end exits 0.
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "kiln.h"

using namespace kiln;
namespace dist = kiln::distributed;

int main(int argc, char** argv) {
  double limit = argc > 1 ? std::atof(argv[1]) : 120;
  dist::Group g = dist::init(true, "mpi");
  Array c = full({(16 << 20) / 4}, 1.0, float32);
  eval(c);
  auto t0 = std::chrono::steady_clock::now();
  auto secs = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (int i = 0; secs() < limit; ++i) {
    double started = secs();
    try {
      eval(dist::all_sum(c, g));
    } catch (const Error& e) {
      std::printf("rank %d: all_sum %d raised after %.1f s: %s\n", g.rank(), i, secs() - started,
                  e.what());
      std::fflush(stdout);
      return 3;
    }
    if (g.rank() == 0 && i % 10 == 0) std::printf("all_sum %d\n", i), std::fflush(stdout);
  }
  return 0;
}
