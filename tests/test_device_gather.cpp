// The device gathers (backends/opencl/gather.h, backends/vulkan/gather_shader.h) through the
// Backend interface against the reference interpreter: every dtype, shared and per-row indices,
// negative, out-of-range and 64-bit indices (the clamp rule), inner > 1, m = 0, an indexed axis
// of 100,000 (O(n m) work before these kernels), grids past 65535 workgroups and buffers past
// maxStorageBufferRange on vulkan, the bytes after the output left alone, and through take and
// take_along_axis on device streams.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
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
using test::describe;
using test::NoValidationMessages;
using test::Shape4;

// Runs the gather on `be`; the output buffer holds `spare` bytes more than the output, set to
// 0xab before (returned with the output).
Bytes run_gather(Backend& be, const Shape4& s, Dtype d, const Bytes& a, const Bytes& idx,
                 size_t spare = 0) {
  NativeArgs args;
  args.op = Op::Gather;
  args.dtype = d;
  args.outer = s.outer, args.n = s.n, args.inner = s.inner, args.m = s.m;
  args.shared_index = s.shared;
  size_t out_bytes = static_cast<size_t>(s.outer * s.m * s.inner) * d.size() + spare;
  return test::run_native(be, args, {a, idx}, out_bytes);
}

void expect_matches_reference(const char* dev, const Shape4& s, Dtype d, uint64_t seed) {
  SCOPED_TRACE(describe(s, d) + " on " + dev);
  Bytes a = kdiff::sample(d, static_cast<size_t>(s.outer * s.n * s.inner), seed);
  Bytes idx = kdiff::to_bytes(test::indices(s, seed));
  Bytes got = run_gather(backend_for(device(dev)), s, d, a, idx);
  Bytes want = run_gather(kdiff::ref_backend(), s, d, a, idx);
  EXPECT_EQ(kdiff::compare(got, want, d, {}), "");
}

}  // namespace

// Every dtype: shared indices along rows of one element and of several (inner > 1, a word
// shared by two output rows for 8- and 16-bit types), per-row indices (take_along_axis), lengths
// that are not a multiple of a word or of a 64-wide group, m = 0, and a 100,000-long axis.
TEST(NativeOps, DeviceGatherMatchesReferenceOnEveryDtype) {
  NoValidationMessages check;
  const std::vector<Shape4> shapes = {{1, 7, 1, 5, true},         {3, 5, 3, 7, true},
                                      {2, 9, 5, 6, false},        {1, 300, 1, 257, false},
                                      {4, 65, 1, 129, true},      {2, 3, 1, 0, true},
                                      {1, 100000, 1, 1001, true}, {1, 100000, 3, 67, false}};
  uint64_t seed = 1;
  for (const char* dev : test::native_devices())
    for (Dtype d : kAllDtypes)
      for (const Shape4& s : shapes) expect_matches_reference(dev, s, d, seed++);
}

// An invocation owns a whole word of packed 8- and 16-bit output; the output's last word keeps
// the bytes past the output as they were.
TEST(NativeOps, DeviceGatherLeavesTheBytesAfterItsOutput) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices())
    for (Dtype d : {uint8, float16}) {
      SCOPED_TRACE(std::string(d.name()) + " on " + dev);
      Shape4 s{1, 4, 1, 5, true};
      Bytes a = kdiff::sample(d, 4, 9), idx = kdiff::to_bytes(test::indices(s, 9));
      Bytes got = run_gather(backend_for(device(dev)), s, d, a, idx, 3);
      Bytes want = run_gather(kdiff::ref_backend(), s, d, a, idx, 3);
      EXPECT_EQ(got, want);
      for (size_t b = 5 * d.size(); b < got.size(); ++b) EXPECT_EQ(got[b], 0xab) << "byte " << b;
    }
}

// 4,200,000 int32 outputs (a shared index of 2 over rows of 2,100,000): 65,625 workgroups of 64,
// past lavapipe's 65,535 per dimension, with one group per 64 words as on a GPU; then as few
// groups looping over the rest; 16-bit elements pack two per word, so half the groups.
TEST(NativeOps, DeviceGatherGridsBeyond65535GroupsOnVulkan) {
  NoValidationMessages check;
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no vulkan device";
  const Shape4 s{1, 2, 2'100'000, 2, true};
  for (Dtype d : {int32, bfloat16}) {
    Bytes a = kdiff::sample(d, 2 * 2'100'000, 5),
          idx = kdiff::to_bytes(std::vector<int64_t>{1, -2});
    Bytes want = run_gather(kdiff::ref_backend(), s, d, a, idx);
    for (const char* groups : {"0", "7"}) {
      SCOPED_TRACE(std::string(d.name()) + " KILN_VULKAN_MAX_GROUPS=" + groups);
      setenv("KILN_VULKAN_MAX_GROUPS", groups, 1);
      Bytes got = run_gather(backend_for(device("vulkan")), s, d, a, idx);
      unsetenv("KILN_VULKAN_MAX_GROUPS");
      EXPECT_EQ(kdiff::compare(got, want, d, {}), "");
    }
  }
}

// A table past maxStorageBufferRange (128 MiB on lavapipe) is reached by its device address.
TEST(NativeOps, DeviceGatherReachesTablesPastTheBindingRangeOnVulkan) {
  NoValidationMessages check;
#ifndef KILN_HAVE_VULKAN_BACKEND
  GTEST_SKIP() << "no vulkan backend";
#else
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no vulkan device";
  const vulkan::PhysicalInfo& info = vulkan::physical_devices().at(0);
  int64_t n = static_cast<int64_t>(info.max_storage_range / 8) + 4096;
  if (n * 8 > INT32_MAX) GTEST_SKIP() << "the binding range is past the backend's 2^31 bytes";
  std::vector<int64_t> table(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) table[i] = i * 3 - 7;
  std::vector<int64_t> iv = {0, n - 1, -1, -2, n, n - 4000, 123456789 % n, -n, INT64_MIN};
  Shape4 s{1, n, 1, static_cast<int64_t>(iv.size()), true};
  Bytes got = run_gather(backend_for(device("vulkan")), s, int64, kdiff::to_bytes(table),
                         kdiff::to_bytes(iv));
  std::vector<int64_t> out = kdiff::from_bytes<int64_t>(got);
  for (size_t j = 0; j < iv.size(); ++j)
    EXPECT_EQ(out[j], native_index(iv[j], n) * 3 - 7) << "index " << iv[j];
#endif
}

// Buffers of another device raise, naming the gather and the device.
TEST(NativeOps, DeviceGatherRaisesOnBuffersOfAnotherDevice) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices()) {
    Backend& be = backend_for(device(dev));
    auto a = be.allocate(0, 16), out = be.allocate(0, 16);
    auto idx = kdiff::ref_backend().allocate(0, 16);
    NativeArgs args;
    args.op = Op::Gather;
    args.dtype = float32;
    args.n = 4, args.m = 2, args.shared_index = true;
    args.buffers = {a.get(), idx.get(), out.get()};
    auto q = be.create_queue(0);
    test::expect_error([&] { q->enqueue_native(args); }, {"gather float32", dev});
  }
}

// take and take_along_axis on device streams reach the kernels and agree with cpu, on a table of
// 100,000 rows.
TEST(NativeOps, DeviceTakeAndTakeAlongAxisMatchCpu) {
  NoValidationMessages check;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> pick(-100003, 100003);
  std::normal_distribution<float> normal;
  std::vector<int64_t> iv(4096), jv(2 * 100000);
  std::vector<float> tv(2 * 100000);
  for (int64_t& v : iv) v = pick(rng);
  for (int64_t& v : jv) v = pick(rng) % 3;
  for (float& v : tv) v = normal(rng);
  Array table = array(tv, {100000, 2});
  Array idx = array(iv, {4096});
  Array along = array(jv, {100000, 2});
  auto on = [&](const char* dev) {
    StreamScope scope(device(dev));
    Array t = take(table, idx, 0), u = take_along_axis(table, along, 1);
    eval({t, u});
    return std::make_pair(t.to_vector<float>(), u.to_vector<float>());
  };
  auto want = on("cpu");
  for (const char* dev : test::native_devices()) {
    SCOPED_TRACE(dev);
    auto got = on(dev);
    EXPECT_EQ(got.first, want.first);
    EXPECT_EQ(got.second, want.second);
  }
}

}  // namespace kiln
