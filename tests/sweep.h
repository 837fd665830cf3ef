// How the sweeps (random programs, every op x dtype, the misuse probe) choose what to run:
// all of it under `make test-long` (KILN_TEST_LONG=1), a random sample under `make test`,
// replayable with KILN_TEST_SEED. Standard C++ only, so the probe (a kiln.h-only program
// without GoogleTest) shares it with the gtest suites.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {

// Whether this is `make test-long` (KILN_TEST_LONG=1): every sweep runs in full. `make test`
// runs a random sample of each instead, with new seeds every run.
inline bool long_tests() {
  const char* e = std::getenv("KILN_TEST_LONG");
  return e && *e && std::string(e) != "0";
}

// The seeds one sweep runs: [first, first + count). Under long tests the whole fixed range
// (from `fixed_first`, `full` seeds); otherwise `sample` consecutive seeds of that range from a
// random start, so that repeated runs cover different programs and make test checks nothing
// make test-long does not. KILN_TEST_SEED=<first> replays a run (its count follows the mode),
// or explores seeds outside the range. `trace` says how to replay, for SCOPED_TRACE: gtest
// prints it with every failure of the test.
struct Sweep {
  uint64_t first = 0;
  int count = 0;
  std::string trace;
};
inline Sweep sweep(uint64_t fixed_first, int full, int sample, bool in_full = long_tests()) {
  Sweep s;
  s.count = in_full ? full : sample;
  if (const char* e = std::getenv("KILN_TEST_SEED"); e && *e)
    s.first = std::strtoull(e, nullptr, 10);
  else if (in_full)
    s.first = fixed_first;
  else
    s.first = fixed_first + std::random_device{}() % static_cast<unsigned>(full - sample + 1);
  s.trace = "seeds " + std::to_string(s.first) + ".." + std::to_string(s.first + s.count - 1) +
            "; replay with KILN_TEST_SEED=" + std::to_string(s.first) +
            (in_full ? " KILN_TEST_LONG=1" : "");
  return s;
}

// A sweep on a device backend (opencl, vulkan): as `sweep`, except that
// KILN_TEST_DEVICE_SWEEP=sample keeps it to its sample under long tests too. `make sanitize`
// sets it: under ASan the full device sweeps would take most of CI's time, while the code they
// reach is the same for a sample (the cpu and reference sweeps stay full there).
inline Sweep device_sweep(uint64_t fixed_first, int full, int sample) {
  const char* e = std::getenv("KILN_TEST_DEVICE_SWEEP");
  bool sampled = e && std::string(e) == "sample";
  return sweep(fixed_first, full, sample, long_tests() && !sampled);
}

// Which of `total` cases a sweep over a fixed list (every op and dtype, say) runs: all of them
// under long tests, else a random `sample` of them, different every run. KILN_TEST_SEED
// replays a run; `trace` says how, for SCOPED_TRACE.
struct CaseSample {
  std::vector<bool> chosen;
  std::string trace;
  bool operator()(size_t i) const { return chosen.at(i); }
};
inline CaseSample case_sample(size_t total, size_t sample) {
  CaseSample c;
  c.chosen.assign(total, true);
  if (long_tests() || sample >= total) {
    c.trace = "all " + std::to_string(total) + " cases";
    return c;
  }
  Sweep s = sweep(0, 1000000000, 0);  // only its seed: a random one, or KILN_TEST_SEED
  std::mt19937_64 rng(s.first);
  std::vector<size_t> order(total);
  for (size_t i = 0; i < total; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  for (size_t i = sample; i < total; ++i) c.chosen[order[i]] = false;
  c.trace = std::to_string(sample) + " of " + std::to_string(total) +
            " cases; replay with KILN_TEST_SEED=" + std::to_string(s.first) +
            ", all with KILN_TEST_LONG=1";
  return c;
}

}  // namespace kiln::test
