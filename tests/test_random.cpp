#include <cmath>

#include "test_util.h"

using namespace kiln;

TEST(Random, SameKeySameBitsDifferentKeyDifferentBits) {
  auto k = random::key(7);
  auto a = random::uniform({1000}, float32, k).to_vector<float>();
  auto b = random::uniform({1000}, float32, k).to_vector<float>();
  auto c = random::uniform({1000}, float32, random::key(8)).to_vector<float>();
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // The documented bit recipe: element i of a float32 draw is (bits(key, i) >> 40) * 2^-24.
  for (int i : {0, 1, 999})
    EXPECT_EQ(a[i], static_cast<float>((random::bits(k, i) >> 40) * 0x1.0p-24));
}

TEST(Random, GlobalSeedRestartsTheSequence) {
  random::seed(123);
  auto a = random::normal({16}).to_vector<float>();
  auto b = random::normal({16}).to_vector<float>();
  random::seed(123);
  auto a2 = random::normal({16}).to_vector<float>();
  EXPECT_EQ(a, a2);
  EXPECT_NE(a, b);
}

TEST(Random, SplitGivesDistinctKeys) {
  auto keys = random::split(random::key(1), 4);
  ASSERT_EQ(keys.size(), 4u);
  for (int i = 0; i < 4; ++i)
    for (int j = i + 1; j < 4; ++j) EXPECT_NE(keys[i], keys[j]);
}

TEST(Random, Statistics) {
  const int n = 200000;
  auto u = random::uniform({n}, float64, random::key(3)).to_vector<double>();
  double mean = 0, var = 0, lo = 1, hi = 0;
  for (double v : u) mean += v, lo = std::min(lo, v), hi = std::max(hi, v);
  mean /= n;
  for (double v : u) var += (v - mean) * (v - mean);
  var /= n;
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(var, 1.0 / 12, 0.002);
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  auto z = random::normal({n}, float32, random::key(4)).to_vector<float>();
  double zm = 0, zv = 0;
  int beyond2 = 0;
  for (float v : z) zm += v, beyond2 += std::fabs(v) > 2;
  zm /= n;
  for (float v : z) zv += (v - zm) * (v - zm);
  zv /= n;
  EXPECT_NEAR(zm, 0.0, 0.01);
  EXPECT_NEAR(zv, 1.0, 0.02);
  EXPECT_NEAR(beyond2 / double(n), 0.0455, 0.003);  // P(|z| > 2) of a standard normal
  auto scaled = random::uniform(-2.0, 2.0, {n}, float32, random::key(5)).to_vector<float>();
  for (float v : scaled) ASSERT_TRUE(v >= -2 && v < 2);
  auto shifted = random::normal({n}, 10.0, 0.5, float64, random::key(6)).to_vector<double>();
  double sm = 0;
  for (double v : shifted) sm += v;
  EXPECT_NEAR(sm / n, 10.0, 0.01);
}

TEST(Random, SameBitsOnEveryDevice) {
  auto k = random::key(11);
  std::vector<float> first;
  for (const DeviceInfo& d : devices()) {
    if (!d.available) continue;
    auto v = random::uniform({256}, float32, k, d.device).to_vector<float>();
    if (first.empty())
      first = v;
    else
      EXPECT_EQ(v, first) << d.device;
  }
}
