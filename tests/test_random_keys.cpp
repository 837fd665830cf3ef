// Key arrays (MLX's random keys): draws with a key array equal draws with the same Key value on
// every backend; split and key_array agree with the value API; a compiled function that
// captures its random state draws anew at every call with one trace; the distributions built
// on the draws (randint, bernoulli, truncated_normal, categorical) against their statistics and
// the reference on every backend; derivatives, vmap over keys, the AOT forms and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

std::vector<std::string> device_backends() {
  std::vector<std::string> out;
  for (const char* d : {"reference", "cpu", "opencl", "vulkan"})
    if (test::backend_available(d)) out.push_back(d);
  return out;
}

std::vector<uint64_t> u64(const Array& a) { return a.to_vector<uint64_t>(); }

// A row of a key batch as a 0-d key array.
Array row(const Array& keys, int64_t i) { return reshape(slice(keys, {i}, {i + 1}), {}); }

double mean_of(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m += x;
  return m / static_cast<double>(v.size());
}

}  // namespace

TEST(RandomKeys, KeyArraysDrawWhatTheirKeyValueDraws) {
  random::Key k = random::key(42);
  Array ka = array(k);
  EXPECT_EQ(ka.dtype(), uint64);
  EXPECT_EQ(ka.ndim(), 0);
  for (const std::string& dev : device_backends()) {
    SCOPED_TRACE(dev);
    Device d = device(dev);
    // Every dtype on the host backends; one of each draw on the others (cold builds each),
    // against the value draws of the reference (the same bits on every backend).
    bool host = dev == "reference" || dev == "cpu";
    Device vd = host ? d : device("reference");
    for (Dtype t : {float32, float64, float16, bfloat16}) {
      if (host || t == float32) {
        EXPECT_EQ(test::values(random::uniform({300}, t, ka, d)),
                  test::values(random::uniform({300}, t, k, vd)))
            << t;
      }
      if (host || t == float64) {  // log and cos: the device's own, within 1e-12
        test::expect_near(test::values(random::normal({300}, t, ka, d)),
                          test::values(random::normal({300}, t, k, vd)), host ? 0 : 1e-12);
      }
    }
    std::vector<uint64_t> b = u64(random::bits(Shape{5, 7}, 8, ka, d));
    for (uint64_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], random::bits(k, i)) << i;
    std::vector<uint32_t> b4 = random::bits(Shape{9}, 4, ka, d).to_vector<uint32_t>();
    for (uint64_t i = 0; i < b4.size(); ++i)
      ASSERT_EQ(b4[i], static_cast<uint32_t>(random::bits(k, i)));
  }
  // A key of shape (1,) is taken too.
  EXPECT_EQ(test::values(random::uniform({4}, float32, reshape(ka, {1}))),
            test::values(random::uniform({4}, float32, k)));
}

TEST(RandomKeys, SplitAndKeyArrayAgreeWithTheValueApi) {
  EXPECT_EQ(random::key_array(5).item<uint64_t>(), random::key(5));
  random::Key k = random::key(9);
  std::vector<random::Key> values = random::split(k, 4);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(values[i], random::bits(k, i));
  for (const std::string& dev : device_backends()) {
    Array keys = random::split(array(k), 4, device(dev));
    EXPECT_EQ(keys.shape(), Shape{4});
    EXPECT_EQ(u64(keys), values) << dev;
    // A row draws as its value does.
    EXPECT_EQ(test::values(random::uniform({8}, float32, row(keys, 2), device(dev))),
              test::values(random::uniform({8}, float32, values[2])))
        << dev;
  }
  EXPECT_EQ(random::split(array(k)).shape(), Shape{2});  // MLX's default of 2
}

// The pattern of Python's kiln.random.state: one key array captured as inputs and outputs; each
// call splits it, keeps one half as the new state and draws with the other. One trace serves
// every call, each call draws new values, and they equal the same chain run eagerly.
TEST(RandomKeys, CompiledFunctionAdvancesItsCapturedKey) {
  for (const std::string& dev : device_backends()) {
    SCOPED_TRACE(dev);
    StreamScope scope(device(dev));
    std::vector<Array> state = {random::key_array(0)};
    CompiledFunction step = compile(
        [&state](const std::vector<Array>& in) {
          Array keys = random::split(state[0]);
          state[0] = row(keys, 0);
          return std::vector<Array>{random::uniform({6}, float32, row(keys, 1)) + in[0],
                                    random::randint(0, 10, {4}, int32, row(keys, 1))};
        },
        {.inputs = {&state}, .outputs = {&state}});
    random::Key eager_key = random::key(0);
    std::vector<std::vector<double>> seen;
    Device ref = device("reference");  // the same chain with Key values, on the reference
    for (int call = 0; call < 3; ++call) {
      std::vector<Array> out = step({zeros({6})});
      std::vector<random::Key> halves = random::split(eager_key, 2);
      eager_key = halves[0];
      EXPECT_EQ(state[0].item<uint64_t>(), eager_key) << "call " << call;
      EXPECT_EQ(test::values(out[0]), test::values(random::uniform({6}, float32, halves[1], ref)));
      EXPECT_EQ(out[1].to_vector<int>(),
                random::randint(0, 10, {4}, int32, halves[1], ref).to_vector<int>());
      for (const auto& earlier : seen) EXPECT_NE(test::values(out[0]), earlier);
      seen.push_back(test::values(out[0]));
    }
    EXPECT_EQ(step.cache_size(), 1u);
  }
}

// A key passed as an argument: a new key is a new value, not a new kernel.
TEST(RandomKeys, TracedKeyArgumentsReuseTheTrace) {
  CompiledFunction f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{random::normal({16}, float64, in[0]) * 2.0,
                              random::bernoulli(0.5, {16}, in[0])};
  });
  for (uint64_t seed : {1u, 2u, 3u}) {
    std::vector<Array> out = f({random::key_array(seed)});
    EXPECT_EQ(test::values(out[0]),
              test::values(random::normal({16}, float64, random::key(seed)) * 2.0));
    EXPECT_EQ(test::values(out[1]), test::values(random::bernoulli(0.5, {16}, random::key(seed))));
  }
  EXPECT_EQ(f.cache_size(), 1u);
}

TEST(RandomKeys, RandintStaysInRangeAndIsUniform) {
  Array r = random::randint(-3, 7, {20000}, int32, random::key(1));
  EXPECT_EQ(r.dtype(), int32);
  std::map<int, int> counts;
  for (int v : r.to_vector<int>()) counts[v]++;
  ASSERT_EQ(counts.size(), 10u);
  EXPECT_EQ(counts.begin()->first, -3);
  EXPECT_EQ(counts.rbegin()->first, 6);
  for (const auto& [v, c] : counts) EXPECT_NEAR(c, 2000, 200) << v;  // ~4.7 sigma
  // The whole range of a dtype, and bounds of int64's extremes.
  std::vector<int> bytes = random::randint(0, 256, {4000}, uint8, random::key(2)).to_vector<int>();
  int lo = 255, hi = 0;
  for (int v : bytes) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_EQ(lo, 0);
  EXPECT_EQ(hi, 255);
  Array wide = random::randint(INT64_MIN, INT64_MAX, {1000}, int64, random::key(3));
  int negative = 0;
  for (int64_t v : wide.to_vector<int64_t>()) negative += v < 0;
  EXPECT_NEAR(negative, 500, 80);
  // Array bounds broadcast; where high <= low the result is low.
  Array lows = array({0, 10, 5}, {3}), highs = array({2, 20, 5}, {3});
  std::vector<int> v =
      random::randint(lows, highs, {50, 3}, int32, random::key(4)).to_vector<int>();
  for (size_t i = 0; i < v.size(); ++i) {
    int l = std::vector<int>{0, 10, 5}[i % 3], h = std::vector<int>{2, 20, 5}[i % 3];
    EXPECT_TRUE(l == h ? v[i] == l : v[i] >= l && v[i] < h) << i << ": " << v[i];
  }
  expect_error([] { random::randint(0, 10, {3}, float32); }, {"randint", "float32", "int32"});
  expect_error([] { random::randint(5, 5, {3}); }, {"randint", "less than"});
  expect_error([] { random::randint(array(0.5f), array(2), {3}); }, {"randint", "integers"});
}

TEST(RandomKeys, BernoulliTruncatedNormalAndCategoricalStatistics) {
  const int n = 40000;
  Array b = random::bernoulli(0.3, {n}, random::key(5));
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_NEAR(mean_of(test::values(b)), 0.3, 0.012);  // ~5 sigma
  Array ps = array({0.0f, 1.0f, 0.5f}, {3});
  EXPECT_EQ(random::bernoulli(ps).shape(), Shape{3});
  std::vector<double> pb = test::values(random::bernoulli(ps, Shape{2000, 3}, random::key(6)));
  double ones[3] = {0, 0, 0};
  for (size_t i = 0; i < pb.size(); ++i) ones[i % 3] += pb[i];
  EXPECT_EQ(ones[0], 0);
  EXPECT_EQ(ones[1], 2000);
  EXPECT_NEAR(ones[2], 1000, 120);

  for (Dtype t : {float32, float64}) {
    SCOPED_TRACE(t.name());
    std::vector<double> z = test::values(random::truncated_normal(-1, 1, {n}, t, random::key(7)));
    double m = mean_of(z), var = 0;
    for (double x : z) {
      ASSERT_TRUE(x >= -1 && x <= 1) << x;
      var += (x - m) * (x - m);
    }
    EXPECT_NEAR(m, 0, 0.01);
    // Var of N(0,1) truncated to [-1, 1]: 1 - 2 phi(1) / (Phi(1) - Phi(-1)) = 0.29112.
    EXPECT_NEAR(var / n, 0.29112, 0.01);
    std::vector<double> half =
        test::values(random::truncated_normal(0, INFINITY, {n}, t, random::key(8)));
    for (double x : half) ASSERT_TRUE(x >= 0 && std::isfinite(x)) << x;
    EXPECT_NEAR(mean_of(half), std::sqrt(2 / M_PI), 0.015);  // half-normal mean
  }

  Array logits = log(array({0.1f, 0.2f, 0.7f, 0.0f}, {4}));  // the last is -inf: never drawn
  Array c = random::categorical(logits, -1, n, random::key(9));
  EXPECT_EQ(c.dtype(), uint32);
  EXPECT_EQ(c.shape(), Shape{n});
  double freq[4] = {0, 0, 0, 0};
  for (uint32_t v : c.to_vector<uint32_t>()) freq[v] += 1.0 / n;
  EXPECT_NEAR(freq[0], 0.1, 0.01);
  EXPECT_NEAR(freq[1], 0.2, 0.012);
  EXPECT_NEAR(freq[2], 0.7, 0.012);
  EXPECT_EQ(freq[3], 0);
  Array batch = zeros({5, 3, 7});
  EXPECT_EQ(random::categorical(batch, 1).shape(), (Shape{5, 7}));
  EXPECT_EQ(random::categorical(batch, 1, Shape{2, 5, 7}).shape(), (Shape{2, 5, 7}));
  EXPECT_EQ(random::categorical(batch, -1, 4).shape(), (Shape{5, 3, 4}));
  expect_error([&] { random::categorical(batch, 1, Shape{5, 3}); }, {"categorical", "broadcast"});
  expect_error([&] { random::categorical(batch, 3); }, {"categorical"});
}

// Every distribution with a key array, compiled (a traced key) and eager, on each device
// against the reference: raw bits and uniforms bit for bit; values that pass through log, erf
// or exp within float32 rounding (backends' float32 transcendental functions differ by ulps).
// A sweep: make test runs two of the cases compiled on a device or eager on cpu; make
// test-long all of them, eager on opencl and vulkan too (~30 s each: a dozen cold builds).
TEST(RandomKeys, EveryDistributionMatchesTheReferenceOnEveryBackend) {
  auto all = [](const std::vector<Array>& in) {
    const Array& k = in[0];
    Array keys = random::split(k, 6);
    return std::vector<Array>{
        astype(random::bits(Shape{33, 31}, 8, row(keys, 0)), float64),
        random::uniform({1023}, bfloat16, row(keys, 1)),
        random::randint(array(-1000), array(1000), {257}, int64, row(keys, 2)),
        random::bernoulli(0.25, {129}, row(keys, 3)),
        random::truncated_normal(-2, 0.5, {300}, float32, row(keys, 4)),
        random::categorical(in[1], -1, 64, row(keys, 5)),
        random::normal({211}, float64, k)};
  };
  Array key = random::key_array(77);
  Array logits = array({0.0f, 1.0f, -1.0f, 2.0f, 0.5f, 0.25f}, {2, 3});
  std::vector<Array> want;
  {
    StreamScope scope(device("reference"));
    want = all({key, logits});
  }
  std::vector<double> tol = {0, 0, 0, 0, 2e-6, 0, 1e-12};
  const char* const devs[] = {"cpu", "opencl", "vulkan"};
  test::CaseSample runs = test::case_sample(2 * std::size(devs), 4);
  SCOPED_TRACE(runs.trace);
  for (size_t di = 0; di < std::size(devs); ++di) {
    const std::string dev = devs[di];
    if (!test::backend_available(dev)) continue;
    StreamScope scope(device(dev));
    for (bool compiled : {true, false}) {
      if (!runs(2 * di + compiled) || (!compiled && dev != "cpu" && !test::long_tests())) continue;
      SCOPED_TRACE(dev + (compiled ? " compiled" : " eager"));
      std::vector<Array> got = compiled ? compile(all)({key, logits}) : all({key, logits});
      for (size_t o = 0; o < want.size(); ++o) {
        std::vector<double> g = test::values(got[o]), w = test::values(want[o]);
        ASSERT_EQ(g.size(), w.size()) << o;
        int differ = 0;
        for (size_t i = 0; i < w.size(); ++i)
          differ += std::fabs(g[i] - w[i]) > tol[o] * (1 + std::fabs(w[i]));
        // categorical: a near-tie may fall either way under another backend's log
        EXPECT_LE(differ, o == 5 ? 1 : 0) << "output " << o;
      }
    }
  }
}

TEST(RandomKeys, GradVmapAndErrors) {
  // A draw has no derivative; the key is not differentiable but does not stop the rest.
  Fn f = [](const std::vector<Array>& in) {
    return std::vector<Array>{sum(random::uniform({3}, float64, in[1]) * in[0])};
  };
  Array key = random::key_array(3);
  std::vector<Array> g = grad(f)({ones({3}, float64), key});
  EXPECT_EQ(test::values(g[0]), test::values(random::uniform({3}, float64, random::key(3))));
  // vmap over a batch of keys draws once per key.
  Array keys = random::split(key, 3);
  Fn draw = [](const std::vector<Array>& in) {
    return std::vector<Array>{random::normal({4}, float32, in[0])};
  };
  Array batched = vmap(draw)({keys})[0];
  ASSERT_EQ(batched.shape(), (Shape{3, 4}));
  for (int64_t b = 0; b < 3; ++b)
    EXPECT_EQ(test::values(squeeze(slice(batched, {b, 0}, {b + 1, 4}), {0})),
              test::values(random::normal({4}, float32, row(keys, b))));
  // An unmapped key is shared by every element.
  Fn shared = [](const std::vector<Array>& in) {
    return std::vector<Array>{random::uniform({2}, float32, in[1]) + in[0]};
  };
  Array out = vmap(shared, {0, -1})({zeros({3, 2}), key})[0];
  std::vector<double> v = test::values(out);
  EXPECT_EQ(v[0], v[2]);
  EXPECT_EQ(v[1], v[5]);

  expect_error([] { random::uniform({2}, float32, array(3)); }, {"uniform", "uint64", "int32"});
  expect_error([] { random::normal({2}, float32, random::split(random::key_array(1), 2)); },
               {"normal", "one element", "(2,)"});
  expect_error([] { random::bits(Shape{2}, 2); }, {"bits", "width 2", "1, 4 or 8"});
  expect_error([] { random::split(random::key_array(1), -1); }, {"split", "-1"});
  expect_error([] { random::truncated_normal(1, -1, {2}); }, {"truncated_normal", "exceed"});
  expect_error([] { random::bernoulli(1.5); }, {"bernoulli", "probability"});
}

TEST(RandomKeys, LoweredTextAndArtifacts) {
  CompiledFunction f = compile([](const std::vector<Array>& in) {
    Array keys = random::split(in[0], 2);
    return std::vector<Array>{random::uniform({5}, float32, row(keys, 0)),
                              random::randint(0, 100, {5}, int32, row(keys, 1))};
  });
  Array key = random::key_array(12);
  Lowered low = f.lower({key});
  std::string text = low.as_text();
  EXPECT_NE(text.find("bits("), std::string::npos) << text;
  EXPECT_NE(text.find("uniform("), std::string::npos) << text;
  Executable back = Executable::from_artifact(low.compile().artifact());
  for (uint64_t seed : {12u, 13u}) {
    std::vector<Array> want = f({random::key_array(seed)}), got = back({random::key_array(seed)});
    EXPECT_EQ(test::values(got[0]), test::values(want[0]));
    EXPECT_EQ(got[1].to_vector<int>(), want[1].to_vector<int>());
  }
}
