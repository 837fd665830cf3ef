// Values are launch arguments, not code: scalars, fills, arange bounds, folded constants and
// random keys reach kernels as launch params, so a new value reuses the compiled kernel. These
// tests count the cpu JIT's compilations (not time) and compare every result with the
// reference interpreter.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/cpu/jit.h"
#include "backends/extension.h"
#include "graph/array_node.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

const std::string g_cache_dir = [] {
  std::string d =
      (std::filesystem::temp_directory_path() / ("kiln_values_test_" + std::to_string(::getpid())))
          .string();
  setenv("KILN_CACHE_DIR", d.c_str(), 1);
  return d;
}();
struct RemoveCacheAtExit {
  ~RemoveCacheAtExit() {
    std::error_code ec;
    std::filesystem::remove_all(g_cache_dir, ec);
  }
} g_remove_cache_at_exit;

int64_t compiles() { return cpu::Jit::instance().stats().compiled; }

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rtol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j)
    ASSERT_NEAR(got[j], want[j], rtol * std::abs(want[j]) + 1e-6f) << "element " << j;
}

// Runs `make(i)` for 40 distinct values on cpu; checks each against the same expression on
// reference (bitwise unless `rtol` is given) and returns how many kernels the JIT compiled
// after the first value.
template <typename F>
int64_t compiles_after_first(F make, float rtol = 0) {
  Device cpu = device("cpu"), ref = device("reference");
  int64_t before = 0;
  for (int i = 0; i < 40; ++i) {
    std::vector<float> got = make(i, cpu).template to_vector<float>();
    std::vector<float> want = make(i, ref).template to_vector<float>();
    if (rtol == 0)
      EXPECT_EQ(got, want) << "value " << i;
    else
      expect_close(got, want, rtol);
    if (i == 0) before = compiles();
  }
  return compiles() - before;
}

TEST(Values, EagerScalarOperandsReuseOneKernel) {
  Array x = arange(0, 4096, 1, float32);
  eval(x);
  int64_t n = compiles_after_first([&](int i, Device d) { return x * (0.5f + i); });
  EXPECT_EQ(n, 0);
}

// A C++ scalar operand repeated in an eager loop is one constant node on a thread, not one per
// op; another value, dtype or stream is another constant, and every result is right.
TEST(Values, RepeatedScalarOperandsShareOneConstant) {
  Array x = arange(0, 8, 1, float32), y = arange(8, 16, 1, float32);
  auto constant = [](const Array& a) { return a.node()->inputs.at(1).node(); };
  Array a = x + 1.0f, b = y + 1.0f, c = y + 2.0f, d = arange(0, 8, 1, int32) + 1;
  EXPECT_EQ(constant(a), constant(b));
  EXPECT_NE(constant(b), constant(c));
  EXPECT_NE(constant(c), constant(d));  // int32 1, not float32 2
  Array e = x + 0.0f, f = x - 0.0f, g = x + (-0.0f);
  EXPECT_NE(constant(e), constant(g));  // -0 and +0 differ in their bits
  Array h = [&] {
    StreamScope scope(new_stream(device("cpu")));
    return x + 2.0f;
  }();
  EXPECT_NE(constant(c), constant(h));
  Array z = zeros({}, float32);
  for (int i = 0; i < 100; ++i) z = z + 1.0f;
  EXPECT_EQ(z.item<float>(), 100.0f);
  EXPECT_EQ(b.to_vector<float>()[7], 16.0f);
  EXPECT_EQ(c.to_vector<float>()[0], 10.0f);
  EXPECT_EQ(d.to_vector<int32_t>()[3], 4);
  EXPECT_EQ(h.to_vector<float>()[1], 3.0f);
  EXPECT_EQ(f.to_vector<float>()[2], 2.0f);
}

TEST(Values, FullFillValuesReuseOneKernel) {
  int64_t n =
      compiles_after_first([](int i, Device d) { return full({777}, 1.25 * i, float32, d); });
  EXPECT_EQ(n, 0);
}

TEST(Values, ArangeBoundsReuseOneKernel) {
  // Start and step change every call; the length (a shape, so part of the kernel) does not.
  int64_t n = compiles_after_first([](int i, Device d) {
    int64_t step = 1 + i % 3;
    return astype(arange(i, i + 1500 * step, step, int64, d), float32);
  });
  EXPECT_EQ(n, 0);
}

TEST(Values, RandomKeysReuseOneKernelAndKeepTheirBits) {
  // float32 normals go through the cpu's vector log/cos (<= 2 ulp each, vector_math.h).
  int64_t n = compiles_after_first(
      [](int i, Device d) { return random::normal({1024}, float32, random::key(i), d); }, 2e-6f);
  EXPECT_EQ(n, 0);
  // The default (no key) draws a new key each call: still no new kernel.
  random::normal({1024}).to_vector<float>();
  int64_t before = compiles();
  for (int i = 0; i < 20; ++i) random::normal({1024}).to_vector<float>();
  EXPECT_EQ(compiles(), before);
}

TEST(Values, RandomBitsMatchTheReferenceForEveryKey) {
  for (uint64_t k : {0ULL, 1ULL, 0x8000000000000000ULL, ~0ULL}) {
    for (Dtype dt : {float32, float64}) {
      Array a = random::uniform({333}, dt, k, device("cpu"));
      Array b = random::uniform({333}, dt, k, device("reference"));
      EXPECT_EQ(a.to_vector<double>(), b.to_vector<double>()) << "key " << k;
    }
  }
}

TEST(Values, NewClosuresCapturingNewScalarsReuseOneKernel) {
  Array x = random::uniform({2048}, float32, random::key(3));
  eval(x);
  auto make = [](float s) {
    return compile(
        [s](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0] * s) + s}; });
  };
  std::vector<float> first = make(0.25f)({x})[0].to_vector<float>();
  int64_t before = compiles();
  for (int i = 1; i < 30; ++i) {
    float s = 0.25f + 0.01f * i;
    std::vector<float> got = make(s)({x})[0].to_vector<float>();
    std::vector<float> want;
    {
      PlacementScope on_ref(device("reference"));
      want = (exp(x * s) + s).to_vector<float>();
    }
    expect_close(got, want, 2e-6f);
  }
  EXPECT_EQ(compiles(), before);
}

TEST(Values, ScalarInputsToACompiledFunctionNeverRetrace) {
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * in[1]}; });
  Array x = ones({100});
  f({x, array(1.0f)});
  int64_t before = compiles();
  for (int i = 2; i < 30; ++i)
    EXPECT_EQ(f({x, array(float(i))})[0].to_vector<float>()[7], float(i));
  EXPECT_EQ(f.cache_size(), 1u);
  EXPECT_EQ(compiles(), before);
}

// Kernel IR level: the hash covers structure, not the values of launch scalars.
Kernel scale_kernel(int32_t param, double immediate) {
  Kernel k;
  k.name = "scale";
  k.domain = {Dim::constant(8)};
  k.buffers = {{float32, false, {{Dim::constant(1)}, Dim::constant(0)}},
               {float32, true, {{Dim::constant(1)}, Dim::constant(0)}}};
  Value load;
  load.kind = ValueKind::Load, load.dtype = float32, load.buffer = 0;
  Value c;
  c.kind = ValueKind::Constant, c.dtype = float32, c.param = param;
  c.constant = Scalar::of(immediate).cast(float32);
  Value mul;
  mul.kind = ValueKind::Binary, mul.binary = BinaryOp::Power, mul.dtype = float32, mul.a = 0,
  mul.b = 1;
  k.body = {load, c, mul};
  k.stores = {{1, 2}};
  return k;
}

TEST(Values, KernelHashCoversStructureNotLaunchValues) {
  EXPECT_EQ(scale_kernel(0, 2.0).hash(), scale_kernel(0, 3.0).hash());
  EXPECT_NE(scale_kernel(-1, 2.0).hash(), scale_kernel(-1, 3.0).hash());
  EXPECT_NE(scale_kernel(0, 2.0).hash(), scale_kernel(-1, 2.0).hash());
  EXPECT_EQ(scale_kernel(0, 1.0).num_params(), 1);
  EXPECT_EQ(scale_kernel(-1, 1.0).num_params(), 0);
  EXPECT_EQ(launch_word(scalar_from_word(launch_word(Scalar::of(-2.5)), float64)),
            launch_word(Scalar::of(-2.5)));
}

TEST(Values, PowerOfTwoIsSpecialisedAndExact) {
  Array x = random::normal({1000}, float32, random::key(9)) * 40.0f;
  eval(x);
  for (double e : {2.0, 3.0, 0.5}) {
    Array base = e == 0.5 ? abs(x) : x;
    std::vector<float> got = power(base, array(float(e))).to_vector<float>();
    std::vector<float> want;
    {
      PlacementScope on_ref(device("reference"));
      want = power(base, array(float(e))).to_vector<float>();
    }
    for (size_t i = 0; i < got.size(); ++i) {
      if (e == 2.0)
        EXPECT_EQ(got[i], want[i]);  // x*x is exactly what std::pow(x, 2) rounds to
      else
        EXPECT_NEAR(got[i], want[i], 4e-7 * std::abs(want[i]) + 1e-30);
    }
  }
  // Exponents other than 2 share one kernel; 2 has its own.
  int64_t before = compiles();
  for (float e : {1.5f, 2.5f, 4.0f, -1.0f}) eval(power(abs(x), array(e)));
  EXPECT_LE(compiles() - before, 1);
}

TEST(Values, LaunchScalarsKeepIntegersExact) {
  Array x = array(std::vector<int64_t>{1, 2, 3}, {3});
  std::vector<int64_t> got = (x + array(int64_t(9007199254740993))).to_vector<int64_t>();
  EXPECT_EQ(got[0], 9007199254740994);
  EXPECT_EQ(full({2}, Scalar::of(int64_t(-9007199254740993))).to_vector<int64_t>()[1],
            -9007199254740993);
}

double rss_mb() { return test::memory_in_use_bytes() / 1048576.0; }

// No code per value means no memory per value: 3,000 eager ops with distinct scalars (and draws
// with distinct keys) leave RSS where it was (bench_values runs 10,000).
TEST(Values, DistinctScalarsDoNotGrowMemory) {
  Array x = random::uniform({4096}, float32, random::key(4));
  eval(x);
  for (int i = 0; i < 300; ++i) eval({x * (1.0f + i), random::normal({256})});  // warm up
  double before = rss_mb();
  int64_t compiled = compiles();
  for (int i = 0; i < 3000; ++i) eval({x * (2.0f + 1e-3f * i), random::normal({256})});
  EXPECT_LT(rss_mb() - before, 8.0);
  EXPECT_EQ(compiles(), compiled);
}

}  // namespace
}  // namespace kiln
