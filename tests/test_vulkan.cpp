// Tests of the vulkan backend on vulkan:0 (Mesa's lavapipe here): every op and dtype through the
// Backend interface against the reference interpreter, runtime dims and launch scalars, grids
// past 65535 workgroups, copies cpu <-> vulkan, concurrent lanes, and the errors (a missing
// device feature, a shader that fails to compile). The binary runs with
// KILN_VULKAN_VALIDATION=1 (tests/CMakeLists.txt): a validation-layer warning or error fails the
// test that caused it.
//
// Tolerances (GPU math, README "Vulkan backend"): element-wise arithmetic, casts, comparisons,
// max/min/argmax and integer work bitwise; float32 transcendental functions are the driver's
// (Vulkan allows a few ulp; lavapipe's exp/log are exp2/log2 based) within rtol 2e-6 + atol 2e-7
// (sin and cos: atol 1e-6, a GPU's hardware approximation),
// float16/bfloat16 within one ulp of their type; float64 ones are Kiln's own GLSL (glsl_prelude)
// within rtol 1e-13; float sums accumulate in their own type (not the reference's double).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "backends/scalar_ops.h"
#include "backends/split_reduce.h"
#include "backends/vulkan/descriptors.h"
#include "backends/vulkan/disk_cache.h"
#include "backends/vulkan/glsl_codegen.h"
#include "backends/vulkan/glsl_compiler.h"
#include "backends/vulkan/vk_context.h"
#include "backends/vulkan/vulkan_backend.h"
#include "device_lanes.h"
#include "device_native.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace kdiff;

class Vulkan : public ::testing::Test {
 protected:
  void SetUp() override { before_ = vulkan_validation_messages(); }
  void TearDown() override {
    EXPECT_EQ(vulkan_validation_messages(), before_)
        << "VK_LAYER_KHRONOS_validation reported problems (printed above)";
  }
  int64_t before_ = 0;
};

Backend& vk_backend() { return backend_for(device("vulkan")); }
// kdiff::sample without float32-range denormals (float32 and bfloat16, which computes in
// float32): lavapipe flushes them to zero (Vulkan leaves it to the driver), so results would
// differ from the reference for reasons outside Kiln.
Bytes sample(Dtype d, size_t n, uint64_t seed, bool wild = true) {
  Bytes b = kdiff::sample(d, n, seed, wild);
  if (d == float32 || d == bfloat16)
    for (size_t i = 0; i < n; ++i) {
      double v = get(b, d, i);
      if (v != 0 && std::fabs(v) < 0x1.0p-126)
        scalar::store(b.data(), d, static_cast<int64_t>(i), {std::copysign(0.0, v), 0});
    }
  return b;
}

void differential(const Kernel& k, const std::vector<Bytes>& init, const Tolerance& tol,
                  const std::string& what, const std::vector<int64_t>& params = {}) {
  differential_on(vk_backend(), k, init, tol, what, params);
}

Tolerance math_tolerance(Dtype d) {
  if (d == float64) return {Tolerance::Rel, 0, 1e-13, 1e-300};
  if (d.is_half()) return {Tolerance::Ulp, 1};
  return {Tolerance::Rel, 0, 2e-6, 2e-7};
}

TEST_F(Vulkan, DeviceIsListedAndSelectable) {
  bool found = false;
  for (const DeviceInfo& d : devices())
    if (d.device.backend == "vulkan" && d.device.index == 0) {
      found = true;
      ASSERT_TRUE(d.available) << d.reason;
      for (const char* part :
           {"driver", "heaps", "subgroup", "shaderFloat64", "shaderInt64", "maxStorageBufferRange"})
        EXPECT_NE(d.description.find(part), std::string::npos) << d.description;
    }
  EXPECT_TRUE(found);
  EXPECT_EQ(device("vulkan"), (Device{"vulkan", 0}));
  test::expect_error([] { device("vulkan:7"); }, {"vulkan:7", "usable devices"});
  EXPECT_FALSE(vk_backend().uses_host_memory());
  EXPECT_FALSE(vk_backend().create_queue(0)->runs_inline());
}

TEST_F(Vulkan, KilnDeviceEnvironmentSelectsVulkan) {
#ifdef KILN_CLI_PATH
  std::string cmd = std::string("KILN_DEVICE=vulkan ") + KILN_CLI_PATH + " devices";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("default: vulkan:0"), std::string::npos) << out;
#else
  GTEST_SKIP() << "the kiln command is not built";
#endif
}

TEST_F(Vulkan, EveryUnaryOpAndDtype) {
  const int64_t n = 203;
  for (int op = 0; op < kNumUnaryOps; ++op) {
    for (Dtype d : kAll) {
      auto u = static_cast<UnaryOp>(op);
      bool float_only = u != UnaryOp::Negative && u != UnaryOp::Abs && u != UnaryOp::LogicalNot &&
                        u != UnaryOp::Floor && u != UnaryOp::Ceil && u != UnaryOp::BitwiseInvert;
      if ((float_only && !d.is_float()) || !ir_defined(u, d)) continue;
      // ops never build these: logical_not casts to bool first, bools have no arithmetic
      if (d.is_bool() && u != UnaryOp::LogicalNot && u != UnaryOp::BitwiseInvert) continue;
      if (!d.is_bool() && u == UnaryOp::LogicalNot) continue;
      Dtype out = u == UnaryOp::LogicalNot ? bool_ : d;
      Kernel k = elementwise(
          {d},
          [&](std::vector<int> in) {
            Value v;
            v.kind = ValueKind::Unary, v.unary = u, v.dtype = out, v.a = in[0];
            return v;
          },
          n);
      Tolerance tol;
      if (approx_f32(u)) tol = math_tolerance(d);
      // NVIDIA's float32 sin and cos are its hardware approximations, ~3.6e-7 off in absolute
      // terms near their zeros (Vulkan bounds them only by 2^-11 in [-pi, pi]).
      if ((u == UnaryOp::Sin || u == UnaryOp::Cos) && d == float32) tol.atol = 1e-6;
      // sin/cos of huge arguments (1e30) are the driver's business on a GPU (Vulkan sets no
      // bound; Kiln's float64 ones reduce by Cody-Waite, exact below ~1e6): tame data for them.
      bool wild = u != UnaryOp::Sin && u != UnaryOp::Cos;
      differential(k, {sample(d, n, op * 7 + 1, wild), Bytes(n * out.size())}, tol,
                   std::string(op_name(u)) + " " + d.name());
    }
  }
}

TEST_F(Vulkan, EveryBinaryOpAndDtype) {
  const int64_t n = 211;
  for (int op = 0; op < kNumBinaryOps; ++op) {
    for (Dtype d : kAll) {
      auto bop = static_cast<BinaryOp>(op);
      if (!ir_defined(bop, d)) continue;
      Dtype out = is_comparison(bop) || is_logical(bop) ? bool_ : d;
      if (d.is_bool() && !is_comparison(bop) && !is_logical(bop) && !is_bitwise(bop))
        continue;  // no bool arithmetic
      Kernel k = elementwise(
          {d, d},
          [&](std::vector<int> in) {
            Value v;
            v.kind = ValueKind::Binary, v.binary = bop, v.dtype = out, v.a = in[0], v.b = in[1];
            return v;
          },
          n);
      Tolerance tol;
      if (bop == BinaryOp::Power && d.is_float()) tol = math_tolerance(d);
      bool wild = !(d == int64 && bop == BinaryOp::Divide);
      differential(
          k,
          {sample(d, n, op * 11 + 3, wild), sample(d, n, op * 13 + 5, wild), Bytes(n * out.size())},
          tol, std::string(op_name(bop)) + " " + d.name());
    }
  }
}

TEST_F(Vulkan, EveryCastAndSelect) {
  const int64_t n = 197;
  for (Dtype from : kAll)
    for (Dtype to : kAll) {
      Kernel k = elementwise(
          {from},
          [&](std::vector<int> in) {
            Value v;
            v.kind = ValueKind::Cast, v.dtype = to, v.a = in[0];
            return v;
          },
          n);
      differential(k, {sample(from, n, 17), Bytes(n * to.size())}, {},
                   std::string("cast ") + from.name() + " -> " + to.name());
    }
  for (Dtype d : kAll) {
    Kernel k = elementwise(
        {bool_, d, d},
        [&](std::vector<int> in) {
          Value v;
          v.kind = ValueKind::Select, v.dtype = d, v.a = in[0], v.b = in[1], v.c = in[2];
          return v;
        },
        n);
    differential(k, {sample(bool_, n, 1), sample(d, n, 2), sample(d, n, 3), Bytes(n * d.size())},
                 {}, std::string("select ") + d.name());
  }
}

TEST_F(Vulkan, RandomAndIndexValues) {
  for (Dtype d : {float32, float64, float16, bfloat16})
    for (RandomDist dist : {RandomDist::Uniform, RandomDist::Normal}) {
      Kernel k;
      k.name = "random";
      k.domain = {Dim::constant(37), Dim::constant(41)};
      Value idx;
      idx.kind = ValueKind::Index, idx.dtype = int64, idx.map = map_of({41, 1}, 5);
      Value r;
      r.kind = ValueKind::Random, r.dtype = d, r.dist = dist, r.key = 0x1234567 + d.size();
      r.a = add(k, idx);
      store(k, d, map_of({41, 1}), add(k, r));
      // Normal draws are computed in double (Kiln's GLSL log/cos), as the reference does.
      Tolerance tol;
      // float64: relative, with an absolute floor for draws near cos's zeros, where the GPU's
      // own rounding of Kiln's cos (NVIDIA fuses differently) is most of the value.
      if (dist == RandomDist::Normal)
        tol = d == float64 ? Tolerance{Tolerance::Rel, 0, 1e-13, 1e-15}
                           : Tolerance{Tolerance::Ulp, 1};
      differential(k, {Bytes(37 * 41 * d.size())}, tol, std::string("random ") + d.name());
    }
}

// Looser than kdiff::sum_rtol for float32: a device without shaderFloat64 accumulates float32
// sums in float32 (lavapipe accumulates in double, as the reference).
double vk_sum_rtol(Dtype d) { return d == float32 ? 1e-5 : sum_rtol(d); }

void every_reduction(const std::vector<std::pair<std::vector<int64_t>, std::vector<int>>>& walks);

// Twice: with subgroup operations (where the device has them) and with the shared-memory tree
// alone (KILN_VULKAN_SUBGROUPS=0), on different shapes so that each form compiles its own
// kernels.
TEST_F(Vulkan, EveryReductionAndDtype) {
  for (const char* subgroups : {"1", "0"}) {
    setenv("KILN_VULKAN_SUBGROUPS", subgroups, 1);
    int64_t m = subgroups[0] == '1' ? 0 : 1;
    every_reduction({{{7, 33 + m}, {1}},
                     {{7, 33 + m}, {0}},
                     {{5, 4, 9 + m}, {0, 2}},
                     {{1000 + m}, {0}},
                     {{3 + m, 0}, {1}}});
  }
  unsetenv("KILN_VULKAN_SUBGROUPS");
}

void every_reduction(const std::vector<std::pair<std::vector<int64_t>, std::vector<int>>>& walks) {
  const int ops = static_cast<int>(ReduceOp::Argmax) + 1;
  // Each case is a shader built cold on lavapipe: make test runs a random third of them.
  test::CaseSample runs = test::case_sample(ops * std::size(kAll) * walks.size(),
                                            ops * std::size(kAll) * walks.size() / 3);
  SCOPED_TRACE(runs.trace);
  size_t index = 0;
  for (int op = 0; op <= static_cast<int>(ReduceOp::Argmax); ++op)
    for (Dtype d : kAll)
      for (const auto& [shape, axes] : walks) {
        if (!runs(index++)) continue;
        auto rop = static_cast<ReduceOp>(op);
        if (d.is_bool() && rop != ReduceOp::Max && rop != ReduceOp::Min && rop != ReduceOp::Argmax)
          continue;
        Kernel k = reduce_kernel(d, rop, shape, axes);
        int64_t n = 1, outn = 1;
        for (int64_t e : shape) n *= e;
        for (int i = 0; i < k.kept_axes(); ++i) outn *= k.domain[i].value;
        Dtype od = k.body[k.reduce->value].dtype;
        Tolerance tol;
        bool fsum = d.is_float() && (rop == ReduceOp::Sum || rop == ReduceOp::Prod);
        if (fsum) tol = {Tolerance::Rel, 0, vk_sum_rtol(d), 1e-6};
        if (d.is_float() && (rop == ReduceOp::Max || rop == ReduceOp::Min))
          tol = {Tolerance::Value};
        differential(k, {sample(d, n, op + 100, !fsum), Bytes(outn * od.size())}, tol,
                     std::string(op_name(rop)) + " " + d.name());
      }
}

// Full reductions of >= 2^16 elements run as 64 partial reductions, a tail and a combine
// (split_reduce.h); the epilogue runs in the combine.
TEST_F(Vulkan, FullReductionsSplitAcrossWorkgroups) {
  const int64_t n = (int64_t{1} << 20) + 37;  // leaves a tail
  for (Dtype d : {float32, float64, float16, int32, int8, uint64})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Prod}) {
      if (d.is_float() && op == ReduceOp::Prod) continue;  // a product of 1M values is 0 or inf
      Kernel k = reduce_kernel(d, op, {n}, {0});
      bool fsum = d.is_float() && op == ReduceOp::Sum;
      Tolerance tol;
      if (fsum)
        tol = {Tolerance::Rel, 0, d == float64 ? 1e-12 : d == float16 ? 0x1.0p-10 : 1e-5, 1e-3};
      differential(k, {sample(d, n, 9, !fsum), Bytes(d.size())}, tol,
                   std::string("full ") + op_name(op) + " " + d.name());
    }
  // With an epilogue: mean-like scaling of the sum, cast to float64.
  Kernel k = reduce_kernel(float32, ReduceOp::Sum, {n}, {0});
  k.stores.clear();
  k.buffers.pop_back();
  Value c;
  c.kind = ValueKind::Constant, c.dtype = float32, c.constant = Scalar::of(0.25f);
  int cv = add(k, c);
  Value m;
  m.kind = ValueKind::Binary, m.binary = BinaryOp::Multiply, m.dtype = float32;
  m.a = k.reduce->value, m.b = cv;
  int mv = add(k, m);
  Value cast;
  cast.kind = ValueKind::Cast, cast.dtype = float64, cast.a = mv;
  store(k, float64, map_of({0}), add(k, cast));
  differential(k, {sample(float32, n, 10, false), Bytes(8)}, {Tolerance::Rel, 0, 1e-5, 1e-3},
               "full sum with epilogue");
}

// One kernel for every shape: runtime extents and strides, launch scalars of several dtypes,
// and a reduction with an epilogue that uses a launch scalar.
TEST_F(Vulkan, RuntimeDimsAndLaunchScalars) {
  Kernel k;
  k.name = "scaled_rowsum";
  k.domain = {Dim::runtime(0), Dim::runtime(1)};
  IndexMap in{{Dim::runtime(1), Dim::constant(1)}, Dim::constant(0)};
  int x = load(k, float32, in);
  Value c;
  c.kind = ValueKind::Constant, c.dtype = float32, c.param = 2;
  int cv = add(k, c);
  Value m;
  m.kind = ValueKind::Binary, m.binary = BinaryOp::Multiply, m.dtype = float32, m.a = x, m.b = cv;
  int mv = add(k, m);
  Value r;
  r.kind = ValueKind::Reduce, r.dtype = float32, r.a = mv;
  int rv = add(k, r);
  k.reduce = Reduction{ReduceOp::Sum, 1, rv};
  Value off;
  off.kind = ValueKind::Constant, off.dtype = float64, off.param = 3;
  int ov = add(k, off);
  Value cast;
  cast.kind = ValueKind::Cast, cast.dtype = float64, cast.a = rv;
  int cvv = add(k, cast);
  Value plus;
  plus.kind = ValueKind::Binary, plus.binary = BinaryOp::Add, plus.dtype = float64, plus.a = cvv,
  plus.b = ov;
  int pv = add(k, plus);
  store(k, float64, {{Dim::constant(1), Dim::constant(0)}, Dim::constant(0)}, pv);
  ASSERT_NO_THROW(k.validate());
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 5}, {17, 100}, {1, 1000}}) {
    std::vector<int64_t> params = {rows, cols, launch_word(Scalar::of(0.5)),
                                   launch_word(Scalar::of(-3.25))};
    differential(k, {sample(float32, rows * cols, rows, false), Bytes(rows * 8)},
                 {Tolerance::Rel, 0, 1e-6, 1e-6}, "rows " + std::to_string(rows), params);
  }
}

// x / c for a launch scalar c, float32 and float16: powers of two (either sign, both ends of
// the range whose reciprocal is a normal float, and just past them) take the GPU form's exact
// multiply by the reciprocal (KILN_VULKAN_DIVIDE_IN_DOUBLE=1, the VulkanGpuDivision ctest), other
// divisors (zero, infinities, NaN, denormals, neighbours of powers of two) its double division;
// every quotient as the reference rounds it. Dividends without denormals; float32 quotients in
// the denormal range only where the device keeps them (NVIDIA's driver flushes them in every
// float32 operation: x / 2^126 gave -0 for -6.2e-39 on an H100).
TEST_F(Vulkan, DivisionByAScalarMatchesReference) {
  const int64_t n = 257;
  const bool flushes = !test::keeps_float32_denormals("vulkan");
  const double divisors[] = {2.0,      0.5,      -4.0,     0x1p126, 0x1p-126,     0x1p127,
                             0x1p-127, 0x1p-149, 3.0,      -0.75,   1.0,          -1.0,
                             0.0,      -0.0,     INFINITY, NAN,     0x1.000002p1, 0x1.fffffep0};
  for (Dtype d : {float32, float16}) {
    Kernel k;
    k.name = "divide_by_scalar";
    k.domain = {Dim::constant(n)};
    int x = load(k, d, {{Dim::constant(1)}, Dim::constant(0)});
    Value c;
    c.kind = ValueKind::Constant, c.dtype = d, c.param = 0;
    int cv = add(k, c);
    Value q;
    q.kind = ValueKind::Binary, q.binary = BinaryOp::Divide, q.dtype = d, q.a = x, q.b = cv;
    store(k, d, {{Dim::constant(1)}, Dim::constant(0)}, add(k, q));
    ASSERT_NO_THROW(k.validate());
    for (double c : divisors) {
      if (d == float16 && (std::fabs(c) > 65504 || (c != 0 && std::fabs(c) < 0x1p-24))) continue;
      std::vector<Bytes> init = {sample(d, n, 7, true), Bytes(n * d.size())};
      std::vector<int64_t> params = {launch_word(Scalar::of(c))};
      Bytes got = kdiff::run(vk_backend(), k, init, params)[1];
      Bytes want = kdiff::run(kdiff::ref_backend(), k, init, params)[1];
      EXPECT_EQ(test::compare_as_device(got, want, d, flushes), "") << d.name() << " / " << c;
    }
  }
}

// llvmpipe ends every shader loop after 65535 iterations (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS),
// silently: before the split, a row sum of 5M ones on lavapipe gave 1048560 and a matmul with
// k = 70000 gave wrong sums. Long rows now split into parts (split_long_rows), long k runs in
// parts that accumulate, and a kernel that cannot be split (runtime extents) raises.
TEST_F(Vulkan, LongLoopsAreSplitBelowTheDriversLoopLimit) {
  Kernel rows = reduce_kernel(float32, ReduceOp::Sum, {3, 5'000'003}, {1});
  differential(rows, {sample(float32, 3 * 5'000'003, 21, false), Bytes(3 * 4)},
               {Tolerance::Rel, 0, 1e-5, 1e-3}, "3 rows of 5,000,003");
  Kernel maxes = reduce_kernel(int32, ReduceOp::Max, {2, 4'500'000}, {1});
  differential(maxes, {sample(int32, 2 * 4'500'000, 22), Bytes(2 * 4)}, {}, "row max of 4.5M");
  // k = 70001 in float32 with entries in {-1, 0, 1}: every sum exact.
  const int64_t m = 5, kk = 70'001, n = 8;
  std::vector<float> av(static_cast<size_t>(m * kk)), bv(static_cast<size_t>(kk * n));
  std::mt19937 rng(4);
  for (float& v : av) v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
  for (float& v : bv) v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
  Device vk = device("vulkan"), ref = device("reference");
  Array a = array(av, {m, kk}, ref), b = array(bv, {kk, n}, ref);
  Array want = matmul(a, b, ref);
  Array got = compute_on(vk, [](const Array& p, const Array& q) { return matmul(p, q); })(a, b);
  eval({want, got});
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>()) << "matmul with k = 70001";
  // A row of runtime length is one workgroup's loop: past the limit it raises.
  if (vulkan::physical_devices().at(0).loop_limit == 0) return;
  Kernel rt = reduce_kernel(float32, ReduceOp::Sum, {1, 16}, {1});
  rt.domain = {Dim::runtime(0), Dim::runtime(1)};
  rt.buffers[0].map = {{Dim::runtime(1), Dim::constant(1)}, Dim::constant(0)};
  Backend& be = vk_backend();
  auto ck = be.compile(0, rt);
  const int64_t len = 5'000'000;
  auto in = be.allocate(0, len * 4), out = be.allocate(0, 4);
  KernelArgs args;
  args.buffers = {in.get(), out.get()};
  args.params = {1, len};
  auto q = be.create_queue(0);
  test::expect_error([&] { q->enqueue_kernel(*ck, args); },
                     {"would loop", "65535", "run it on cpu"});
}

// 4,194,369 elements: 65,537 workgroups of 64, past lavapipe's 65,535 per dimension (with one
// group per 64 points, as on a GPU; on a CPU device Kiln launches at most 16384 groups that loop).
TEST_F(Vulkan, LaunchesBeyond65535GroupsFoldIntoAGrid) {
  setenv("KILN_VULKAN_MAX_GROUPS", "0", 1);
  const int64_t n = 65537 * 64 + 1;
  Kernel k = unary_kernel(int32, UnaryOp::Negative, n);
  std::vector<int32_t> data(n);
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<int32_t>(i);
  Bytes in(n * 4);
  std::memcpy(in.data(), data.data(), in.size());
  auto got = run(vk_backend(), k, {in, Bytes(n * 4)});
  std::vector<int32_t> out(n);
  std::memcpy(out.data(), got[1].data(), got[1].size());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], -static_cast<int32_t>(i)) << "element " << i;
  // And one workgroup per output row past the limit: a reduction with 70,000 kept points.
  Kernel r = reduce_kernel(int32, ReduceOp::Sum, {70000, 3}, {1});
  differential(r, {sample(int32, 210000, 5), Bytes(70000 * 4)}, {}, "70000 row sums");
  unsetenv("KILN_VULKAN_MAX_GROUPS");
  // And with few groups looping over every point (element-wise kernels only: reductions keep a
  // group per kept point, see VulkanQueue::grid).
  setenv("KILN_VULKAN_MAX_GROUPS", "7", 1);
  differential(r, {sample(int32, 210000, 6), Bytes(70000 * 4)}, {}, "70000 row sums");
  auto looped = run(vk_backend(), k, {in, Bytes(n * 4)});
  unsetenv("KILN_VULKAN_MAX_GROUPS");
  EXPECT_EQ(looped[1], got[1]);
}

// A launch's params are push constants where they fit, and its descriptor set, which then binds
// only the kernel's buffers, is cached per kernel and keyed by the buffers' allocation ids (never
// reused, unlike VkBuffer handles): launches on the same buffers hit, a buffer the pool hands
// back is the same allocation and hits too, and other live buffers miss, each set binding its
// own buffers.
TEST_F(Vulkan, DescriptorSetsAreCachedByBufferIdentity) {
  Backend& be = vk_backend();
  Kernel k = unary_kernel(float32, UnaryOp::Negative, 64);
  auto ck = be.compile(0, k);
  auto q = be.create_queue(0);
  auto run = [&](Buffer& in, Buffer& out, float v) {
    std::vector<float> x(64, v);
    in.write(x.data(), 0, 256);
    KernelArgs a;
    a.buffers = {&in, &out};
    if (EventPtr ev = q->enqueue_kernel(*ck, a)) ev->wait();
    out.read(x.data(), 0, 256);
    return x;
  };
  auto negated = [](float v) { return std::vector<float>(64, -v); };
  auto in = be.allocate(0, 256), out = be.allocate(0, 256);
  auto s0 = vulkan::DescriptorCache::stats();
  for (int i = 0; i < 40; ++i) ASSERT_EQ(run(*in, *out, i), negated(i));
  auto s1 = vulkan::DescriptorCache::stats();
  EXPECT_EQ(s1.misses - s0.misses, 1);
  EXPECT_EQ(s1.hits - s0.hits, 39);
  for (int i = 0; i < 10; ++i) {  // freed and allocated again: the same two allocations
    in.reset(), out.reset();
    in = be.allocate(0, 256), out = be.allocate(0, 256);
    ASSERT_EQ(run(*in, *out, 50 + i), negated(50 + i));
  }
  auto s2 = vulkan::DescriptorCache::stats();
  EXPECT_LE(s2.misses - s1.misses, 1);  // the pool may hand the pair back swapped: one new set
  // Forty live pairs, each launched twice: forty sets, the second round hitting the ones the
  // first wrote (a capacity of 16 keeps the last 16 pairs' sets only).
  std::vector<std::shared_ptr<Buffer>> live;
  for (int i = 0; i < 80; ++i) live.push_back(be.allocate(0, 256));
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 40; ++i)
      ASSERT_EQ(run(*live[2 * i], *live[2 * i + 1], 100 * round + i), negated(100 * round + i))
          << "pair " << i << " round " << round;
  auto s3 = vulkan::DescriptorCache::stats();
  EXPECT_EQ(s3.misses - s2.misses, 80);  // least recently used first: every pair missed again
  for (int i = 24; i < 40; ++i) ASSERT_EQ(run(*live[2 * i], *live[2 * i + 1], i), negated(i));
  auto s4 = vulkan::DescriptorCache::stats();
  EXPECT_EQ(s4.hits - s3.hits, 16);
  EXPECT_EQ(s4.misses - s3.misses, 0);
}

// Params that do not fit in push constants travel in a params buffer bound after the kernel's
// buffers (KILN_VULKAN_PUSH_CONSTANTS=0 forces that form): element-wise, row and split full
// reductions (with their scratch buffer), against the reference.
TEST_F(Vulkan, ParamsInABufferWhenPushConstantsDoNotFit) {
  setenv("KILN_VULKAN_PUSH_CONSTANTS", "0", 1);
  auto before = vulkan::DescriptorCache::stats();
  Kernel ew = elementwise(
      {float32, float32},
      [](std::vector<int> in) {
        Value v;
        v.kind = ValueKind::Binary, v.binary = BinaryOp::Subtract, v.dtype = float32;
        v.a = in[0], v.b = in[1];
        return v;
      },
      1005);
  differential(ew,
               {sample(float32, 1005, 3, false), sample(float32, 1005, 4, false), Bytes(1005 * 4)},
               {}, "x - y, params buffer");
  Kernel rows = reduce_kernel(float32, ReduceOp::Sum, {7, 35}, {1});
  differential(rows, {sample(float32, 7 * 35, 5, false), Bytes(7 * 4)},
               {Tolerance::Rel, 0, 1e-5, 1e-5}, "row sums, params buffer");
  Kernel full = reduce_kernel(float32, ReduceOp::Sum, {100003}, {0});
  differential(full, {sample(float32, 100003, 6, false), Bytes(4)}, {Tolerance::Rel, 0, 1e-5, 1e-4},
               "split sum, params buffer");
  unsetenv("KILN_VULKAN_PUSH_CONSTANTS");
  // Every launch above bound a params buffer: none went through the descriptor-set cache.
  auto after = vulkan::DescriptorCache::stats();
  EXPECT_EQ(after.hits + after.misses, before.hits + before.misses);
  // A row reduction whose kept extent is a runtime Dim is not split (its scratch size would
  // depend on the launch); only constant shapes are.
  Kernel fixed = reduce_kernel(float32, ReduceOp::Sum, {2, 3, 1 << 20}, {2});
  Kernel rt = fixed;
  rt.domain[1] = Dim::runtime(0);
  SplitOptions opt{64, 1 << 16, true};
  opt.max_part = 1 << 19;
  EXPECT_TRUE(split_long_rows(fixed, opt));
  EXPECT_FALSE(split_long_rows(rt, opt));
}

// Contiguous element-wise kernels step 8 points through u64vec4 accesses on a CPU device and 4
// through vec4 on a GPU (glsl_codegen.h): both forms, with a tail, against the reference.
// Contiguous element-wise kernels in every access form: 4 or 8 points a step, inputs read
// through storage buffers or texel buffers, steps grid-stride or in subgroup runs (three
// workgroups, so that runs loop); lengths with and without a tail, and the second input read
// from an offset of 16 elements (a multiple of either step).
TEST_F(Vulkan, VectorAccessInEveryForm) {
  for (const char* texel : {"0", "1"})
    for (const char* wide : {"0", "1"})
      for (const char* runs : {"0", "1"}) {
        setenv("KILN_VULKAN_TEXEL_LOADS", texel, 1);
        setenv("KILN_VULKAN_WIDE_ACCESS", wide, 1);
        setenv("KILN_VULKAN_SUBGROUP_RUNS", runs, 1);
        setenv("KILN_VULKAN_MAX_GROUPS", "3", 1);
        for (Dtype d : {float32, int32, uint32})
          for (int64_t n : {int64_t{8}, int64_t{1003}, int64_t{20011}}) {
            // n differs per form, so each form compiles its own kernel (the cache is per kernel).
            int64_t len = n + (wide[0] == '1' ? 16 : 0) + (texel[0] == '1' ? 32 : 0) +
                          (runs[0] == '1' ? 64 : 0);
            Kernel k = elementwise(
                {d, d},
                [d](std::vector<int> in) {
                  Value v;
                  v.kind = ValueKind::Binary, v.binary = BinaryOp::Subtract, v.dtype = d;
                  v.a = in[0], v.b = in[1];
                  return v;
                },
                len);
            k.buffers[1].map.offset = Dim::constant(16);
            if (texel[0] == '1') {  // the form asked for is the one generated
              vulkan::ShaderFeatures f;
              f.int64 = true, f.wide_access = wide[0] == '1', f.texel_loads = true;
              f.push_bytes = 128;
              vulkan::Shader sh = vulkan::generate_glsl(k, f);
              EXPECT_EQ(sh.texel, (std::vector<bool>{true, true, false}));
              EXPECT_NE(sh.glsl.find("texelFetch(b1, int(uint(4) + "), std::string::npos);
            }
            if (runs[0] == '1') {
              vulkan::ShaderFeatures f;
              f.int64 = true, f.wide_access = wide[0] == '1', f.subgroup_runs = true;
              f.subgroup_size = 8;
              vulkan::Shader sh = vulkan::generate_glsl(k, f);
              EXPECT_EQ(sh.max_groups, vulkan::kRunGroups);
              EXPECT_NE(sh.glsl.find("gl_SubgroupID"), std::string::npos);
            }
            differential(
                k, {sample(d, len, 3, false), sample(d, len + 16, 4, false), Bytes(len * 4)}, {},
                std::string("texel ") + texel + " wide " + wide + " " + d.name() + " n " +
                    std::to_string(len));
          }
      }
  unsetenv("KILN_VULKAN_WIDE_ACCESS");
  unsetenv("KILN_VULKAN_TEXEL_LOADS");
  unsetenv("KILN_VULKAN_SUBGROUP_RUNS");
  unsetenv("KILN_VULKAN_MAX_GROUPS");
}

kiln::Array gelu(const kiln::Array& x) {
  return x * (1.0f + kiln::erf(x / std::sqrt(2.0f))) / 2.0f;
}

// Arrays move between devices through plan copies (either direction); a compiled function runs
// on a vulkan stream with a host input.
TEST_F(Vulkan, CopiesBetweenCpuAndVulkanBothWays) {
  Device cpu = device("reference");
  for (const DeviceInfo& d : devices())
    if (d.device.backend == "cpu" && d.available) cpu = d.device;
  Device vk = device("vulkan");
  Array x = random::normal({64, 33}, float32, random::key(7), cpu);
  eval(x);
  // x lives on the host device: the plan copies it in, and the vulkan result back out.
  Array on_vk = compute_on(vk, gelu)(x);
  Array back = compute_on(cpu, [](const Array& a) { return a + 1.0f; })(on_vk);
  eval(back);
  EXPECT_EQ(on_vk.device(), vk);
  EXPECT_EQ(back.device(), cpu);
  std::vector<float> xs = x.to_vector<float>(), got = back.to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) {
    double want = xs[i] * (1 + std::erf(xs[i] / std::sqrt(2.0))) / 2 + 1;
    ASSERT_NEAR(got[i], want, 1e-5 * (1 + std::fabs(want))) << i;
  }
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{gelu(in[0])}; });
  std::vector<Array> y;
  {
    StreamScope scope(vk);
    y = f({x});
    eval(y);
  }
  EXPECT_EQ(y[0].device(), vk);
  std::vector<float> fy = y[0].to_vector<float>();
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_NEAR(fy[i], got[i] - 1.0f, 1e-5) << i;
}

// Two streams on vulkan:0, each driven by its own thread: their work interleaves on the
// device's queue, and each stream's results stay its own.
TEST_F(Vulkan, LanesRunConcurrently) {
  Device vk = device("vulkan");
  auto f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{sum(tanh(in[0]) * in[1], 1)}; });
  std::vector<std::thread> threads;
  std::vector<std::string> failures(2);
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      try {
        Stream s = new_stream(vk);
        StreamScope scope(s);
        for (int it = 0; it < 20; ++it) {
          float scale = static_cast<float>(t * 100 + it);
          Array a = full({16, 50}, 1.0f, float32, vk);
          Array b = full({16, 50}, scale, float32, vk);
          std::vector<Array> r = f({a, b});
          eval(r);
          float want = std::tanh(1.0f) * scale * 50;
          for (float v : r[0].to_vector<float>())
            if (std::fabs(v - want) > 1e-4 * (1 + std::fabs(want))) {
              failures[t] = "stream " + std::to_string(t) + " iteration " + std::to_string(it) +
                            ": got " + std::to_string(v) + ", want " + std::to_string(want);
              return;
            }
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures[0], "");
  EXPECT_EQ(failures[1], "");
}

// Two lanes ordered on the device (Queue::enqueue_wait: the consumer's submission waits on the
// producer lane's timeline value), no host wait in between: a ping-pong a -> b on lane 1,
// b -> a on lane 2, each step waiting for the other lane's last one (read after write, and
// write after read), 60 times; every element must have been incremented 120 times.
TEST_F(Vulkan, LanesOrderedOnTheDeviceByTimelineSemaphores) {
  Backend& be = vk_backend();
  const int64_t n = 1 << 20;
  auto ck = be.compile(0, plus_one(n));
  auto a = be.allocate(0, n * 4), b = be.allocate(0, n * 4);
  std::vector<float> init(n);
  for (int64_t i = 0; i < n; ++i) init[i] = static_cast<float>(i % 1000);
  a->write(init.data(), 0, n * 4);
  auto q1 = be.create_queue(0), q2 = be.create_queue(0);
  EventPtr last;
  for (int it = 0; it < 60; ++it) {
    for (int half = 0; half < 2; ++half) {
      Queue& q = half ? *q2 : *q1;
      if (last) {
        ASSERT_TRUE(q.enqueue_wait({last}));
      }
      KernelArgs args;
      args.buffers =
          half ? std::vector<Buffer*>{b.get(), a.get()} : std::vector<Buffer*>{a.get(), b.get()};
      last = q.enqueue_kernel(*ck, args);
      ASSERT_TRUE(last);
    }
  }
  last->wait();
  q1->finish();
  q2->finish();
  std::vector<float> got(n);
  a->read(got.data(), 0, n * 4);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], init[i] + 120.0f) << "element " << i;
}

// The wait is on the device: a consumer waiting on a value nobody has signalled yet does not
// run (on lavapipe, whose one queue runs submissions in order, the first test cannot tell), and
// runs once the host signals it. An event of another backend is not waited on (false).
TEST_F(Vulkan, EnqueueWaitHoldsTheConsumerOnTheDevice) {
  Backend& be = vk_backend();
  const int64_t n = 4096;
  auto ck = be.compile(0, plus_one(n));
  auto a = be.allocate(0, n * 4), b = be.allocate(0, n * 4);
  std::vector<float> init(n, 2.0f);
  a->write(init.data(), 0, n * 4);
  auto ctx = vulkan::context(0);
  VkSemaphore gate = ctx->new_timeline();
  auto producer = std::make_shared<vulkan::GpuEvent>();
  producer->set_timeline(ctx.get(), gate, 1, nullptr);
  auto q = be.create_queue(0);
  ASSERT_TRUE(q->enqueue_wait({producer}));
  KernelArgs args;
  args.buffers = {a.get(), b.get()};
  EventPtr consumer = q->enqueue_kernel(*ck, args);
  ASSERT_TRUE(consumer);
  // Shared with the callback: wait() may return before the completion thread has run the
  // callbacks (ASan saw one write to a stack flag after this test had returned).
  auto ran_early = std::make_shared<std::atomic<bool>>(false);
  consumer->on_complete([ran_early](std::exception_ptr) { *ran_early = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(ran_early->load()) << "the consumer ran before the value it waits for was signalled";
  VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, nullptr, gate, 1};
  ASSERT_EQ(vkSignalSemaphore(ctx->device(), &si), VK_SUCCESS);
  consumer->wait();
  q->finish();
  vkDestroySemaphore(ctx->device(), gate, nullptr);
  std::vector<float> got(n);
  b->read(got.data(), 0, n * 4);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], 3.0f) << "element " << i;
  // Not a GpuEvent of this device: the caller must wait on the host.
  struct HostEvent : Event {
    void on_complete(std::function<void(std::exception_ptr)> f) override { f(nullptr); }
    void wait() override {}
  };
  EXPECT_FALSE(q->enqueue_wait({std::make_shared<HostEvent>()}));
}

// A host-to-device transfer whose source a cpu task has not written yet (the executor enqueues
// it behind the task's signal) copies what the task wrote, not what was there at enqueue; a
// failed task fails the transfer and leaves the destination alone.
TEST_F(Vulkan, HostToDeviceCopyWaitsForItsSignal) {
  Backend& be = vk_backend();
  Backend& host = backend_for(device("cpu"));
  const int64_t n = 1 << 16;
  auto q = be.create_queue(0);
  ASSERT_TRUE(q->waits_on_device());
  for (bool fail : {false, true}) {
    auto src = host.allocate(0, n * 4);
    auto dst = be.allocate(0, n * 4);
    std::vector<float> before(n, 1.0f), after(n, 7.0f), old(n, -3.0f);
    src->write(before.data(), 0, n * 4);
    dst->write(old.data(), 0, n * 4);
    std::shared_ptr<Signal> sig = q->create_signal();
    ASSERT_TRUE(sig);
    ASSERT_TRUE(q->enqueue_wait({sig->event()}));
    EventPtr copy = q->enqueue_copy(*src, *dst, n * 4);
    ASSERT_TRUE(copy) << "the transfer ran at enqueue, before its producer";
    src->write(after.data(), 0, n * 4);  // the producer runs now
    sig->complete(fail ? std::make_exception_ptr(Error("the producer failed")) : nullptr);
    if (fail) {
      EXPECT_THROW(copy->wait(), Error);
    } else {
      copy->wait();
    }
    q->finish();
    std::vector<float> got(n);
    dst->read(got.data(), 0, n * 4);
    EXPECT_EQ(got, fail ? old : after);
  }
}

// The executor's device path on vulkan (tests/device_lanes.h): a cpu producer's output reaches
// vulkan work through a host-signaled timeline semaphore (with the deferral of
// HostToDeviceCopyWaitsForItsSignal off, this fails), and two vulkan lanes order on the device.
TEST_F(Vulkan, CpuProducersReachVulkanThroughSignals) {
  test::cpu_producer_feeds_device(device("vulkan"));
}

TEST_F(Vulkan, LanesOfOneDeviceOrderThroughDeviceEvents) {
  test::two_lanes_of_one_device(device("vulkan"));
}

TEST_F(Vulkan, MissingDeviceFeatureNamesIt) {
  Kernel k = unary_kernel(float64, UnaryOp::Exp, 8);
  vulkan::ShaderFeatures none{false, false, "vulkan:9 (a test device)"};
  test::expect_error([&] { vulkan::generate_glsl(k, none); },
                     {"shaderFloat64", "vulkan:9", "elementwise"});
  Kernel r = reduce_kernel(float32, ReduceOp::Argmax, {4, 5}, {1});
  test::expect_error([&] { vulkan::generate_glsl(r, none); }, {"shaderInt64", "kernel reduce"});
  // Without int64, 32-bit addressing still serves float32 work.
  Kernel f = unary_kernel(float32, UnaryOp::Sqrt, 8);
  vulkan::Shader sh = vulkan::generate_glsl(f, none);
  EXPECT_NE(sh.glsl.find("#define IDX int\n"), std::string::npos);
  EXPECT_FALSE(vulkan::compile_glsl(sh.glsl, "sqrt32").empty());
}

TEST_F(Vulkan, ShaderCompileFailureCarriesGlslangLog) {
  test::expect_error([] { vulkan::compile_glsl("#version 450\nvoid main() { nope(); }\n", "bad"); },
                     {"kernel bad failed to compile", "nope", "2: void main"});
}

// A kernel that fails to build fails the outputs depending on it, not its independent siblings
// (KILN_VULKAN_FAULT_KERNEL makes the backend emit broken GLSL for kernels so named).
TEST_F(Vulkan, CompileFailureFailsOnlyDependents) {
  setenv("KILN_VULKAN_FAULT_KERNEL", "k_erf_f(", 1);
  Device vk = device("vulkan");
  // A shape no other test compiled kernels for; random so that nothing folds to a constant.
  Array x = random::uniform({13}, float32, random::key(3), vk);
  eval(x);
  std::vector<float> xs = x.to_vector<float>();
  StreamScope scope(vk);
  Array good = exp(x);
  Array bad = erf(x);
  Array after = bad + 1.0f;
  std::string err;
  try {
    eval({good, after});
  } catch (const Error& e) {
    err = e.what();
  }
  unsetenv("KILN_VULKAN_FAULT_KERNEL");
  EXPECT_NE(err.find("failed to compile"), std::string::npos) << err;
  EXPECT_NE(err.find("KILN_VULKAN_FAULT_KERNEL"), std::string::npos) << err;
  eval(good);
  std::vector<float> g = good.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], std::exp(xs[i]), 1e-6);
  EXPECT_THROW(eval(after), Error);
}

// Tensors beyond maxStorageBufferRange (128 MiB on lavapipe) cannot be bound as one storage
// buffer: kernels using them run in a form that reaches every buffer through its device address
// (bufferDeviceAddress). 40M float32 elements (160 MiB): element-wise (vectorised, and strided),
// a full sum (split across workgroups), a copy on the device, and byte-packed stores (atomics
// through an address) reading a small window of a 128 MiB + 64 int8 buffer.
TEST_F(Vulkan, TensorsBeyondMaxStorageBufferRange) {
  const auto& info = vulkan::physical_devices().at(0);
  if (!info.device_address) GTEST_SKIP() << "vulkan:0 lacks bufferDeviceAddress";
  const int64_t n = 40'000'000;
  // A GPU's range is 4 GiB or more: a tensor past it is more than the reference interpreter
  // checks in a test's time.
  if (static_cast<uint64_t>(n * 4) <= info.max_storage_range)
    GTEST_SKIP() << "vulkan:0's maxStorageBufferRange is " << info.max_storage_range
                 << " bytes: 160 MiB is within it";
  Bytes x(n * 4);
  {
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> u(-4, 4);
    for (int64_t i = 0; i < n; ++i) {
      float f = std::round(u(rng) * 64) / 64;
      std::memcpy(x.data() + i * 4, &f, 4);
    }
  }
  // x + x (exact), contiguous: 4-vector access by address.
  Kernel ew = elementwise(
      {float32},
      [](std::vector<int> in) {
        Value v;
        v.kind = ValueKind::Binary, v.binary = BinaryOp::Add, v.dtype = float32;
        v.a = v.b = in[0];
        return v;  // x + x
      },
      n);
  differential(ew, {x, Bytes(n * 4)}, {}, "x + x over 160 MiB");
  // Reversed: the scalar path, reading the last element first.
  Kernel rev = ew;
  rev.buffers[0].map = map_of({-1}, n - 1);
  differential(rev, {x, Bytes(n * 4)}, {}, "reversed x + x over 160 MiB");
  // A full sum: part/combine stages with a scratch buffer, all by address.
  Kernel sum = reduce_kernel(float32, ReduceOp::Sum, {n}, {0});
  differential(sum, {x, Bytes(4)}, {Tolerance::Rel, 0, 1e-5, 1e-3}, "sum over 160 MiB");
  // A copy between two buffers of the device.
  Backend& be = vk_backend();
  auto a = be.allocate(0, x.size()), b = be.allocate(0, x.size());
  a->write(x.data(), 0, x.size());
  auto q = be.create_queue(0);
  if (EventPtr ev = q->enqueue_copy(*a, *b, x.size())) ev->wait();
  Bytes back(x.size());
  b->read(back.data(), 0, back.size());
  EXPECT_TRUE(back == x) << "device copy of 160 MiB differs";
  // int8 (packed in words, stored with atomics): 16 elements at the far end of a buffer past
  // the limit.
  Kernel neg = unary_kernel(int8, UnaryOp::Negative, 16);
  const size_t big = (size_t{128} << 20) + 64;
  neg.buffers[0].map = map_of({1}, static_cast<int64_t>(big - 16));
  Bytes bytes(big);
  for (size_t i = 0; i < 16; ++i) bytes[big - 16 + i] = static_cast<uint8_t>(i * 7 + 1);
  differential(neg, {bytes, Bytes(16)}, {}, "int8 window of 128 MiB + 64");
  // A matmul whose A is 160 MiB: its operands are reached by address. Entries in {-1, 0, 1}
  // keep every sum exact in float32.
  const int64_t m = 40, kk = 1'000'000;
  std::vector<float> av(static_cast<size_t>(m * kk)), bv(static_cast<size_t>(kk * 4));
  std::mt19937 rng(3);
  for (float& v : av) v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
  for (float& v : bv) v = static_cast<float>(static_cast<int>(rng() % 3) - 1);
  Device vk = device("vulkan"), ref = device("reference");
  Array am = array(av, {m, kk}, ref), bm = array(bv, {kk, 4}, ref);
  Array want = matmul(am, bm, ref);
  Array got = compute_on(vk, [](const Array& p, const Array& q) { return matmul(p, q); })(am, bm);
  eval({want, got});
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>()) << "matmul of a 160 MiB operand";
}

// On a device without bufferDeviceAddress (emulated: KILN_VULKAN_DEVICE_ADDRESS=0 before the
// device is set up, so this test needs its own process, as ctest runs it) a kernel binding a
// buffer past maxStorageBufferRange raises kiln::Error naming both.
TEST_F(Vulkan, TensorsBeyondTheRangeWithoutDeviceAddressesRaise) {
  setenv("KILN_VULKAN_DEVICE_ADDRESS", "0", 1);
  bool emulated = !vulkan::context(0)->info().device_address;
  unsetenv("KILN_VULKAN_DEVICE_ADDRESS");
  if (!emulated) GTEST_SKIP() << "vulkan:0 was set up before this test; run it alone (ctest does)";
  Kernel k = unary_kernel(int8, UnaryOp::Negative, 16);
  Backend& be = vk_backend();
  auto ck = be.compile(0, k);
  const size_t past = vulkan::context(0)->info().max_storage_range + 64;  // never written
  auto big = be.allocate(0, past);
  auto out = be.allocate(0, 16);
  KernelArgs args;
  args.buffers = {big.get(), out.get()};
  auto q = be.create_queue(0);
  // Past 4 GiB (a GPU's range is 4 GiB - 1) the kernels' 32-bit addressing is the limit met.
  std::vector<std::string> want = {std::to_string(past) + " bytes"};
  if (past > 0xffffffffu)
    want.push_back("32-bit addressing");
  else
    want.insert(want.end(), {"maxStorageBufferRange", "bufferDeviceAddress"});
  test::expect_error([&] { q->enqueue_kernel(*ck, args); }, want);
}

// SPIR-V is cached on disk per kernel: a second compile of the same GLSL is a hit, and a damaged
// entry (here: a flipped byte, then a truncated file) is rejected, rebuilt and rewritten.
TEST_F(Vulkan, DiskCacheRebuildsCorruptEntries) {
  std::string dir =
      (std::filesystem::temp_directory_path() / ("kiln_vk_cache_" + std::to_string(::getpid())))
          .string();
  std::string old = std::getenv("KILN_CACHE_DIR") ? std::getenv("KILN_CACHE_DIR") : "";
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  const std::string glsl = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n";
  auto s0 = vulkan::spirv_cache_stats();
  std::vector<uint32_t> first = vulkan::cached_spirv(42, glsl, "empty");
  std::vector<uint32_t> again = vulkan::cached_spirv(42, glsl, "empty");
  auto s1 = vulkan::spirv_cache_stats();
  EXPECT_EQ(first, again);
  EXPECT_EQ(s1.misses - s0.misses, 1);
  EXPECT_EQ(s1.hits - s0.hits, 1);
  std::string path = vulkan::spirv_path(42, glsl);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  auto damage = [&](bool truncate) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    if (truncate) {
      f.close();
      std::filesystem::resize_file(path, 20);
      return;
    }
    f.seekp(-3, std::ios::end);
    f.put('\x5a');
  };
  for (bool truncate : {false, true}) {
    damage(truncate);
    auto before = vulkan::spirv_cache_stats();
    EXPECT_EQ(vulkan::cached_spirv(42, glsl, "empty"), first);
    auto after = vulkan::spirv_cache_stats();
    EXPECT_EQ(after.rejected - before.rejected, 1);
    EXPECT_EQ(vulkan::cached_spirv(42, glsl, "empty"), first);  // rewritten: a hit again
    EXPECT_EQ(vulkan::spirv_cache_stats().hits - after.hits, 1);
  }
  // Another GLSL under the same kernel hash is another entry, never this one's code.
  EXPECT_NE(vulkan::spirv_path(42, glsl + "// changed\n"), path);
  if (old.empty())
    unsetenv("KILN_CACHE_DIR");
  else
    setenv("KILN_CACHE_DIR", old.c_str(), 1);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Buffers the host cannot map (a discrete GPU's device-local memory) are read and written
// through staging buffers and vkCmdCopyBuffer. KILN_VULKAN_STAGING=1 forces that path on
// lavapipe; it applies to a context created after it is set, so this test runs in a process of
// its own (as ctest runs every test).
TEST_F(Vulkan, StagedTransfersWhenMemoryIsNotMapped) {
  setenv("KILN_VULKAN_STAGING", "1", 1);
  if (!vulkan::context(0)->staged())
    GTEST_SKIP() << "vulkan:0 was set up before this test; run it alone (ctest does)";
  Kernel k = elementwise(
      {float32, int8},
      [](std::vector<int> in) {
        Value v;
        v.kind = ValueKind::Binary, v.binary = BinaryOp::Less, v.dtype = bool_, v.a = in[0];
        v.b = in[0];
        return v;
      },
      1001);
  differential(k, {sample(float32, 1001, 1), sample(int8, 1001, 2), Bytes(1001)}, {}, "staged");
  Device vk = device("vulkan"), ref = device("reference");
  Array x = random::normal({257, 31}, float32, random::key(5), ref);
  Array want = sum(tanh(x) * 2.0f, 1, false, ref);
  Array got = compute_on(vk, [](const Array& a) { return sum(tanh(a) * 2.0f, 1); })(x);
  Array m = compute_on(vk, [](const Array& a) { return matmul(a, transpose(a)); })(x);
  Array mw = matmul(x, transpose(x, ref), ref);
  eval({want, got, m, mw});
  EXPECT_EQ(got.device(), vk);
  auto g = got.to_vector<float>(), w = want.to_vector<float>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-4 * (1 + std::fabs(w[i])));
  auto gm = m.to_vector<float>(), wm = mw.to_vector<float>();
  for (size_t i = 0; i < gm.size(); ++i) ASSERT_NEAR(gm[i], wm[i], 1e-4 * (1 + std::fabs(wm[i])));
  unsetenv("KILN_VULKAN_STAGING");
}

// The matmul shaders against the reference, with ragged tiles and broadcast batches: on lavapipe
// the register-blocked form, with 4-vectors of B and C where n is a multiple of 4 (width 4) and
// scalars elsewhere, rows past m in the last block.
TEST_F(Vulkan, MatmulMatchesReference) {
  Device vk = device("vulkan"), ref = device("reference");
  struct Case {
    Shape a, b;
    Dtype d;
  };
  for (const Case& c :
       {Case{{1, 1}, {1, 1}, float32}, Case{{37, 19}, {19, 45}, float32},
        Case{{3, 33, 70}, {70, 17}, float32}, Case{{2, 1, 5, 8}, {3, 8, 4}, float64},
        Case{{64, 64}, {64, 64}, float64}, Case{{130, 24}, {24, 260}, float32},
        Case{{2, 3, 7, 9}, {9, 12}, float32}, Case{{3, 2}, {2, 2}, float32}}) {
    Array a = random::normal(c.a, c.d, random::key(1), ref);
    Array b = random::normal(c.b, c.d, random::key(2), ref);
    Array want = matmul(a, b, ref);
    Array got = compute_on(vk, [](const Array& x, const Array& y) { return matmul(x, y); })(a, b);
    eval({want, got});
    ASSERT_EQ(got.device(), vk);
    ASSERT_EQ(got.shape(), want.shape());
    auto g = got.to_vector<double>(), w = want.to_vector<double>();
    double k = static_cast<double>(c.a.back());
    double tol = (c.d == float64 ? 1e-13 : 2e-6) * std::sqrt(k);
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_NEAR(g[i], w[i], tol * (1 + std::fabs(w[i])))
          << to_string(c.a) << " @ " << to_string(c.b) << " element " << i;
  }
  Array ia = full({4, 4}, 2.0, int32, ref);
  test::expect_error(
      [&] {
        Array r = compute_on(vk, [](const Array& x) { return matmul(x, x); })(ia);
        eval(r);
      },
      {"matmul of int32", "float32"});
}

}  // namespace
}  // namespace kiln
