// The narrow and unsigned integer types and the 16-bit floats through the public ops, on the
// default device and on reference: promotion, weak scalars, wrapping, saturating casts,
// float16/bfloat16 rounding at every op, reductions, matmul, random draws and .npy files.
#include <cmath>
#include <cstdint>
#include <fstream>

#include "graph/float16.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

std::vector<Device> test_devices() {
  std::vector<Device> out;
  for (const DeviceInfo& d : devices())
    if (d.available && (d.device.backend == "cpu" || d.device.backend == "reference"))
      out.push_back(d.device);
  return out;
}

std::string tmp(const std::string& name) { return std::string(KILN_TEST_DATA_DIR) + "/" + name; }

}  // namespace

TEST(Dtypes, PromotionThroughOps) {
  Array i8 = array<int8_t>({-3, 100}, {2}), u8 = array<uint8_t>({250, 7}, {2});
  EXPECT_EQ((i8 + u8).dtype(), int32);  // NumPy: int16, which Kiln lacks
  EXPECT_EQ((i8 + u8).to_vector<int32_t>(), (std::vector<int32_t>{247, 107}));
  Array h = array<float>({1, 2}, {2}, float16), b = array<float>({1, 2}, {2}, bfloat16);
  EXPECT_EQ((h + b).dtype(), float32);
  EXPECT_EQ((h * 2.0).dtype(), float16);  // weak scalars keep the 16-bit type
  EXPECT_EQ((b + 1).dtype(), bfloat16);
  EXPECT_EQ((i8 + h).dtype(), float16);
  EXPECT_EQ((array<uint32_t>({1}, {1}) + h).dtype(), float64);
  EXPECT_EQ((array<uint64_t>({1}, {1}) + array<int64_t>({1}, {1})).dtype(), float64);
  EXPECT_EQ(exp(u8).dtype(), float32);
  EXPECT_EQ(divide(i8, i8).dtype(), float32);
  EXPECT_EQ(exp(array<uint32_t>({1}, {1})).dtype(), float64);
  EXPECT_EQ(exp(h).dtype(), float16);
}

TEST(Dtypes, WeakIntScalarsMustFit) {
  Array u8 = array<uint8_t>({250, 7}, {2});
  expect_error([&] { (void)(u8 + 300); }, {"300", "uint8", "0 to 255", "astype"});
  expect_error([&] { (void)(u8 * -1); }, {"-1", "uint8"});
  expect_error([&] { (void)(array<int8_t>({1}, {1}) < 200); }, {"200", "int8", "-128 to 127"});
  expect_error([&] { (void)(array<int64_t>({1}, {1}) + ~uint64_t{0}); }, {"18446744073709551615"});
  EXPECT_EQ((u8 + 10).to_vector<int64_t>(), (std::vector<int64_t>{4, 17}));  // wraps
  EXPECT_EQ((u8 - 1).to_vector<int64_t>(), (std::vector<int64_t>{249, 6}));
  Array big = array<uint64_t>({~uint64_t{0} - 1}, {1});
  EXPECT_EQ((big + uint64_t{1}).item<uint64_t>(), ~uint64_t{0});  // every bit of the scalar
  EXPECT_EQ((array<int32_t>({1}, {1}) + int64_t{5}).dtype(), int32);
}

TEST(Dtypes, IntegersWrapCompareAndCast) {
  for (const Device& dev : test_devices()) {
    StreamScope scope(dev);
    Array a = array<uint8_t>({200, 3}, {2}), b = array<uint8_t>({100, 5}, {2});
    EXPECT_EQ((a + b).to_vector<int64_t>(), (std::vector<int64_t>{44, 8})) << dev;
    EXPECT_EQ((b - a).to_vector<int64_t>(), (std::vector<int64_t>{156, 2})) << dev;
    EXPECT_EQ(negative(b).to_vector<int64_t>(), (std::vector<int64_t>{156, 251})) << dev;
    EXPECT_EQ(abs(b).to_vector<int64_t>(), (std::vector<int64_t>{100, 5})) << dev;
    Array u32 = array<uint32_t>({4000000000u, 1}, {2});
    EXPECT_EQ((u32 > array<uint32_t>({1, 2}, {2})).to_vector<bool>(),
              (std::vector<bool>{true, false}))
        << dev;
    EXPECT_EQ(maximum(u32, array<uint32_t>({1, 2}, {2})).to_vector<int64_t>(),
              (std::vector<int64_t>{4000000000, 2}))
        << dev;
    Array u64 = array<uint64_t>({~uint64_t{0}, 5}, {2});
    EXPECT_EQ(argmax(u64).item<int64_t>(), 0) << dev;
    EXPECT_EQ(max(u64).item<uint64_t>(), ~uint64_t{0}) << dev;
    EXPECT_EQ(astype(u64, float64).to_vector<double>(), (std::vector<double>{0x1.0p64, 5}));
    Array f = array<float>({-1.5f, 300.7f, NAN, 1e30f}, {4});
    EXPECT_EQ(astype(f, uint8).to_vector<int64_t>(), (std::vector<int64_t>{0, 255, 0, 255}));
    EXPECT_EQ(astype(f, int8).to_vector<int64_t>(), (std::vector<int64_t>{-1, 127, 0, 127}));
    EXPECT_EQ(astype(f, uint64).to_vector<uint64_t>()[3], ~uint64_t{0});
    EXPECT_EQ(astype(array<int32_t>({-1, 300}, {2}), uint8).to_vector<int64_t>(),
              (std::vector<int64_t>{255, 44}))
        << dev;
    EXPECT_EQ(power(array<uint8_t>({3}, {1}), array<uint8_t>({5}, {1})).item<int64_t>(), 243 % 256)
        << dev;
  }
}

// float16/bfloat16 are computed in float32 and rounded where stored or cast: op by op (eager)
// every op rounds; a fused chain rounds once, at its store.
TEST(Dtypes, HalfFloatsRoundWhereStored) {
  auto h16 = [](double v) { return static_cast<double>(round_to_half(static_cast<float>(v))); };
  for (const Device& dev : test_devices()) {
    StreamScope scope(dev);
    Array h = array<float>({2048, 1, 65504}, {3}, float16);
    // 2048 + 1 is a tie in float16 (spacing 2 there): to even, 2048. 65504 * 2 overflows.
    EXPECT_EQ((h + 1.0).to_vector<float>(), (std::vector<float>{2048, 2, 65504})) << dev;
    EXPECT_TRUE(std::isinf((h * 2.0).to_vector<float>()[2])) << dev;
    Array one = array<float>({1}, {1}, float16);
    EXPECT_EQ((one / 3.0).item<double>(), 0.333251953125) << dev;
    // x * 3 - 0.3 with x = float16(0.1): eager rounds x * 3 to float16 (a tie, to even) before
    // subtracting; fused subtracts the exact float32 product and rounds once.
    double x = h16(0.1), c = h16(0.3);
    double eager = h16(h16(x * 3) - c), fused = h16(static_cast<float>(x * 3) - c);
    EXPECT_EQ(eager, -0x1.0p-12);
    EXPECT_EQ(fused, -0x1.0p-13);
    Array xa = array<double>({0.1}, {1}, float16);
    EXPECT_EQ((xa * 3.0 - 0.3).item<double>(), eager) << dev;
    auto f =
        compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 3.0 - 0.3}; });
    EXPECT_EQ(f({xa})[0].item<double>(), fused) << dev;
    // astype rounds inside a fused kernel too (a float16 -> float32 -> float16 round trip is
    // kept: it rounds), giving the eager value.
    auto g = compile([](const std::vector<Array>& in) {
      return std::vector<Array>{astype(astype(in[0] * 3.0, float32), float16) - 0.3};
    });
    EXPECT_EQ(g({xa})[0].item<double>(), eager) << dev;
    Array b = array<float>({256, 1}, {2}, bfloat16);
    EXPECT_EQ((b + 1.0).to_vector<float>(), (std::vector<float>{256, 2})) << dev;  // tie: even
    EXPECT_EQ(astype(array<double>({0.1}, {1}), bfloat16).item<double>(), 0.10009765625) << dev;
    EXPECT_EQ(astype(array<double>({0.1}, {1}), float16).item<double>(), 0.0999755859375) << dev;
    // exp in float16: the float32 result rounded (exp(1) = 2.71875 in float16).
    EXPECT_EQ(exp(one).item<double>(), 2.71875) << dev;
  }
}

TEST(Dtypes, ReductionsAccumulateWide) {
  for (const Device& dev : test_devices()) {
    StreamScope scope(dev);
    Array u8 = astype(full({1000}, 200.0, float32), uint8);
    EXPECT_EQ(sum(u8).dtype(), uint32);  // as MLX: bytes accumulate in 32 bits
    EXPECT_EQ(sum(u8).item<int64_t>(), 200000) << dev;
    EXPECT_EQ(sum(array<int8_t>({-100, -100}, {2})).item<int64_t>(), -200) << dev;
    EXPECT_EQ(sum(array<int8_t>({-100, -100}, {2})).dtype(), int32);
    EXPECT_EQ(mean(u8).dtype(), float32);
    EXPECT_EQ(mean(u8).item<double>(), 200) << dev;
    // float16: the sum (100000) would overflow float16, the mean does not.
    Array h = full({1000}, 100.0, float16);
    EXPECT_EQ(mean(h).dtype(), float16);
    EXPECT_EQ(mean(h).item<double>(), 100) << dev;
    EXPECT_TRUE(std::isinf(sum(h).item<double>())) << dev;
    // sum accumulates wider than float16: a float16 running sum of ones would stall at 2048.
    EXPECT_EQ(sum(full({4096}, 1.0, float16)).item<double>(), 4096) << dev;
    EXPECT_TRUE(std::isnan(max(array<float>({1, NAN, 3}, {3}, bfloat16)).item<double>())) << dev;
    Array m = matmul(full({3, 40}, 0.5, float16), full({40, 2}, 3.0, float16));
    EXPECT_EQ(m.dtype(), float16);
    EXPECT_EQ(m.to_vector<float>(), std::vector<float>(6, 60.0f)) << dev;
  }
}

TEST(Dtypes, RandomDrawsInHalfTypes) {
  auto k = random::key(5);
  for (Dtype d : {float16, bfloat16}) {
    std::vector<float> first;
    for (const Device& dev : test_devices()) {
      auto u = random::uniform({4096}, d, k, dev).to_vector<float>();
      double lo = 1, hi = 0, mean = 0;
      for (float v : u) lo = std::min<double>(lo, v), hi = std::max<double>(hi, v), mean += v;
      EXPECT_GE(lo, 0) << d;
      EXPECT_LT(hi, 1) << d;  // never rounded up to 1
      EXPECT_NEAR(mean / u.size(), 0.5, 0.02) << d;
      if (first.empty())
        first = u;
      else
        EXPECT_EQ(u, first) << d << " on " << dev;  // the same bits on every backend
      // float16 uniform = the float32 draw truncated to float16's 11 digits.
      auto u32 = random::uniform({4096}, float32, k, dev).to_vector<float>();
      int digits = d == float16 ? 11 : 8;
      for (size_t i = 0; i < u.size(); ++i)
        ASSERT_EQ(u[i], std::ldexp(std::floor(std::ldexp(u32[i], digits)), -digits)) << i;
    }
    auto z = random::normal({20000}, d, k).to_vector<float>();
    double m = 0, v = 0;
    for (float x : z) m += x;
    m /= z.size();
    for (float x : z) v += (x - m) * (x - m);
    EXPECT_NEAR(m, 0, 0.03) << d;
    EXPECT_NEAR(v / z.size(), 1, 0.05) << d;
  }
  expect_error([] { random::uniform({2}, uint8); }, {"uint8", "float16", "bfloat16"});
}

TEST(Dtypes, NpyRoundTripAndBfloat16AsMlxWritesIt) {
  for (Dtype d : kAllDtypes) {
    Array a = astype(array<double>({0, 1, -3, 2.5, 100}, {5}), d);
    save_npy(tmp("dt.npy"), a);
    Array b = load_npy(tmp("dt.npy"));
    EXPECT_EQ(b.dtype(), d);
    EXPECT_EQ(b.to_vector<double>(), a.to_vector<double>()) << d;
  }
  save_npy(tmp("bf.npy"), array<float>({1.5f, -2.25f, 3.0f}, {3}, bfloat16));
  std::ifstream in(tmp("bf.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("'descr': '<V2'"), std::string::npos);
  // The bytes MLX's mx.save writes for mx.array([1.5, -2.25], dtype=mx.bfloat16) (1-D arrays
  // say fortran_order True there).
  std::string mlx = std::string("\x93NUMPY\x01\x00<\x00", 10) +
                    "{'descr': '<V2', 'fortran_order': True, 'shape': (2, )}    \n" +
                    std::string("\xc0\x3f\x10\xc0", 4);
  std::ofstream(tmp("mlx_bf16.npy"), std::ios::binary) << mlx;
  Array m = load_npy(tmp("mlx_bf16.npy"));
  EXPECT_EQ(m.dtype(), bfloat16);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1.5f, -2.25f}));
  std::string f2 = std::string("\x93NUMPY\x01\x00\x3a\x00", 10) +
                   "{'descr': '<f2', 'fortran_order': False, 'shape': (1,), }\n" +
                   std::string("\x00\x3c", 2);  // 1.0 in float16
  std::ofstream(tmp("f2.npy"), std::ios::binary) << f2;
  EXPECT_EQ(load_npy(tmp("f2.npy")).item<double>(), 1.0);
}
