// What the device native-kernel tests (test_device_gather/scatter/sort/scan.cpp) share: the
// devices with those kernels here, a guard that fails a test on vulkan validation messages, and
// the shapes and index sets of gathers and scatters.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "graph/dtype.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"
#ifdef KILN_HAVE_VULKAN_BACKEND
#include "backends/vulkan/vulkan_backend.h"
#endif

namespace kiln::test {

#ifdef KILN_HAVE_VULKAN_BACKEND
// The binaries run with KILN_VULKAN_VALIDATION=1 (tests/CMakeLists.txt): a test fails when the
// validation layer reported anything while it ran.
struct NoValidationMessages {
  int64_t before = vulkan_validation_messages();
  ~NoValidationMessages() {
    EXPECT_EQ(vulkan_validation_messages(), before)
        << "VK_LAYER_KHRONOS_validation reported problems (printed above)";
  }
};
#else
struct NoValidationMessages {
  ~NoValidationMessages() {}  // user-provided: a declared guard is not an unused variable
};
#endif

// Runs native op `args` on `be` with buffers `inputs` and then an output of `out_bytes` bytes, all
// set to 0xab before; returns the output.
inline kdiff::Bytes run_native(Backend& be, NativeArgs args,
                               const std::vector<kdiff::Bytes>& inputs, size_t out_bytes) {
  auto alloc = [&](const kdiff::Bytes& b) {
    auto buf = be.allocate(0, std::max<size_t>(b.size(), 1));
    if (!b.empty()) buf->write(b.data(), 0, b.size());
    return buf;
  };
  std::vector<std::shared_ptr<Buffer>> held;
  for (const kdiff::Bytes& b : inputs) held.push_back(alloc(b));
  held.push_back(alloc(kdiff::Bytes(out_bytes, 0xab)));
  args.buffers.clear();
  for (const auto& b : held) args.buffers.push_back(b.get());
  auto q = be.create_queue(0);
  if (EventPtr ev = q->enqueue_native(args)) ev->wait();
  q->finish();
  kdiff::Bytes out(out_bytes);
  if (out_bytes) held.back()->read(out.data(), 0, out_bytes);
  return out;
}

// The device backends with native kernels (opencl, vulkan) that are usable here.
inline std::vector<const char*> native_devices() {
  std::vector<const char*> out;
  for (const char* dev : {"opencl", "vulkan"})
    if (backend_available(dev)) out.push_back(dev);
  return out;
}

// Whether `dev`'s element-wise kernels keep float32 denormals (an eager 1e-40f + 1e-40f there).
// Vulkan leaves them to the driver: lavapipe keeps them; NVIDIA's driver flushes them and offers
// no DenormPreserve to ask for (an H100, driver 580). A device's native kernels must treat them
// as its element-wise kernels do.
inline bool keeps_float32_denormals(const char* dev) {
  Array tiny = array(std::vector<float>{1e-40f}, {1});
  return add(tiny, tiny, device(dev)).to_vector<float>()[0] != 0.0f;
}

// kdiff::compare of a device's result with the reference's, bit for bit, except that where
// `flushes` (the device's element-wise kernels flush float32 denormals) a float32 denormal or
// zero of either sign on one side matches any of those on the other; every other value, NaN
// and infinities included, must still match.
inline std::string compare_as_device(kdiff::Bytes got, kdiff::Bytes want, Dtype d, bool flushes) {
  if (flushes && d == float32)
    for (kdiff::Bytes* b : {&got, &want})
      for (size_t i = 0; i < b->size() / 4; ++i) {
        float v;
        std::memcpy(&v, b->data() + 4 * i, 4);
        if (std::fabs(v) < 0x1.0p-126f) std::memset(b->data() + 4 * i, 0, 4);
      }
  std::string diff = kdiff::compare(got, want, d, {});
  return diff.empty() || !flushes ? diff : diff + " (float32 denormals taken as zero)";
}

// A gather's or scatter's shape: `outer` rows of n along the indexed axis, `inner` after it, m
// indices; `shared`: one index per position along m, else one per element.
struct Shape4 {
  int64_t outer, n, inner, m;
  bool shared;
};

inline std::string describe(const Shape4& s, Dtype d) {
  return std::string(d.name()) + " outer " + std::to_string(s.outer) + " n " + std::to_string(s.n) +
         " inner " + std::to_string(s.inner) + " m " + std::to_string(s.m) +
         (s.shared ? " shared" : " per-row");
}

// Indices of every kind the rule covers first (both ends, past them by one and by 2^32, the
// int64 extremes), then random ones in [-n - 3, n + 3]; one per m (shared) or per element.
inline std::vector<int64_t> indices(const Shape4& s, uint64_t seed) {
  size_t count = static_cast<size_t>(s.shared ? s.m : s.outer * s.m * s.inner);
  const int64_t n = s.n, k32 = int64_t{1} << 32;
  const int64_t odd[] = {0,
                         n - 1,
                         n,
                         -1,
                         -n,
                         -n - 1,
                         k32,
                         k32 + 1,
                         -k32,
                         -k32 + 1,
                         -k32 - 1,
                         k32 - 1,
                         INT64_MAX,
                         INT64_MIN,
                         INT32_MAX,
                         INT32_MIN,
                         int64_t{INT32_MAX} + 1};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(-n - 3, n + 3);
  std::vector<int64_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = i < std::size(odd) ? odd[i] : pick(rng);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

}  // namespace kiln::test
