// The device scans (backends/opencl/scan.h, backends/vulkan/scan_shader.h) through the Backend
// interface against the reference interpreter: every ScanOp and dtype, inclusive and exclusive,
// forward and reversed, n = 0 and 1, rows inside one tile and across many (the three-pass form,
// 100,000 long, and 300,000: two levels of tile totals on vulkan), inner > 1 and outer > 1,
// NaN, infinities and -0; and cumsum / cummax / logcumsumexp through the API on device streams.
// Tolerance (docs/backends/opencl.md, vulkan.md): integer scans, max and min are bit for bit;
// float sums and products use inputs whose every partial result is exact in the dtype (quarters,
// +-1, 2, 0.5), so any order of additions gives the reference's values; logcumsumexp, whose
// every step rounds, is compared within a relative 1e-5 + 4e-9 n (float32: the reference's
// drift over n steps; 1.25e-4 seen at n = 100,000), 1e-12 + 1e-17 n (float64) and 2^-5
// (float16, bfloat16 on rows up to 70: the reference rounds each step to 16 bits, the devices
// once at the store, so long rows drift apart by design).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/native.h"
#include "device_native.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"
#ifdef KILN_HAVE_VULKAN_BACKEND
#include "backends/vulkan/vk_context.h"
#endif

namespace kiln {
namespace {

using kdiff::Bytes;
using test::NoValidationMessages;

const ScanOp kOps[] = {ScanOp::Sum, ScanOp::Prod, ScanOp::Max, ScanOp::Min, ScanOp::LogAddExp};

struct Shape3 {
  int64_t outer, n, inner;
};

struct ScanCase {
  Dtype d;
  ScanOp op;
  bool inclusive, reverse;
  Shape3 s;
  std::string describe(const char* dev) const {
    return std::string(op_name(op)) + " " + d.name() + (inclusive ? " inclusive" : " exclusive") +
           (reverse ? " reverse" : "") + " outer " + std::to_string(s.outer) + " n " +
           std::to_string(s.n) + " inner " + std::to_string(s.inner) + " on " + dev;
  }
};

// Inputs whose float sums and products are exact in any order (see the top), with NaN, +-inf and
// -0 a few times per row; integers anything (they wrap, exactly, in any order).
Bytes inputs(const ScanCase& c, uint64_t seed) {
  size_t count = static_cast<size_t>(c.s.outer * c.s.n * c.s.inner);
  if (!c.d.is_float() || c.op == ScanOp::Max || c.op == ScanOp::Min)
    return kdiff::sample(c.d, count, seed);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> q(-16, 16), coin(0, 99);
  const double specials[] = {NAN, INFINITY, -INFINITY, -0.0};
  double special_odds = 3.0 / static_cast<double>(std::max<int64_t>(c.s.n, 1));
  std::uniform_real_distribution<double> u(0, 1), wide(-4, 4);
  std::vector<double> v(count);
  for (double& x : v) {
    if (c.op == ScanOp::Sum)
      x = c.d.is_half() ? q(rng) % 2 : q(rng) * 0.25;
    else if (c.op == ScanOp::Prod) {
      int k = coin(rng);
      x = k < 49 ? -1 : k < 98 ? 1 : k == 98 ? (c.d.is_half() ? 0 : 2) : 0.5;
    } else {
      x = wide(rng);
    }
    if (u(rng) < special_odds) x = specials[rng() % std::size(specials)];
  }
  Bytes b(count * c.d.size());
  for (size_t i = 0; i < count; ++i)
    scalar::store(b.data(), c.d, static_cast<int64_t>(i), {scalar::round_to(v[i], c.d), 0});
  return b;
}

Bytes run_scan(Backend& be, const ScanCase& c, const Bytes& in) {
  NativeArgs a;
  a.op = Op::Scan;
  a.dtype = c.d;
  a.scan = c.op;
  a.inclusive = c.inclusive, a.reverse = c.reverse;
  a.outer = c.s.outer, a.n = c.s.n, a.inner = c.s.inner;
  return test::run_native(be, a, {in}, in.size());
}

kdiff::Tolerance tolerance(const ScanCase& c) {
  kdiff::Tolerance t;
  if (!c.d.is_float() || c.op == ScanOp::Max || c.op == ScanOp::Min) return t;
  if (c.op != ScanOp::LogAddExp) {
    t.kind = kdiff::Tolerance::Value;  // -0 and +0 alike: exact sums of signed zeros
    return t;
  }
  t.kind = kdiff::Tolerance::Rel;
  // The reference rounds at each of its n steps: its drift grows with the row.
  double n = static_cast<double>(c.s.n);
  t.rtol = c.d == float64 ? 1e-12 + 1e-17 * n : c.d == float32 ? 1e-5 + 4e-9 * n : 0x1.0p-5;
  t.atol = t.rtol;
  return t;
}

void expect_matches_reference(const char* dev, const ScanCase& c, uint64_t seed) {
  SCOPED_TRACE(c.describe(dev));
  Bytes in = inputs(c, seed);
  Bytes got = run_scan(backend_for(device(dev)), c, in);
  Bytes want = run_scan(kdiff::ref_backend(), c, in);
  EXPECT_EQ(kdiff::compare(got, want, c.d, tolerance(c)), "");
}

// Every dtype and op on rows of 0, 1 and 7 elements, strided (inner 3), across vulkan's
// 512-element tile (1000) and PoCL's 1024 (2500, with inner 2), and 100,000 long (~100-200
// tiles: the three-pass form). Each (dtype, op) is a kernel of its own (~1 s to build cold on
// PoCL), so make test runs 2 consecutive pairs from a random start with the four modes rotating
// over the shapes; make test-long every pair in every mode (a sweep: tests/CMakeLists.txt).
TEST(NativeOps, DeviceScanMatchesReferenceOnEveryDtypeAndOp) {
  NoValidationMessages check;
  const std::vector<Shape3> shapes = {{1, 0, 1},    {1, 1, 1},    {3, 7, 1},     {2, 5, 3},
                                      {2, 1000, 1}, {1, 2500, 2}, {1, 100000, 1}};
  std::vector<std::pair<Dtype, ScanOp>> pairs;
  for (Dtype d : kAllDtypes)
    for (ScanOp op : kOps)
      if (op != ScanOp::LogAddExp || d.is_float()) pairs.push_back({d, op});
  // A device sweep: make sanitize (KILN_TEST_DEVICE_SWEEP=sample) keeps to the sample too.
  test::Sweep chosen = test::device_sweep(0, static_cast<int>(pairs.size()), 2);
  const bool full = chosen.count == static_cast<int>(pairs.size());
  SCOPED_TRACE(chosen.trace);
  for (const char* dev : test::native_devices()) {
    uint64_t seed = 1;
    for (size_t pi = 0; pi < pairs.size(); ++pi) {
      const auto [d, op] = pairs[pi];
      for (size_t s = 0; s < shapes.size(); ++s)
        for (int mode = 0; mode < 4; ++mode) {
          ++seed;
          if (pi < chosen.first || pi >= chosen.first + static_cast<uint64_t>(chosen.count))
            continue;
          if (!full && static_cast<size_t>(mode) != (s + pi) % 4) continue;
          if (op == ScanOp::LogAddExp && d.is_half() && shapes[s].n > 70) continue;
          expect_matches_reference(dev, {d, op, mode < 2, mode % 2 == 1, shapes[s]}, seed);
        }
    }
  }
}

// Rows of 300,000: in the tile form (a GPU, or KILN_OPENCL_GPU_LAYOUT=1 / KILN_VULKAN_SCAN_TILES=1
// on the CPU devices: tests/CMakeLists.txt) more tiles than one tile holds on vulkan (512^2),
// so the tile totals are themselves scanned in three passes.
TEST(NativeOps, DeviceScanOfTwoLevelsOfTiles) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices())
    for (auto [d, op] : {std::pair{float32, ScanOp::Sum}, std::pair{int32, ScanOp::Max}})
      expect_matches_reference(dev, {d, op, op == ScanOp::Sum, op == ScanOp::Max, {1, 300000, 1}},
                               7);
}

// A row past maxStorageBufferRange (128 MiB on lavapipe) is reached by its device address: an
// int64 cumsum of 2^24 + 4096 elements against the sum on the host.
TEST(NativeOps, DeviceScanReachesRowsPastTheBindingRangeOnVulkan) {
  NoValidationMessages check;
#ifndef KILN_HAVE_VULKAN_BACKEND
  GTEST_SKIP() << "no vulkan backend";
#else
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no vulkan device";
  const vulkan::PhysicalInfo& info = vulkan::physical_devices().at(0);
  int64_t n = static_cast<int64_t>(info.max_storage_range / 8) + 4096;
  if (n * 8 > INT32_MAX) GTEST_SKIP() << "the binding range is past the backend's 2^31 bytes";
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (i * 7919) % 1000 - 500;
  ScanCase c{int64, ScanOp::Sum, true, false, {1, n, 1}};
  std::vector<int64_t> got =
      kdiff::from_bytes<int64_t>(run_scan(backend_for(device("vulkan")), c, kdiff::to_bytes(v)));
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    sum += v[i];
    if (got[i] != sum) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << sum;
      break;
    }
  }
#endif
}

// Denormal sums (exact in any order, so bit for bit), NaN through cummax and infinities through
// cumsum, as the reference: the float controls the vulkan shaders ask for, and OpenCL's
// defaults (tests/test_device_scatter.cpp checks the same for scatter_add). Float32 denormals
// only where the device's element-wise kernels keep them (NVIDIA's Vulkan driver flushes them).
TEST(NativeOps, DeviceScanKeepsDenormalsNanAndInfinities) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices())
    for (Dtype d : {float32, float64}) {
      // A device whose element-wise kernels flush float32 denormals may flush them here too.
      const bool flushes = d == float32 && !test::keeps_float32_denormals(dev);
      // Multiples of the least denormal: every partial sum (under 2^15 of them) is exact.
      double tiny = std::ldexp(1.0, d == float32 ? -149 : -1074);
      std::vector<double> v(3000);
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = tiny * static_cast<double>(i % 7) * (i % 3 ? 1 : -1);
      Bytes sums(v.size() * d.size());
      for (size_t i = 0; i < v.size(); ++i)
        scalar::store(sums.data(), d, static_cast<int64_t>(i), {scalar::round_to(v[i], d), 0});
      v[1500] = NAN, v[2000] = INFINITY;
      Bytes wild(v.size() * d.size());
      for (size_t i = 0; i < v.size(); ++i)
        scalar::store(wild.data(), d, static_cast<int64_t>(i), {scalar::round_to(v[i], d), 0});
      for (auto [op, in] : {std::pair{ScanOp::Sum, &sums}, std::pair{ScanOp::Sum, &wild},
                            std::pair{ScanOp::Max, &wild}, std::pair{ScanOp::Min, &wild}}) {
        ScanCase c{d, op, true, false, {1, static_cast<int64_t>(v.size()), 1}};
        SCOPED_TRACE(c.describe(dev));
        Bytes got = run_scan(backend_for(device(dev)), c, *in);
        Bytes want = run_scan(kdiff::ref_backend(), c, *in);
        EXPECT_EQ(test::compare_as_device(got, want, d, flushes), "");
      }
    }
}

// Buffers of another device and logcumsumexp of integers raise, naming the scan.
TEST(NativeOps, DeviceScanRaisesOnBadInput) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices()) {
    Backend& be = backend_for(device(dev));
    auto in = kdiff::ref_backend().allocate(0, 16), out = be.allocate(0, 16);
    NativeArgs a;
    a.op = Op::Scan;
    a.dtype = float32;
    a.n = 4;
    a.buffers = {in.get(), out.get()};
    auto q = be.create_queue(0);
    test::expect_error([&] { q->enqueue_native(a); }, {"cumsum float32", dev});
    auto in2 = be.allocate(0, 16);
    a.dtype = int32, a.scan = ScanOp::LogAddExp;
    a.buffers = {in2.get(), out.get()};
    test::expect_error([&] { q->enqueue_native(a); }, {"int32", "valid: float dtypes"});
  }
}

// cumsum, cummax and logcumsumexp on device streams reach the kernels and agree with cpu.
TEST(NativeOps, DeviceCumsumMatchesCpu) {
  NoValidationMessages check;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> q(-16, 16);
  std::vector<float> v(600 * 70);
  for (float& x : v) x = static_cast<float>(q(rng)) * 0.25f;
  Array x = array(v, {600, 70});
  auto on = [&](const char* dev) {
    StreamScope scope(device(dev));
    Array a = cumsum(x, 0), b = cummax(x, 1, true, false), c = logcumsumexp(x, 0);
    eval({a, b, c});
    return std::vector<std::vector<float>>{a.to_vector<float>(), b.to_vector<float>(),
                                           c.to_vector<float>()};
  };
  auto want = on("cpu");
  for (const char* dev : test::native_devices()) {
    SCOPED_TRACE(dev);
    auto got = on(dev);
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], want[1]);
    for (size_t i = 0; i < want[2].size(); ++i)
      ASSERT_NEAR(got[2][i], want[2][i], 1e-4 * std::abs(want[2][i])) << i;
  }
}

}  // namespace
}  // namespace kiln
