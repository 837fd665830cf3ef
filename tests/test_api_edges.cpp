// The C++ API's rough edges a user's first program hit (issue 37): every reduction takes an int
// axis, a list of axes or none the same way; arrays and devices print; MLP takes an op of
// ops.h as its activation; a job's error reads as a sentence. Each of these failed before,
// most of them at compile time.
#include <sstream>

#include "test_util.h"

using namespace kiln;

TEST(ApiEdges, EveryReductionTakesAnAxisAListOrNone) {
  Array x = array(std::vector<float>{1, 2, 3, 4, 5, 7}, {2, 3});
  // var and std took only a list, so var(x, -1, true) did not compile.
  EXPECT_EQ(var(x, -1, true).shape(), (Shape{2, 1}));
  test::expect_near(var(x, -1, true).to_vector<float>(), {2.0 / 3, 14.0 / 9}, 1e-6);
  test::expect_near(var(x, {0, 1}).to_vector<float>(), {var(x).item<float>()}, 1e-6);
  test::expect_near(kiln::std(x, 1, false, 1).to_vector<float>(), {1.0, std::sqrt(7.0 / 3)}, 1e-6);
  test::expect_near(kiln::std(x, true).to_vector<float>(), {kiln::std(x, {0, 1}).item<float>()},
                    1e-6);
  EXPECT_EQ(argmin(x).item<int64_t>(), 0);  // no axis: over the flattened array
  EXPECT_EQ(argmin(x, true).shape(), (Shape{1, 1}));
  EXPECT_EQ(argmax(x).item<int64_t>(), 5);
  Array b = array(std::vector<float>{0, 0, 1, 0, 0, 0}, {2, 3});
  EXPECT_TRUE(any(b).item<bool>());
  EXPECT_FALSE(all(b).item<bool>());
  EXPECT_EQ(any(b, 1).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(all(x, {0, 1}, true).shape(), (Shape{1, 1}));
  EXPECT_TRUE(all(x).item<bool>());
  EXPECT_EQ(any(b, -1, true).shape(), (Shape{2, 1}));
  Array empty = zeros({0, 3});
  EXPECT_FALSE(any(empty).item<bool>());  // as NumPy: any of nothing is false, all true
  EXPECT_TRUE(all(empty).item<bool>());
  EXPECT_EQ(all(empty, 0).to_vector<bool>(), (std::vector<bool>{true, true, true}));
}

TEST(ApiEdges, ArraysAndDevicesPrint) {
  std::ostringstream o;
  o << array(std::vector<int32_t>{1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(o.str(), "array([[1, 2],\n       [3, 4]], dtype=int32)");
  EXPECT_EQ(array(std::vector<float>{0.5f, -2}, {2}).str(), "array([0.5, -2], dtype=float32)");
  EXPECT_EQ(array(true).str(), "array(true, dtype=bool)");
  std::string big = arange(0, 5000, 1, int32).str();  // elided past 1000 elements
  EXPECT_EQ(big, "array([0, 1, 2, ..., 4997, 4998, 4999], dtype=int32)");
  std::string grid = reshape(arange(0, 2000, 1, int32), {1000, 2}).str();
  EXPECT_NE(grid.find("[[0, 1],\n       [2, 3],\n       [4, 5],\n       ...,\n       [1994, 1995]"),
            std::string::npos)
      << grid;
  std::ostringstream d;
  d << devices()[0];
  EXPECT_NE(d.str().find(devices()[0].device.str()), std::string::npos) << d.str();
}

TEST(ApiEdges, MlpTakesAnOpAsItsActivation) {
  nn::MLP m({4, 8, 2}, tanh, random::key(0));  // ambiguous before: ops' tanh has a stream argument
  Array x = ones({3, 4});
  Array y = m(x);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  nn::MLP same(
      {4, 8, 2}, [](const Array& a) { return tanh(a); }, random::key(0));
  test::expect_near(y.to_vector<float>(), test::values(same(x)), 1e-6);
}

TEST(ApiEdges, AJobsErrorReadsAsASentence) {
  Scheduler s;
  JobOptions o;
  o.deadline = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  o.name = "late";
  Job j = s.submit([](const std::vector<Array>& in) { return in; }, {ones({2})}, o);
  j.wait();
  test::expect_error([&] { j.outputs(); },
                     {"job 'late'", "has no outputs: it missed its deadline"});
}

// as_text() printed `constant` with no value and `sum(%0)` with no axes, so the graph could
// not be read as the computation it is.
TEST(ApiEdges, LoweredTextShowsConstantsAndReductionAxes) {
  Array w = array(std::vector<float>{0.5f, 1, 2}, {3});
  Array big = arange(0, 12, 1, float32);
  CompiledFunction f = compile([w, big](const std::vector<Array>& in) {
    Array scaled = in[0] * w;                           // a captured constant
    Array r = sum(scaled, 1, true);                     // axis 1, kept
    Array m = max(in[0], 0);                            // axis 0, dropped
    Array t = transpose(in[0] + reshape(big, {4, 3}));  // more values than the text shows
    return std::vector<Array>{r, m, t};
  });
  std::string text = f.lower({ones({4, 3})}).as_text();
  std::string graph = text.substr(0, text.find("plan:"));
  for (const char* part : {"constant [0.5, 1, 2] : float32(3,)", "sum(%",
                           ") axes=(1) keepdims : ", "max(%0) axes=(0) : float32(3,)",
                           "constant [0, 1, 2, ..., 9, 10, 11]", ") perm=(1, 0) : float32(3, 4)"})
    EXPECT_NE(graph.find(part), std::string::npos) << "missing '" << part << "' in\n" << graph;
}
