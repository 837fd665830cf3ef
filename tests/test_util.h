// Small helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <fstream>
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
#include "sweep.h"

namespace kiln::test {

// Every element of `a` as a double (evaluating it).
inline std::vector<double> values(const Array& a) { return astype(a, float64).to_vector<double>(); }

// Whether a device of `backend` ("opencl", "vulkan", ...) is usable here.
inline bool backend_available(const std::string& backend) {
  for (const DeviceInfo& d : devices())
    if (d.device.backend == backend && d.available) return true;
  return false;
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
