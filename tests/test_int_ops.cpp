// floor_divide, remainder and the bitwise ops: NumPy's values on edge cases (zero divisors,
// INT_MIN // -1, negative operands, shift counts past the width or negative) checked against an
// oracle written here in 128-bit arithmetic, every op x dtype on every backend against the
// reference (eager and fused; a sweep), operators, errors, derivatives, vmap and the AOT forms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

#include "kernel_diff.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

const char* const kDevices[] = {"reference", "cpu", "opencl", "vulkan"};

// Exact comparison: integers by value (uint64 by its bits), floats bit for bit but NaN == NaN.
void expect_same(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  if (want.dtype() == uint64) {
    EXPECT_EQ(got.to_vector<uint64_t>(), want.to_vector<uint64_t>()) << what;
  } else if (!want.dtype().is_float()) {
    EXPECT_EQ(got.to_vector<int64_t>(), want.to_vector<int64_t>()) << what;
  } else {
    std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    for (size_t i = 0; i < w.size(); ++i) {
      bool same = std::isnan(w[i]) ? std::isnan(g[i]) : std::memcmp(&g[i], &w[i], 8) == 0;
      if (!same) {
        ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
        return;
      }
    }
  }
}

// ---- an oracle of NumPy's integer rules, in 128 bits (independent of backends/scalar_ops.h) ----

template <typename T>
T np_floor_divide(T a, T b) {
  if (b == 0) return 0;
  __int128 q = static_cast<__int128>(a) / b, r = static_cast<__int128>(a) % b;
  if (r != 0 && (r < 0) != (b < 0)) --q;
  return static_cast<T>(static_cast<uint64_t>(q));  // INT_MIN // -1 wraps
}
template <typename T>
T np_remainder(T a, T b) {
  if (b == 0) return 0;
  __int128 r = static_cast<__int128>(a) % b;
  if (r != 0 && (r < 0) != (b < 0)) r += b;
  return static_cast<T>(r);
}
template <typename T>
T np_shift(bool left, T a, T count) {
  const uint64_t bits = sizeof(T) * 8;
  // NumPy reads the count as unsigned: a negative one is huge.
  uint64_t c = static_cast<uint64_t>(static_cast<int64_t>(count));
  if (std::is_unsigned_v<T>) c = static_cast<uint64_t>(count);
  if (c >= bits) return left || a >= 0 ? T(0) : T(-1);
  if (left) return static_cast<T>(static_cast<uint64_t>(a) << c);
  return static_cast<T>(a >> c);
}

template <typename T>
std::vector<T> edge_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {0, 1, 2, 3, 7, L::max(), static_cast<T>(L::max() - 1), L::min()};
  if constexpr (std::is_signed_v<T>) {
    for (int x : {-1, -2, -3, -7}) v.push_back(static_cast<T>(x));
    v.push_back(static_cast<T>(L::min() + 1));
  }
  return v;
}

// Every pair of edge values, as two arrays (a varies slowest).
template <typename T>
std::pair<std::vector<T>, std::vector<T>> all_pairs(const std::vector<T>& v) {
  std::vector<T> a, b;
  for (T x : v)
    for (T y : v) a.push_back(x), b.push_back(y);
  return {a, b};
}

template <typename T>
void check_integer_rules(Dtype d, const char* dev) {
  SCOPED_TRACE(std::string(dev) + " " + d.name());
  StreamScope scope(device(dev));
  auto [av, bv] = all_pairs(edge_values<T>());
  for (T x : {T(sizeof(T) * 8 - 1), T(sizeof(T) * 8), T(sizeof(T) * 8 + 1), T(100)})
    av.push_back(T(-1)), bv.push_back(x);  // T(-1): all bits set
  Shape s{static_cast<int64_t>(av.size())};
  Array a = array(av, s, d), b = array(bv, s, d);
  std::vector<T> fd, rm, ls, rs;
  for (size_t i = 0; i < av.size(); ++i) {
    fd.push_back(np_floor_divide(av[i], bv[i]));
    rm.push_back(np_remainder(av[i], bv[i]));
    ls.push_back(np_shift(true, av[i], bv[i]));
    rs.push_back(np_shift(false, av[i], bv[i]));
  }
  auto both = compile([](const std::vector<Array>& x) {
    return std::vector<Array>{floor_divide(x[0], x[1]), remainder(x[0], x[1]),
                              left_shift(x[0], x[1]), right_shift(x[0], x[1])};
  });
  std::vector<Array> fused = both({a, b});
  const std::vector<T>* want[] = {&fd, &rm, &ls, &rs};
  const char* names[] = {"floor_divide", "remainder", "left_shift", "right_shift"};
  // Eager kernels (one per op: a cold build each on opencl and vulkan) on the host backends;
  // the sweep below runs them on the others.
  bool host = std::string(dev) == "reference" || std::string(dev) == "cpu";
  std::vector<Array> eager;
  if (host) eager = {floor_divide(a, b), remainder(a, b), a << b, a >> b};
  for (int k = 0; k < 4; ++k) {
    expect_same(fused[k], array(*want[k], s, d), std::string(names[k]) + " compiled");
    if (host) expect_same(eager[k], array(*want[k], s, d), std::string(names[k]) + " eager");
  }
}

}  // namespace

// NumPy's answers, written out: floor toward -inf, the remainder takes the divisor's sign, a
// zero divisor gives 0, INT_MIN // -1 wraps, INT_MIN % -1 is 0.
TEST(IntOps, FloorDivideAndRemainderAreNumpys) {
  Array a = array({7, -7, 7, -7, 0, 5, INT32_MIN, INT32_MIN, 3}, {9});
  Array b = array({2, 2, -2, -2, 3, 0, -1, 1, -1}, {9});
  EXPECT_EQ(floor_divide(a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{3, -4, -4, 3, 0, 0, INT32_MIN, INT32_MIN, -3}));
  EXPECT_EQ(remainder(a, b).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 1, -1, -1, 0, 0, 0, 0, 0}));
  EXPECT_EQ((a % 3).to_vector<int32_t>(),
            (std::vector<int32_t>{1, 2, 1, 2, 0, 2, 1, 1, 0}));  // INT32_MIN % 3 = 1
  // Floats: floor(a / b) in double for float32, so 1 // 0.1f is 9 as NumPy's (0.1f > 0.1).
  Array f = array({7.5f, -7.5f, 1.0f, 1.0f, -1.0f, 0.0f}, {6});
  Array g = array({2.0f, 2.0f, 0.1f, 0.0f, 0.0f, 0.0f}, {6});
  std::vector<float> q = floor_divide(f, g).to_vector<float>();
  std::vector<float> r = remainder(f, g).to_vector<float>();
  EXPECT_EQ(q[0], 3.0f);
  EXPECT_EQ(q[1], -4.0f);
  EXPECT_EQ(q[2], 9.0f);
  EXPECT_EQ(r[0], 1.5f);
  EXPECT_EQ(r[1], 0.5f);
  EXPECT_EQ(r[2], static_cast<float>(1.0 - static_cast<double>(0.1f) * 9));  // NumPy's 0.09999999
  EXPECT_EQ(q[3], INFINITY);
  EXPECT_EQ(q[4], -INFINITY);
  EXPECT_TRUE(std::isnan(q[5]));
  EXPECT_TRUE(std::isnan(r[3]));
  EXPECT_TRUE(std::isnan(r[5]));
  EXPECT_EQ(floor_divide(array(-1.5), array(2.0)).item<double>(), -1.0);
  EXPECT_EQ(remainder(array(-1.5), array(2.0)).item<double>(), 0.5);
  expect_error([&] { floor_divide(array(true), array(true)); }, {"floor_divide", "bool"});
}

// The integer rules on every integer dtype and backend, eager and compiled, at every pair of
// edge values (0, +-1, MIN, MAX, ...) and shift counts of width - 1, width, width + 1 and 100.
TEST(IntOps, IntegerEdgeCasesOnEveryBackend) {
  for (const char* dev : kDevices) {
    if (!test::backend_available(dev)) continue;
    check_integer_rules<int8_t>(int8, dev);
    check_integer_rules<int64_t>(int64, dev);
    check_integer_rules<uint32_t>(uint32, dev);
    if (std::string(dev) == "reference" || std::string(dev) == "cpu") {
      check_integer_rules<int32_t>(int32, dev);
      check_integer_rules<uint8_t>(uint8, dev);
      check_integer_rules<uint64_t>(uint64, dev);
    }
  }
}

TEST(IntOps, ShiftsDefineEveryCount) {
  Array x = array(std::vector<int8_t>{1, -128, -1, 64, 5, -5, 3}, {7});
  Array c = array(std::vector<int8_t>{7, 1, 100, -1, 8, 1, 0}, {7});
  EXPECT_EQ(left_shift(x, c).to_vector<int>(), (std::vector<int>{-128, 0, 0, 0, 0, -10, 3}));
  EXPECT_EQ(right_shift(x, c).to_vector<int>(), (std::vector<int>{0, -64, -1, 0, 0, -3, 3}));
  Array u = array(std::vector<uint32_t>{0x80000000u, 1u, 0xffffffffu}, {3});
  EXPECT_EQ((u >> 31).to_vector<uint32_t>(), (std::vector<uint32_t>{1u, 0u, 1u}));
  EXPECT_EQ((u << 32).to_vector<uint32_t>(), (std::vector<uint32_t>{0u, 0u, 0u}));
  // bools shift as uint8 (MLX's promotion)
  Array t = array({true, false}, {2});
  EXPECT_EQ(left_shift(t, t).dtype(), uint8);
  EXPECT_EQ(left_shift(t, t).to_vector<int>(), (std::vector<int>{2, 0}));
}

TEST(IntOps, BitwiseOpsAndOperators) {
  Array a = array({12, -1, 0, 255}, {4});
  Array b = array({10, 7, -1, 256}, {4});
  EXPECT_EQ(bitwise_and(a, b).to_vector<int>(), (std::vector<int>{8, 7, 0, 0}));
  EXPECT_EQ((a | b).to_vector<int>(), (std::vector<int>{14, -1, -1, 511}));
  EXPECT_EQ((a ^ b).to_vector<int>(), (std::vector<int>{6, -8, -1, 511}));
  EXPECT_EQ((~a).to_vector<int>(), (std::vector<int>{-13, 0, -1, -256}));
  EXPECT_EQ((a & 4).dtype(), int32);  // weak scalars keep the array's dtype
  Array u = array(std::vector<uint8_t>{0, 15, 200}, {3});
  EXPECT_EQ((~u).to_vector<int>(), (std::vector<int>{255, 240, 55}));
  EXPECT_EQ((1 << astype(array({0, 3}, {2}), uint8)).to_vector<int>(), (std::vector<int>{1, 8}));
  Array t = array({true, true, false, false}, {4}), f = array({true, false, true, false}, {4});
  EXPECT_EQ((t & f).dtype(), bool_);
  EXPECT_EQ((t & f).to_vector<int>(), (std::vector<int>{1, 0, 0, 0}));
  EXPECT_EQ((t | f).to_vector<int>(), (std::vector<int>{1, 1, 1, 0}));
  EXPECT_EQ((t ^ f).to_vector<int>(), (std::vector<int>{0, 1, 1, 0}));
  EXPECT_EQ((~t).to_vector<int>(), (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ((array({7, -7}, {2}) % 2).to_vector<int>(), (std::vector<int>{1, 1}));
}

TEST(IntOps, FloatOperandsAreRefusedByBitwiseOps) {
  Array x = ones({2}), i = array({1, 2}, {2});
  const std::string valid = "valid dtypes: bool, int8, int32, int64, uint8, uint32, uint64";
  expect_error([&] { bitwise_and(x, i); }, {"bitwise_and", "float", valid});
  expect_error([&] { bitwise_or(i, x); }, {"bitwise_or", valid});
  expect_error([&] { bitwise_xor(x, x); }, {"bitwise_xor", valid});
  expect_error([&] { left_shift(x, i); }, {"left_shift", valid});
  expect_error([&] { right_shift(i, astype(x, float16)); }, {"right_shift", valid});
  expect_error([&] { bitwise_invert(x); }, {"bitwise_invert", "float32", valid});
  expect_error([&] { ~astype(x, bfloat16); }, {"bitwise_invert", "bfloat16"});
  expect_error([&] { remainder(array(true), array(false)); }, {"remainder", "bool"});
}

// Integer-valued ops give zero gradients (integer inputs: none at all); remainder's derivative
// is 1 and -floor(a / b); vmap batches them as any element-wise op.
TEST(IntOps, GradientsAndVmap) {
  Fn f = [](const std::vector<Array>& x) {
    return std::vector<Array>{sum(remainder(x[0], x[1]) + floor_divide(x[0], x[1]))};
  };
  Array x = array({5.5, -5.5, 7.0}, {3}), y = array({2.0, 2.0, -3.0}, {3});
  std::vector<Array> g = grad(f, {0, 1})({x, y});
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{-2, 3, 3}));
  Fn bits = [](const std::vector<Array>& v) {
    return std::vector<Array>{sum(astype((v[0] & 6) ^ (v[0] >> 1), float32) * v[1])};
  };
  std::vector<Array> gi = grad(bits, {0, 1})({array({3, 12}, {2}), array({1.0f, 2.0f}, {2})});
  EXPECT_EQ(gi[0].dtype(), int32);
  EXPECT_EQ(gi[0].to_vector<int>(), (std::vector<int>{0, 0}));
  EXPECT_EQ(gi[1].to_vector<float>(), (std::vector<float>{3.0f, 2.0f}));  // (3&6)^1, (12&6)^6

  Fn ops = [](const std::vector<Array>& v) {
    return std::vector<Array>{floor_divide(v[0], v[1]), v[0] % v[1], v[0] << 2, ~v[0]};
  };
  Array batch = array({-7, 8, 9, 10, -11, 12}, {2, 3}), div = array({2, -3, 4}, {3});
  std::vector<Array> got = vmap(ops, {0, -1})({batch, div});
  for (int64_t r = 0; r < 2; ++r) {
    Array row = squeeze(slice(batch, {r, 0}, {r + 1, 3}), {0});
    std::vector<Array> want = ops({row, div});
    for (size_t k = 0; k < want.size(); ++k)
      EXPECT_EQ(squeeze(slice(got[k], {r, 0}, {r + 1, 3}), {0}).to_vector<int>(),
                want[k].to_vector<int>())
          << k;
  }
}

// The AOT text names the ops, and an artifact (Kernel IR text) brings them back.
TEST(IntOps, LoweredTextAndArtifacts) {
  CompiledFunction f = compile([](const std::vector<Array>& x) {
    return std::vector<Array>{floor_divide(x[0], x[1]) + (x[0] % x[1]),
                              ((x[0] & x[1]) | (x[0] ^ ~x[1])) + (x[0] << 3) + (x[1] >> 1)};
  });
  Array a = array({-9, 5, 100, INT32_MIN}, {4}), b = array({4, 0, -7, -1}, {4});
  Lowered low = f.lower({a, b});
  std::string text = low.as_text();
  for (const char* name : {"floor_divide(", "remainder(", "bitwise_and(", "bitwise_or(",
                           "bitwise_xor(", "bitwise_invert(", "left_shift(", "right_shift("})
    EXPECT_NE(text.find(name), std::string::npos) << name << " missing from\n" << text;
  Executable exe = low.compile();
  Executable back = Executable::from_artifact(exe.artifact());
  std::vector<Array> want = f({a, b}), got = back({a, b});
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_EQ(got[k].to_vector<int>(), want[k].to_vector<int>());
}

// Every op on every dtype it takes, on each device against the reference, on random data with
// edge values (0, -1, MIN, MAX, inf, NaN, counts past the width), broadcast and at sizes past
// vector and work-group boundaries: compiled (one fused kernel per dtype) and eager. A sweep:
// make test runs a sample of the (device, dtype) cases, make test-long every one.
TEST(IntOps, EveryOpDtypeAndBackendMatchesReference) {
  std::vector<std::string> devs;
  for (const char* d : {"cpu", "opencl", "vulkan"})
    if (test::backend_available(d)) devs.push_back(d);
  const size_t ndt = std::size(kdiff::kAll);
  test::CaseSample runs = test::case_sample(devs.size() * ndt, 6);
  SCOPED_TRACE(runs.trace);
  using Op2 = Array (*)(const Array&, const Array&, StreamOrDevice);
  const std::pair<const char*, Op2> ops[] = {
      {"floor_divide", floor_divide}, {"remainder", remainder},     {"bitwise_and", bitwise_and},
      {"bitwise_or", bitwise_or},     {"bitwise_xor", bitwise_xor}, {"left_shift", left_shift},
      {"right_shift", right_shift}};
  for (size_t di = 0; di < ndt; ++di) {
    Dtype d = kdiff::kAll[di];
    const int64_t rows = 37, cols = 29;  // 1073 elements: past every vector width and tile
    kdiff::Bytes ab = kdiff::sample(d, rows * cols, 17 + di), bb = kdiff::sample(d, cols, 29 + di);
    Array a = array_from_bytes(ab.data(), ab.size(), {rows, cols}, d);
    Array b = array_from_bytes(bb.data(), bb.size(), {cols}, d);  // broadcast along rows
    std::vector<std::pair<std::string, Op2>> valid;
    for (const auto& [name, op] : ops) {
      BinaryOp bop = BinaryOp::FloorDivide;
      for (int k = 0; k < kNumBinaryOps; ++k)
        if (std::string(op_name(static_cast<BinaryOp>(k))) == name) bop = static_cast<BinaryOp>(k);
      if (kdiff::ir_defined(bop, d)) valid.push_back({name, op});
    }
    auto all = [valid](const std::vector<Array>& x) {
      std::vector<Array> out;
      for (const auto& [name, op] : valid) out.push_back(op(x[0], x[1], {}));
      if (!x[0].dtype().is_float()) out.push_back(~x[0]);
      return out;
    };
    std::vector<Array> want;
    {
      StreamScope scope(device("reference"));
      want = all({a, b});
    }
    for (size_t k = 0; k < devs.size(); ++k) {
      if (!runs(k * ndt + di)) continue;
      StreamScope scope(device(devs[k]));
      std::vector<Array> fused = compile(all)({a, b}), eager = all({a, b});
      for (size_t o = 0; o < want.size(); ++o) {
        std::string what = (o < valid.size() ? valid[o].first : "bitwise_invert") + " " + d.name() +
                           " on " + devs[k];
        expect_same(fused[o], want[o], what + " compiled");
        expect_same(eager[o], want[o], what + " eager");
      }
    }
  }
}
