// The element conversions every part of Kiln shares (graph/float16.h, graph/element.h):
// float16 and bfloat16 rounding checked against an independent computation over a sweep of
// float32 bit patterns, every float16 bit pattern round-tripped, and the cast rules (saturation,
// wrapping, unsigned values) at their edges.
#include <bit>
#include <cmath>

#include "graph/element.h"
#include "test_util.h"

using namespace kiln;

namespace {

// Round-to-nearest-even of f to `digits` significand bits with the given smallest normal
// exponent and overflow threshold, computed with double arithmetic (not bit tricks).
double round_model(float f, int digits, int min_exp, double overflow) {
  double x = f;
  if (x == 0 || std::isinf(x)) return x;
  int e = std::max(static_cast<int>(std::floor(std::log2(std::fabs(x)))), min_exp);
  double ulp = std::ldexp(1.0, e - (digits - 1));
  double q = std::nearbyint(x / ulp) * ulp;  // the default rounding mode: ties to even
  if (std::fabs(q) >= overflow) return std::copysign(INFINITY, x);
  return q;
}

}  // namespace

TEST(Elements, Float16RoundsToNearestEven) {
  int checked = 0;
  for (uint64_t bits = 0; bits <= 0xffffffffULL; bits += 65521) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    float h = half_bits_to_float(float_to_half_bits(f));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(h));
      continue;
    }
    double want = round_model(f, 11, -14, 65536.0);
    ASSERT_EQ(static_cast<double>(h), want) << "float bits 0x" << std::hex << bits;
    ASSERT_EQ(std::signbit(h), std::signbit(f));
    ++checked;
  }
  EXPECT_GT(checked, 60000);
  // Edges: the largest value, the overflow tie, subnormals and their ties.
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65519.99f), 0x7bff);
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half_bits(0x1.0p-24f), 0x0001);
  EXPECT_EQ(float_to_half_bits(0x1.0p-25f), 0x0000);         // tie: to even (zero)
  EXPECT_EQ(float_to_half_bits(0x1.8p-24f), 0x0002);         // tie: to even (2)
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1.0p-11f), 0x3c00);  // tie: to even
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1.8p-10f), 0x3c02);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
}

TEST(Elements, EveryFloat16RoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = half_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7c00u, 0x7c00u);
      EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(f))));
      continue;
    }
    ASSERT_EQ(float_to_half_bits(f), h) << std::hex << h;
    ASSERT_EQ(float_to_half_bits(static_cast<float>(round_model(f, 11, -14, 65536.0))), h);
  }
}

TEST(Elements, BFloat16RoundsToNearestEven) {
  for (uint64_t bits = 0; bits <= 0xffffffffULL; bits += 65521) {
    float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    float b = bfloat16_bits_to_float(float_to_bfloat16_bits(f));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(b));
      continue;
    }
    ASSERT_EQ(static_cast<double>(b), round_model(f, 8, -126, 0x1.0p128))
        << "float bits 0x" << std::hex << bits;
  }
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 0x1.0p-8f), 0x3f80);  // tie: to even
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 0x1.8p-7f), 0x3f82);
  EXPECT_EQ(float_to_bfloat16_bits(3.4028235e38f), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(float_to_bfloat16_bits(std::bit_cast<float>(0x7f800001u)) & 0x7fc0, 0x7fc0);  // quiet
}

TEST(Elements, CastRules) {
  using scalar::cast;
  using scalar::Val;
  auto f = [](double v) { return Val{v, 0}; };
  auto i = [](int64_t v) { return Val{0, v}; };
  // float -> int: truncate, saturate, NaN -> 0, for each width and signedness.
  EXPECT_EQ(cast(f(300.7), float32, uint8).i, 255);
  EXPECT_EQ(cast(f(-3.9), float32, uint8).i, 0);
  EXPECT_EQ(cast(f(-300.0), float64, int8).i, -128);
  EXPECT_EQ(cast(f(-7.9), float64, int8).i, -7);
  EXPECT_EQ(cast(f(NAN), float16, uint32).i, 0);
  EXPECT_EQ(cast(f(1e30), float32, uint32).i, 4294967295);
  EXPECT_EQ(static_cast<uint64_t>(cast(f(1e30), float32, uint64).i), ~uint64_t{0});
  EXPECT_EQ(static_cast<uint64_t>(cast(f(0x1.8p63), float64, uint64).i), uint64_t{3} << 62);
  EXPECT_EQ(cast(f(-1e30), float64, int64).i, INT64_MIN);
  // int -> int wraps; uint64 keeps its bits.
  EXPECT_EQ(cast(i(300), int32, uint8).i, 44);
  EXPECT_EQ(cast(i(200), uint8, int8).i, -56);
  EXPECT_EQ(cast(i(-1), int8, uint32).i, 4294967295);
  EXPECT_EQ(cast(i(-1), int64, uint64).i, -1);
  EXPECT_EQ(cast(i(-56), int8, uint8).i, 200);
  // uint64 -> float reads the bits as unsigned; 16-bit floats round from float32.
  EXPECT_EQ(cast(i(-1), uint64, float64).f, 0x1.0p64);
  EXPECT_EQ(cast(i(2049), int32, float16).f, 2048.0);  // tie to even
  EXPECT_EQ(cast(i(70000), int32, float16).f, INFINITY);
  EXPECT_EQ(cast(i(257), uint32, bfloat16).f, 256.0);
  EXPECT_EQ(cast(f(0.1), float64, float16).f, static_cast<double>(round_to_half(0.1f)));
  EXPECT_EQ(cast(f(1.0 / 3), float16, bfloat16).f,
            static_cast<double>(round_to_bfloat16(1.0f / 3)));
  // x -> bool.
  EXPECT_EQ(cast(f(NAN), bfloat16, bool_).i, 1);
  EXPECT_EQ(cast(i(256), uint32, bool_).i, 1);
}
