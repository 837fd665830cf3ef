// Matmul reading a transposed operand in place (MatmulArgs::trans_a / trans_b): x @ w.T,
// a.T @ b, both, batched (swapaxes of the last two axes), broadcast batches and matrix-vector
// shapes, compiled and eager, on every backend and dtype against the reference reading operands
// the test stored as they are read (so the oracle never takes the transposed path). The plans
// hold no kernel storing the transpose, and gradients through x @ w.T match the same
// gradients with w.T given as data.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <random>
#include <sstream>
#include <string>

#include "compile/aot.h"
#include "sweep.h"
#include "test_util.h"

using namespace kiln;

namespace {

// Operands of small integers (unsigned dtypes: 0..3, others -3..3): every float sum is exact in
// float32, so each backend rounds the same exact value to the dtype, and integer dtypes wrap
// the same way. Results must then be equal, not near.
Array small_ints(const Shape& s, Dtype d, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<double> v(shape_size(s));
  for (double& x : v)
    x = d.is_unsigned() ? static_cast<double>(rng() % 4) : static_cast<double>(rng() % 7) - 3;
  return astype(array(v, s, float64), d);
}

// The array as fresh data in `a`'s logical layout: an operand the matmul reads as it is.
Array as_data(const Array& a) {
  StreamScope scope(device("reference"));
  return astype(array(test::values(a), a.shape(), float64), a.dtype());
}

Array swap_last(const Array& x) { return swapaxes(x, -1, -2); }

// One case: operands as stored, and which of them the program reads transposed (its last two
// axes swapped).
struct Case {
  std::string name;
  Shape a, b;
  bool ta, tb;
  Array operator()(const Array& a, const Array& b) const {
    return matmul(ta ? swap_last(a) : a, tb ? swap_last(b) : b);
  }
};

std::vector<Case> cases(int64_t m, int64_t n, int64_t k) {
  return {
      {"x @ w.T", {m, k}, {n, k}, false, true},
      {"a.T @ b", {k, m}, {k, n}, true, false},
      {"a.T @ b.T", {k, m}, {n, k}, true, true},
      {"batched a^T @ b^T", {3, k, m}, {3, n, k}, true, true},
      {"broadcast batch a @ b^T", {2, 1, m, k}, {3, n, k}, false, true},
      {"broadcast batch a^T @ b", {2, 1, k, m}, {3, k, n}, true, false},
      {"row @ w.T", {1, k}, {n, k}, false, true},
      {"a.T @ column", {k, m}, {k, 1}, true, false},
      {"vector @ w.T", {k}, {n, k}, false, true},
  };
}

// The case computed on `dev` (compiled, or eagerly) against the reference given the operands as
// data laid out as the matmul reads them: no transpose reaches the oracle's matmul.
void expect_case_matches_reference(const Case& c, const std::string& dev, Dtype d, bool compiled) {
  SCOPED_TRACE(c.name + " " + d.name() + " on " + dev + (compiled ? " compiled" : " eager"));
  Array a = small_ints(c.a, d, 1), b = small_ints(c.b, d, 2);
  std::vector<double> want;
  {
    StreamScope scope(device("reference"));
    Array x = c.ta ? as_data(swap_last(a)) : a, y = c.tb ? as_data(swap_last(b)) : b;
    want = test::values(matmul(x, y));
  }
  StreamScope scope(device(dev));
  auto f =
      compile([&](const std::vector<Array>& in) { return std::vector<Array>{c(in[0], in[1])}; });
  Array got = compiled ? f({a, b})[0] : c(a, b);
  ASSERT_EQ(got.dtype(), d);
  EXPECT_EQ(test::values(got), want);
}

const Dtype kDtypes[] = {float32, float64, float16, bfloat16, int8,
                         int32,   int64,   uint8,   uint32,   uint64};

}  // namespace

// Every case, dtype and backend, compiled and eager, at sizes around work-groups of 64: a
// sample in make test (device kernels build cold), all of it in make test-long; opencl and
// vulkan follow KILN_TEST_DEVICE_SWEEP as the other device sweeps do. Vulkan's matmul takes
// float32 and float64 only.
TEST(MatmulTransposed, EveryBackendDtypeAndLayoutMatchesReference) {
  const size_t per_dev = std::size(kDtypes) * cases(1, 1, 1).size() * 2;
  test::CaseSample cpu_runs = test::case_sample(per_dev, 24);
  for (const char* dev : {"cpu", "opencl", "vulkan"}) {
    if (!test::backend_available(dev)) continue;
    test::Sweep dev_runs = test::device_sweep(0, static_cast<int>(per_dev), 6);
    bool cpu = std::string(dev) == "cpu";
    SCOPED_TRACE(std::string(dev) + ": " + (cpu ? cpu_runs.trace : dev_runs.trace));
    size_t i = 0;
    for (Dtype d : kDtypes)
      for (const Case& c : cases(33, 70, 65))
        for (bool compiled : {true, false}) {
          size_t j = i++;
          bool chosen =
              cpu ? cpu_runs(j) : j >= dev_runs.first && j < dev_runs.first + dev_runs.count;
          if (!chosen || (!cpu && std::string(dev) == "vulkan" && d != float32 && d != float64))
            continue;
          expect_case_matches_reference(c, dev, d, compiled);
        }
  }
}

// The quick check in make test, on cpu: every dtype reading w.T in place, every layout in
// float32 and int32 (the libraries and the integer loop) compiled and eager, at sizes the cpu
// backend cuts into several tiles (gemm_tiles.h: past 2^22 flops, 16-row and 64-column
// multiples), and the reference backend's own reading of transposed operands.
TEST(MatmulTransposed, CpuEveryDtypeAndLayoutMatchesReference) {
  for (const char* dev : {"reference", "cpu"}) {
    if (!test::backend_available(dev)) continue;
    for (Dtype d : kDtypes) expect_case_matches_reference(cases(9, 17, 13)[0], dev, d, true);
    for (Dtype d : {float32, int32})
      for (const Case& c : cases(33, 70, 65))
        for (bool compiled : {true, false}) expect_case_matches_reference(c, dev, d, compiled);
  }
  if (test::backend_available("cpu"))
    for (const Case& c : cases(130, 200, 161))
      expect_case_matches_reference(c, "cpu", float32, true);
}

// The non-copy tasks of a lowered program's plan ("matmul ... transposed b"), and its kernels.
// (A traced plan copies its inputs onto the caller's lane; the executor makes those copies
// aliases when the devices agree.)
std::vector<std::string> plan_tasks(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(
      text.substr(text.find("plan:"), text.find("placements:") - text.find("plan:")));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("task ", 0) == 0 && line.find(": copy ") == std::string::npos)
      out.push_back(line.substr(line.find(": ") + 2));
  return out;
}

// The compiled plan of x @ w.T reads w as stored: a matmul flagged "transposed b" and no
// kernel copying w.T; likewise a.T @ b.T. Eagerly, no kernel runs besides the matmul.
TEST(MatmulTransposed, PlansReadTheTransposeInPlace) {
  Array x = small_ints({4, 6}, float32, 1), w = small_ints({5, 6}, float32, 2);
  auto xwt = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{matmul(in[0], transpose(in[1]))};
  });
  std::string text = xwt.lower({x, w}).as_text();
  std::vector<std::string> tasks = plan_tasks(text);
  ASSERT_EQ(tasks.size(), 1u) << text;
  EXPECT_EQ(tasks[0].substr(0, 7), "matmul ") << text;
  EXPECT_NE(tasks[0].find("transposed b"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.find("kernels:")), "kernels:\n") << text;
  auto both = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{matmul(transpose(in[0]), transpose(in[1]))};
  });
  text = both.lower({transpose(x), w}).as_text();
  tasks = plan_tasks(text);
  ASSERT_EQ(tasks.size(), 1u) << text;
  EXPECT_NE(tasks[0].find("transposed ab"), std::string::npos) << text;
  EXPECT_EQ(text.substr(text.find("kernels:")), "kernels:\n") << text;
  // Eager: the transpose is not stored either (unless someone holds it: it is then an output).
  eval({x, w});
  Array y = matmul(x, transpose(w));
  ProfileScope prof;
  eval(y);
  std::vector<std::string> names;
  for (const TaskEvent& e : prof.events()) names.push_back(e.name);
  EXPECT_EQ(names, std::vector<std::string>{"matmul"});
}

// d/dx and d/dw of sum(tanh(x @ w.T)), compiled on cpu (reverse mode reads x, w and the
// cotangent transposed), against the reference's gradients with w.T given as data.
TEST(MatmulTransposed, GradientsThroughXTimesWTransposed) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "the cpu backend is not built";
  std::mt19937 rng(7);
  std::normal_distribution<double> normal;
  std::vector<double> xv(40 * 70), wv(90 * 70);
  for (double& v : xv) v = normal(rng) / 4;
  for (double& v : wv) v = normal(rng) / 4;
  auto loss = [](const Array& x, const Array& wt) {
    return std::vector<Array>{sum(tanh(matmul(x, wt)))};
  };
  for (Dtype d : {float32, float64}) {
    SCOPED_TRACE(d.name());
    Array x = astype(array(xv, {40, 70}, float64), d), w = astype(array(wv, {90, 70}, float64), d);
    std::vector<Array> want;
    {
      StreamScope scope(device("reference"));
      want = grad([&](const std::vector<Array>& in) { return loss(in[0], in[1]); },
                  {0, 1})({x, as_data(transpose(w))});
      want[1] = as_data(transpose(want[1]));
    }
    StreamScope scope(device("cpu"));
    auto g = compile(
        grad([&](const std::vector<Array>& in) { return loss(in[0], transpose(in[1])); }, {0, 1}));
    std::vector<Array> got = g({x, w});
    double tol = d == float32 ? 1e-5 : 1e-12;
    test::expect_near(test::values(got[0]), test::values(want[0]), tol);
    test::expect_near(test::values(got[1]), test::values(want[1]), tol);
  }
}

// An artifact of x @ w.T and a.T @ b.T keeps the flags ("transposed b", "transposed ab" on the
// matmul's task line), reads back to the same text and runs to the same values; a flag line
// naming neither operand raises with its place.
TEST(MatmulTransposed, ArtifactsKeepTheFlags) {
  Array x = small_ints({4, 6}, float32, 1), w = small_ints({5, 6}, float32, 2);
  auto f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{matmul(in[0], transpose(in[1])),
                              matmul(transpose(in[0]), transpose(in[2]))};
  });
  Array v = small_ints({3, 4}, float32, 3);
  Executable e = f.lower({x, w, v}).compile();
  std::string text = e.artifact();
  EXPECT_NE(text.find(" transposed b\n"), std::string::npos) << text;
  EXPECT_NE(text.find(" transposed ab\n"), std::string::npos) << text;
  Executable back = Executable::from_artifact(text);
  EXPECT_EQ(back.as_text(), e.as_text());
  std::vector<Array> want = f({x, w, v}), got = back({x, w, v});
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(test::values(got[i]), test::values(want[i])) << i;
  // A damaged flag in the artifact's task list: "transposed ab" -> "transposed xy", with the
  // checksum (FNV-1a 64 of everything before its line) made to match, so the reader reaches it.
  std::string bad = text;
  bad.replace(bad.rfind(" transposed ab\n"), 15, " transposed xy\n");
  std::string body = bad.substr(0, bad.rfind("checksum "));
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : body) h = (h ^ c) * 0x100000001b3ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  bad = body + "checksum " + hex + "\n";
  test::expect_error([&] { Executable::from_artifact(bad); }, {"'a', 'b' or 'ab'"});
}
