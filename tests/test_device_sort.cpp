// The device sorts (backends/opencl/sort.h, backends/vulkan/sort_shader.h) through the Backend
// interface against the reference: every dtype, sort and argsort, ascending and descending, NaN
// (any payload), -0 and inf, many ties (argsort's stability), n = 0, 1, 2, powers of two and
// not, rows crossing the work-group's block and long enough for global passes (100,000, beyond
// the old O(n^2) lowering in a test's time), inner > 1 and outer > 1 in one launch, vulkan's
// grid folded or looped, and through sort and argsort on device streams.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backends/native.h"
#include "backends/sort_passes.h"
#include "device_native.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using kdiff::Bytes;
using test::NoValidationMessages;

struct Rows {
  int64_t outer, n, inner;
};

struct SortCase {
  Op op;
  bool descending;
};
const SortCase kCases[] = {
    {Op::Sort, false}, {Op::Sort, true}, {Op::Argsort, false}, {Op::Argsort, true}};

std::string describe(const Rows& r, Dtype d, const SortCase& c) {
  return std::string(op_name(c.op)) + (c.descending ? " descending " : " ") + d.name() + " outer " +
         std::to_string(r.outer) + " n " + std::to_string(r.n) + " inner " +
         std::to_string(r.inner);
}

// Runs the sort on `be`; the output's bytes start as 0xab.
Bytes run_sort(Backend& be, const Rows& r, Dtype d, const SortCase& c, const Bytes& a) {
  NativeArgs args;
  args.op = c.op;
  args.dtype = d;
  args.outer = r.outer, args.n = r.n, args.inner = r.inner;
  args.descending = c.descending;
  size_t count = static_cast<size_t>(r.outer * r.n * r.inner);
  return test::run_native(be, args, {a}, count * (c.op == Op::Argsort ? 8 : d.size()));
}

// Bit for bit but NaNs (the reference's scalar values do not keep NaN payloads).
void expect_matches_reference(const char* dev, const Rows& r, Dtype d, const SortCase& c,
                              const Bytes& a) {
  SCOPED_TRACE(describe(r, d, c) + " on " + dev);
  Bytes got = run_sort(backend_for(device(dev)), r, d, c, a);
  Bytes want = run_sort(kdiff::ref_backend(), r, d, c, a);
  Dtype out = c.op == Op::Argsort ? int64 : d;
  ASSERT_EQ(kdiff::compare(got, want, out, {}), "");
}

}  // namespace

// The plan: one local pass for rows within a block; beyond, global steps down to the block (two
// a pass while both are wide) and a local finish per stage; slots padded to whole blocks.
TEST(DeviceSort, PlanCoversEveryStage) {
  SortPlan p = plan_sort(3, 5, 256);
  EXPECT_EQ(p.padded, 8);
  EXPECT_EQ(p.slots, 256);
  ASSERT_EQ(p.passes.size(), 1u);
  EXPECT_TRUE(p.passes[0].local);
  EXPECT_EQ(p.passes[0].k1, 8u);
  // P = 1024: stage 512 takes the global step 256, stage 1024 the steps 512 and 256 in one pass.
  p = plan_sort(2, 1000, 256);
  EXPECT_EQ(p.slots, 2048);
  ASSERT_EQ(p.passes.size(), 5u);
  EXPECT_FALSE(p.passes[1].local);
  EXPECT_EQ(p.passes[1].k0, 512u);
  EXPECT_EQ(p.passes[1].j0, 256u);
  EXPECT_EQ(p.passes[1].steps, 1u);
  EXPECT_TRUE(p.passes[2].local);
  EXPECT_EQ(p.passes[2].j0, 128u);
  EXPECT_FALSE(p.passes[3].local);
  EXPECT_EQ(p.passes[3].j0, 512u);
  EXPECT_EQ(p.passes[3].steps, 2u);
  EXPECT_EQ(p.passes[4].k0, 1024u);
  // P = 2^20 in blocks of 512: 12 local passes and 66 global steps in 36 passes.
  p = plan_sort(1, 1 << 20, 512);
  size_t global = 0, steps = 0;
  for (const SortPass& s : p.passes) global += !s.local, steps += s.local ? 0 : s.steps;
  EXPECT_EQ(p.passes.size() - global, 12u);
  EXPECT_EQ(steps, 66u);
  EXPECT_EQ(global, 36u);
  EXPECT_TRUE(plan_sort(4, 1, 256).passes.empty());
  test::expect_error([] { plan_sort(1 << 20, 3000, 256); }, {"sort", "2^31"});
}

// Every dtype and direction, sort and argsort: sampled values (NaN, +-0, +-inf, extremes, many
// ties), rows of 0, 1, 2, across a block and past it, strided (inner > 1) and many rows.
TEST(DeviceSort, MatchesReferenceOnEveryDtype) {
  NoValidationMessages check;
  const std::vector<Rows> shapes = {{1, 0, 1},   {2, 1, 3},   {1, 2, 1},   {3, 7, 1},   {2, 5, 3},
                                    {1, 256, 1}, {1, 257, 1}, {2, 300, 5}, {5, 1000, 1}};
  uint64_t seed = 1;
  for (const char* dev : test::native_devices())
    for (Dtype d : kAllDtypes)
      for (const Rows& r : shapes)
        for (const SortCase& c : kCases) {
          Bytes a = kdiff::sample(d, static_cast<size_t>(r.outer * r.n * r.inner), seed++);
          expect_matches_reference(dev, r, d, c, a);
        }
}

// 100,000 elements a row: global passes and many blocks, for 4- and 8-byte keys; a packed
// type with two zeros in 3 rows of 33,333 strided by inner.
TEST(DeviceSort, MatchesReferenceOnLongRows) {
  NoValidationMessages check;
  struct Long {
    Dtype d;
    Rows r;
    SortCase c;
  };
  const Long cases[] = {{float32, {1, 100000, 1}, kCases[1]},
                        {int64, {1, 100000, 1}, kCases[2]},
                        {float16, {1, 33333, 3}, kCases[3]}};
  uint64_t seed = 100;
  for (const char* dev : test::native_devices())
    for (const Long& l : cases) {
      Bytes a = kdiff::sample(l.d, static_cast<size_t>(l.r.outer * l.r.n * l.r.inner), seed++);
      expect_matches_reference(dev, l.r, l.d, l.c, a);
    }
}

// NaNs of several payloads and signs, zeros of both signs and ties only: the values come out
// as the reference orders them (-0 before +0 in sort) and argsort keeps ties by position.
TEST(DeviceSort, OrdersNansZerosAndTiesAsTheReference) {
  NoValidationMessages check;
  const uint32_t bits[] = {0x7fc00000, 0xffc00000, 0x7f800001, 0x80000000, 0x00000000,
                           0x7f800000, 0xff800000, 0x3f800000, 0x7fc00003, 0x80000000};
  std::vector<uint32_t> v;
  for (int rep = 0; rep < 40; ++rep) v.insert(v.end(), std::begin(bits), std::end(bits));
  Bytes a(v.size() * 4);
  std::memcpy(a.data(), v.data(), a.size());
  Bytes same(600 * 8, 0);  // 600 int64 zeros: argsort must give 0, 1, 2, ...
  for (const char* dev : test::native_devices())
    for (const SortCase& c : kCases) {
      expect_matches_reference(dev, {1, static_cast<int64_t>(v.size()), 1}, float32, c, a);
      expect_matches_reference(dev, {2, 300, 1}, int64, c, same);
    }
}

// Vulkan: a grid of one workgroup per block and per 128 items (KILN_VULKAN_MAX_GROUPS=0), and 7
// workgroups looping over the 256 blocks and every item.
TEST(DeviceSort, VulkanGridsLoopOrSpread) {
  NoValidationMessages check;
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no vulkan device";
  const Rows r{1, 20000, 2};
  const std::pair<Dtype, SortCase> cases[] = {{float64, kCases[0]}, {int8, kCases[3]}};
  for (const auto& [d, c] : cases) {
    Bytes a = kdiff::sample(d, 40000, 7);
    for (const char* groups : {"0", "7"}) {
      SCOPED_TRACE(std::string("KILN_VULKAN_MAX_GROUPS=") + groups);
      setenv("KILN_VULKAN_MAX_GROUPS", groups, 1);
      expect_matches_reference("vulkan", r, d, c, a);
      unsetenv("KILN_VULKAN_MAX_GROUPS");
    }
  }
}

// Buffers of another device raise, naming the sort and the device.
TEST(DeviceSort, RaisesOnBuffersOfAnotherDevice) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices()) {
    Backend& be = backend_for(device(dev));
    auto a = kdiff::ref_backend().allocate(0, 16), out = be.allocate(0, 16);
    NativeArgs args;
    args.op = Op::Sort;
    args.dtype = float32;
    args.n = 4;
    args.buffers = {a.get(), out.get()};
    auto q = be.create_queue(0);
    test::expect_error([&] { q->enqueue_native(args); }, {"sort float32", dev});
  }
}

// sort and argsort on device streams reach the kernels and agree with cpu: 50,000 rows of 3
// along axis 0 and 3 rows of 50,000.
TEST(DeviceSort, SortAndArgsortOnDeviceStreamsMatchCpu) {
  NoValidationMessages check;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> v(150000);
  for (float& x : v) x = std::round(normal(rng) * 100) / 100;
  Array x = array(v, {50000, 3});
  auto on = [&](const char* dev) {
    StreamScope scope(device(dev));
    Array s0 = sort(x, 0), s1 = sort(transpose(x), 1), i0 = argsort(x, 0);
    eval({s0, s1, i0});
    return std::make_tuple(s0.to_vector<float>(), s1.to_vector<float>(), i0.to_vector<int64_t>());
  };
  auto want = on("cpu");
  for (const char* dev : test::native_devices()) {
    SCOPED_TRACE(dev);
    EXPECT_TRUE(on(dev) == want);
  }
}

}  // namespace kiln
