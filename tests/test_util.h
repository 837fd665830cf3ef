// Small helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_TEST_ASAN 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define KILN_TEST_ASAN 1
#endif
#ifdef KILN_TEST_ASAN
#include <sanitizer/allocator_interface.h>
#endif

// Tests reach past the user API: the extension header (backends, Kernel IR) and the node.
#include "backends/extension.h"
#include "graph/array_node.h"
#include "kiln.h"

namespace kiln::test {

// Every element of `a` as a double (evaluating it).
inline std::vector<double> values(const Array& a) { return astype(a, float64).to_vector<double>(); }

// Whether a device of `backend` ("opencl", "vulkan", ...) is usable here.
inline bool backend_available(const std::string& backend) {
  for (const DeviceInfo& d : devices())
    if (d.device.backend == backend && d.available) return true;
  return false;
}

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

// Runs `f` and checks it raises kiln::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected kiln::Error mentioning '" << (parts.empty() ? "" : parts[0])
                  << "', nothing was raised";
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
  }
}

// Memory the process holds, for tests that check memory is given back: the resident set size;
// under AddressSanitizer (make sanitize) the bytes in live heap blocks instead, since ASan keeps
// freed blocks resident in its quarantine and RSS there grows with everything freed.
inline size_t memory_in_use_bytes() {
#ifdef KILN_TEST_ASAN
  return __sanitizer_get_current_allocated_bytes();
#else
  std::ifstream in("/proc/self/statm");
  size_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
#endif
}

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
}

}  // namespace kiln::test
