// The device scatter_add kernels (backends/opencl/scatter.h, backends/vulkan/scatter_shader.h)
// through the Backend interface against the reference interpreter: every dtype, shared and
// per-row indices, many updates into one slot (contention on the atomics), negative,
// out-of-range and 64-bit indices (the clamp rule), inner > 1, outer > 1, m = 0, 100,000 slots
// and updates (O(n m) work before these kernels), the bytes after the output left alone, the
// output being the base itself (in place), float32 denormals, NaN and infinities bit for bit,
// buffers past maxStorageBufferRange on vulkan, and scatter_add on device streams.
//
// Tolerance: integers and bool are exact (wrapping as the reference). Floats are added in the
// order the atomics land, so a slot that k updates reach may differ from the reference's
// sequential sum by (k + 1) * eps * (|a| + sum |u|), eps the accumulator's (float32 for 16-bit
// floats, which are then rounded once as the reference rounds, so they may also differ by one
// rounding of their own: 2^-10 or 2^-7 of the value).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
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
using test::indices;
using test::NoValidationMessages;
using test::Shape4;

// Runs the scatter_add on `be`; the output buffer holds `spare` bytes more than the output, set
// to 0xab before (returned with the output).
Bytes run_scatter(Backend& be, const Shape4& s, Dtype d, const Bytes& a, const Bytes& idx,
                  const Bytes& upd, size_t spare = 0) {
  NativeArgs args;
  args.op = Op::ScatterAdd;
  args.dtype = d;
  args.outer = s.outer, args.n = s.n, args.inner = s.inner, args.m = s.m;
  args.shared_index = s.shared;
  return test::run_native(be, args, {a, idx, upd}, a.size() + spare);
}

// For float dtypes, per output slot: how many updates reach it and |a| + sum |u| (the scale of
// a reassociated sum's error).
struct Reach {
  std::vector<int64_t> count;
  std::vector<double> magnitude;
};

Reach reach(const Shape4& s, Dtype d, const Bytes& a, const std::vector<int64_t>& idx,
            const Bytes& upd) {
  Reach r;
  size_t total = a.size() / d.size();
  r.count.assign(total, 0);
  r.magnitude.resize(total);
  for (size_t e = 0; e < total; ++e) r.magnitude[e] = std::fabs(kdiff::get(a, d, e));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.m; ++j)
      for (int64_t q = 0; q < s.inner; ++q) {
        int64_t g = (o * s.m + j) * s.inner + q;
        int64_t e = (o * s.n + native_index(idx[s.shared ? j : g], s.n)) * s.inner + q;
        r.count[e] += 1;
        r.magnitude[e] += std::fabs(kdiff::get(upd, d, static_cast<size_t>(g)));
      }
  return r;
}

// Empty when `got` agrees with `want` (see the top for the tolerance), else the first
// difference.
std::string compare_sums(const Bytes& got, const Bytes& want, Dtype d, const Reach& r) {
  if (!d.is_float()) return kdiff::compare(got, want, d, {});
  if (got.size() != want.size()) return "size differs";
  const double eps = d == float64 ? 0x1.0p-52 : 0x1.0p-23;
  const double tiny = d == float64 ? DBL_MIN : FLT_MIN;  // denormals a device may flush
  const double round16 = d == float16 ? 0x1.0p-10 : d == bfloat16 ? 0x1.0p-7 : 0;
  for (size_t e = 0; e < r.count.size(); ++e) {
    double g = kdiff::get(got, d, e), w = kdiff::get(want, d, e);
    bool ok;
    if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g))
      ok = (std::isnan(g) && std::isnan(w)) || g == w;
    else
      ok = std::fabs(g - w) <= static_cast<double>(r.count[e] + 1) * eps * r.magnitude[e] +
                                   round16 * std::fabs(w) + 0x1.0p-24 * (round16 > 0) + tiny;
    if (!ok) {
      std::ostringstream os;
      os.precision(17);
      os << "element " << e << ": got " << g << " vs reference " << w << " (" << r.count[e]
         << " updates, magnitude " << r.magnitude[e] << ")";
      return os.str();
    }
  }
  return "";
}

void expect_matches_reference(const char* dev, const Shape4& s, Dtype d, uint64_t seed) {
  SCOPED_TRACE(describe(s, d) + " on " + dev);
  Bytes a = kdiff::sample(d, static_cast<size_t>(s.outer * s.n * s.inner), seed);
  Bytes upd = kdiff::sample(d, static_cast<size_t>(s.outer * s.m * s.inner), seed + 1000);
  std::vector<int64_t> iv = indices(s, seed);
  Bytes idx = kdiff::to_bytes(iv);
  Bytes got = run_scatter(backend_for(device(dev)), s, d, a, idx, upd);
  Bytes want = run_scatter(kdiff::ref_backend(), s, d, a, idx, upd);
  EXPECT_EQ(compare_sums(got, want, d, reach(s, d, a, iv, upd)), "");
}

}  // namespace

// Every dtype: shared indices along rows of one element and of several (inner > 1, a packed
// word shared by two rows for 8- and 16-bit types), per-row indices (scatter_add_along_axis),
// 5,000 updates into 4 slots per row (contention), lengths that are not a multiple of a word
// or of a 64-wide group, m = 0, and 100,000 updates into 100,000 slots.
TEST(NativeOps, DeviceScatterAddMatchesReferenceOnEveryDtype) {
  NoValidationMessages check;
  const std::vector<Shape4> shapes = {{1, 7, 1, 5, true},    {3, 5, 3, 7, true},
                                      {2, 9, 5, 6, false},   {1, 300, 1, 257, false},
                                      {4, 65, 1, 129, true}, {2, 4, 3, 5000, false},
                                      {2, 3, 1, 0, true},    {1, 100000, 1, 100000, true}};
  uint64_t seed = 1;
  for (const char* dev : test::native_devices())
    for (Dtype d : kAllDtypes)
      for (const Shape4& s : shapes) expect_matches_reference(dev, s, d, seed++);
}

// Few invocations, each looping over many updates (the shader's grid-stride loop on vulkan).
TEST(NativeOps, DeviceScatterAddLoopsPastItsGridOnVulkan) {
  NoValidationMessages check;
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no vulkan device";
  setenv("KILN_VULKAN_MAX_GROUPS", "3", 1);
  for (Dtype d : {uint8, bfloat16, int32, float32, int64})
    expect_matches_reference("vulkan", {1, 1000, 1, 30000, true}, d, 77);
  unsetenv("KILN_VULKAN_MAX_GROUPS");
}

// The output's last packed word (8- and 16-bit types) keeps the bytes past the output; the
// copy of the base stops at the output's end.
TEST(NativeOps, DeviceScatterAddLeavesTheBytesAfterItsOutput) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices())
    for (Dtype d : {bool_, uint8, float16, int32, float64}) {
      SCOPED_TRACE(std::string(d.name()) + " on " + dev);
      Shape4 s{1, 5, 1, 9, true};
      Bytes a = kdiff::sample(d, 5, 9), upd = kdiff::sample(d, 9, 10);
      std::vector<int64_t> iv = indices(s, 9);
      Bytes idx = kdiff::to_bytes(iv);
      Bytes got = run_scatter(backend_for(device(dev)), s, d, a, idx, upd, 3);
      Bytes want = run_scatter(kdiff::ref_backend(), s, d, a, idx, upd, 3);
      Bytes got_out(got.begin(), got.begin() + a.size()),
          want_out(want.begin(), want.begin() + a.size());
      EXPECT_EQ(compare_sums(got_out, want_out, d, reach(s, d, a, iv, upd)), "");
      for (size_t b = a.size(); b < got.size(); ++b) EXPECT_EQ(got[b], 0xab) << "byte " << b;
    }
}

// The output may be the base itself (a donated buffer): no copy onto itself, the same sums.
TEST(NativeOps, DeviceScatterAddInPlace) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices())
    for (Dtype d : {uint8, float16, int32, float32, int64}) {
      SCOPED_TRACE(std::string(d.name()) + " on " + dev);
      Shape4 s{2, 37, 3, 50, false};
      Bytes a = kdiff::sample(d, 2 * 37 * 3, 21), upd = kdiff::sample(d, 2 * 50 * 3, 22);
      std::vector<int64_t> iv = indices(s, 21);
      Bytes idx = kdiff::to_bytes(iv);
      Bytes want = run_scatter(kdiff::ref_backend(), s, d, a, idx, upd);
      Backend& be = backend_for(device(dev));
      auto A = be.allocate(0, a.size()), I = be.allocate(0, idx.size()),
           U = be.allocate(0, upd.size());
      A->write(a.data(), 0, a.size());
      I->write(idx.data(), 0, idx.size());
      U->write(upd.data(), 0, upd.size());
      NativeArgs args;
      args.op = Op::ScatterAdd;
      args.dtype = d;
      args.outer = s.outer, args.n = s.n, args.inner = s.inner, args.m = s.m;
      args.buffers = {A.get(), I.get(), U.get(), A.get()};
      auto q = be.create_queue(0);
      if (EventPtr ev = q->enqueue_native(args)) ev->wait();
      q->finish();
      Bytes got(a.size());
      A->read(got.data(), 0, got.size());
      EXPECT_EQ(compare_sums(got, want, d, reach(s, d, a, iv, upd)), "");
    }
}

// Sums of float32 denormals are exact in any order (they are fixed-point numbers), so the device
// matches the reference bit for bit: the add asks the driver to keep denormals (vulkan: the
// DenormPreserve execution mode) and NaN and infinities (SignedZeroInfNanPreserve) where it
// offers them (lavapipe keeps them without being asked). A driver that flushes them in its
// element-wise kernels (NVIDIA's Vulkan) may flush them here; NaN and infinities still hold.
TEST(NativeOps, DeviceScatterAddKeepsDenormalsAndNaN) {
  NoValidationMessages check;
  std::vector<float> base = {1e-40f, -1e-40f, 3e-39f, 0.0f, -0.0f, 1.0f, NAN};
  std::vector<float> upd = {1e-41f, 2e-40f, -5e-41f, 1e-45f, INFINITY, -INFINITY, 0.0f, 7e-39f};
  std::vector<int64_t> iv = {0, 1, 2, 3, 5, 5, 4, 2};
  Shape4 s{1, static_cast<int64_t>(base.size()), 1, static_cast<int64_t>(iv.size()), true};
  Bytes a = kdiff::to_bytes(base), u = kdiff::to_bytes(upd), idx = kdiff::to_bytes(iv);
  Bytes want = run_scatter(kdiff::ref_backend(), s, float32, a, idx, u);
  for (const char* dev : test::native_devices()) {
    SCOPED_TRACE(dev);
    Bytes got = run_scatter(backend_for(device(dev)), s, float32, a, idx, u);
    EXPECT_EQ(test::compare_as_device(got, want, float32, !test::keeps_float32_denormals(dev)), "");
  }
}

// An output (int64) and a 32-bit temporary (uint8) past maxStorageBufferRange (128 MiB on
// lavapipe) are reached by their device addresses.
TEST(NativeOps, DeviceScatterAddReachesBuffersPastTheBindingRangeOnVulkan) {
  NoValidationMessages check;
#ifndef KILN_HAVE_VULKAN_BACKEND
  GTEST_SKIP() << "no vulkan backend";
#else
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no vulkan device";
  const vulkan::PhysicalInfo& info = vulkan::physical_devices().at(0);
  // The sums are checked in int64 (uint8 wraps them to 8 bits).
  auto expect_sums = [&]<class T>(Dtype d, T, int64_t per) {
    SCOPED_TRACE(d.name());
    int64_t n = static_cast<int64_t>(info.max_storage_range) / per + 4096;
    std::vector<T> a(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) a[i] = static_cast<T>(i % 251);
    std::vector<int64_t> iv = {0, n - 1, -1, -2, n, n - 4000, 123456789 % n, -n, INT64_MIN, -1};
    std::vector<T> uv(iv.size());
    for (size_t j = 0; j < uv.size(); ++j) uv[j] = static_cast<T>(j * 3 + 1);
    Shape4 s{1, n, 1, static_cast<int64_t>(iv.size()), true};
    std::vector<T> got =
        kdiff::from_bytes<T>(run_scatter(backend_for(device("vulkan")), s, d, kdiff::to_bytes(a),
                                         kdiff::to_bytes(iv), kdiff::to_bytes(uv)));
    std::vector<T> want = a;
    for (size_t j = 0; j < iv.size(); ++j) want[native_index(iv[j], n)] += uv[j];
    EXPECT_TRUE(got == want);
  };
  if ((info.max_storage_range / 8 + 4096) * 8 > INT32_MAX)
    GTEST_SKIP() << "the binding range is past the backend's 2^31 bytes";
  expect_sums(int64, int64_t{0}, 8);  // the output and base: 8 bytes an element
  expect_sums(uint8, uint8_t{0}, 4);  // the 32-bit temporary: 4 bytes an element
#endif
}

// Buffers of another device raise, naming the scatter_add and the device.
TEST(NativeOps, DeviceScatterAddRaisesOnBuffersOfAnotherDevice) {
  NoValidationMessages check;
  for (const char* dev : test::native_devices()) {
    Backend& be = backend_for(device(dev));
    auto a = be.allocate(0, 16), upd = be.allocate(0, 8), out = be.allocate(0, 16);
    auto idx = kdiff::ref_backend().allocate(0, 16);
    NativeArgs args;
    args.op = Op::ScatterAdd;
    args.dtype = float32;
    args.n = 4, args.m = 2, args.shared_index = true;
    args.buffers = {a.get(), idx.get(), upd.get(), out.get()};
    auto q = be.create_queue(0);
    test::expect_error([&] { q->enqueue_native(args); }, {"scatter_add float32", dev});
  }
}

// scatter_add and scatter_add_along_axis on device streams reach the kernels and agree with
// cpu: integers exactly, float32 within the reassociation bound, into 100,000 rows.
TEST(NativeOps, DeviceScatterAddOpsMatchCpu) {
  NoValidationMessages check;
  std::mt19937_64 rng(3);
  std::uniform_int_distribution<int64_t> pick(-100003, 100003);
  std::vector<int64_t> iv(50000), jv(2 * 100000), uv(50000 * 2);
  std::vector<int32_t> tv(2 * 100000);
  for (int64_t& v : iv) v = pick(rng);
  for (int64_t& v : jv) v = pick(rng) % 3;
  for (int64_t& v : uv) v = pick(rng);
  for (int32_t& v : tv) v = static_cast<int32_t>(pick(rng));
  Array table = array(tv, {100000, 2});
  Array idx = array(iv, {50000});
  Array along = array(jv, {100000, 2});
  Array upd = astype(array(uv, {50000, 2}), int32);
  auto on = [&](const char* dev) {
    StreamScope scope(device(dev));
    Array t = scatter_add(table, idx, upd, 0);
    Array u = scatter_add_along_axis(table, along, table, 1);
    Array f = scatter_add(astype(table, float32), idx, astype(upd, float32), 0);
    eval({t, u, f});
    return std::make_tuple(t.to_vector<int32_t>(), u.to_vector<int32_t>(), f.to_vector<float>());
  };
  auto want = on("cpu");
  for (const char* dev : test::native_devices()) {
    SCOPED_TRACE(dev);
    auto got = on(dev);
    EXPECT_EQ(std::get<0>(got), std::get<0>(want));
    EXPECT_EQ(std::get<1>(got), std::get<1>(want));
    // The sums are of integers below 2^24 in magnitude except a few: float32 holds them exactly
    // whatever the order, but for the rounding of the largest.
    const auto &gf = std::get<2>(got), &wf = std::get<2>(want);
    ASSERT_EQ(gf.size(), wf.size());
    for (size_t e = 0; e < wf.size(); ++e)
      ASSERT_NEAR(gf[e], wf[e], 1e-6 * (1 + std::fabs(wf[e])) * 8) << "element " << e;
  }
}

}  // namespace kiln
