// Row kernels (kernel_ir.h, invariant 6): compiled softmax, log_softmax, layer_norm and rms_norm
// become one row kernel; the cpu backend walks it row by row (or runs its passes past a line
// set for measuring, backends/cpu/row_walk.h), every other backend runs its passes. Each against
// the reference interpreter on every backend and float dtype, at row lengths around vector widths,
// tiles and work-groups; the Kernel IR rules of row kernels; row fusion's limits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>

#include "backends/cpu/row_walk.h"
#include "backends/kernel_text.h"
#include "compile/aot.h"
#include "row_ops.h"
#include "sweep.h"
#include "test_util.h"

using namespace kiln;

namespace {

using test::row_inputs;
using test::row_ops;
using test::RowOp;

// Relative error allowed: float32's vector exp/log/rsqrt on cpu (a few ulp) compounded over a
// row's sum; the 16-bit types an ulp or two of their own.
double tolerance(Dtype d) {
  if (d == float16) return 4e-3;
  if (d == bfloat16) return 3e-2;
  if (d == float64) return 1e-12;
  return 2e-5;
}

CompiledFunction compiled(const RowOp& op) {
  return compile(
      [op](const std::vector<Array>& in) { return std::vector<Array>{op(in[0], in[1], in[2])}; });
}

// op compiled on `dev` against op compiled on the reference (which runs the row kernel's
// passes, the kernels fusion made before row kernels).
void expect_matches_reference(const std::string& name, const RowOp& op, const std::string& dev,
                              Dtype d, int64_t rows, int64_t len) {
  SCOPED_TRACE(name + " " + d.name() + " " + std::to_string(rows) + "x" + std::to_string(len) +
               " on " + dev);
  std::vector<Array> in = row_inputs(d, rows, len, static_cast<unsigned>(rows * 131 + len));
  CompiledFunction f = compiled(op);
  std::vector<double> want;
  {
    StreamScope scope(device("reference"));
    want = test::values(f(in)[0]);
  }
  StreamScope scope(device(dev));
  Array got = f(in)[0];
  ASSERT_EQ(got.dtype(), d);
  std::vector<double> g = test::values(got);
  ASSERT_EQ(g.size(), want.size());
  double tol = tolerance(d);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i)
    if (!(std::abs(g[i] - want[i]) <= tol * (1 + std::abs(want[i])))) {
      ADD_FAILURE() << "element " << i << ": got " << g[i] << ", want " << want[i];
      ++bad;
    }
}

// The lowered program's kernels, as `kiln inspect` lists them.
std::string kernels_of(const RowOp& op, const std::vector<Array>& in) {
  std::string text = compiled(op).lower(in).as_text();
  return text.substr(text.find("kernels:"));
}

const Dtype kFloats[] = {float16, bfloat16, float32, float64};
// Around 8 and 16 lanes (AVX2, AVX-512), the cpu backend's 256-point tile, work-groups of 64
// and 256, and a row of 16 KB.
const int64_t kLengths[] = {1, 7, 8, 9, 17, 63, 65, 255, 257, 1000, 1025, 4096};

}  // namespace

// Every op, dtype and row length on every backend against the reference: a sample in make
// test (device kernels build cold), all of it in make test-long. The opencl and vulkan cases
// follow KILN_TEST_DEVICE_SWEEP as the other device sweeps do (`make sanitize` samples them:
// under ASan their full run alone would take most of CI's time).
TEST(RowKernels, EveryBackendDtypeAndLengthMatchesReference) {
  std::vector<std::string> devs;
  for (const char* d : {"cpu", "opencl", "vulkan"})
    if (test::backend_available(d)) devs.push_back(d);
  size_t per_dev = row_ops().size() * std::size(kFloats) * std::size(kLengths);
  test::CaseSample cpu_runs = test::case_sample(per_dev, 4);
  for (const std::string& dev : devs) {
    test::Sweep dev_runs = test::device_sweep(0, static_cast<int>(per_dev), 2);
    SCOPED_TRACE(dev + ": " + (dev == "cpu" ? cpu_runs.trace : dev_runs.trace));
    auto chosen = [&](size_t j) {
      if (dev == "cpu") return cpu_runs(j);
      return j >= dev_runs.first && j < dev_runs.first + static_cast<uint64_t>(dev_runs.count);
    };
    size_t i = 0;
    for (const auto& [name, op] : row_ops())
      for (Dtype d : kFloats)
        for (int64_t len : kLengths)
          if (chosen(i++)) expect_matches_reference(name, op, dev, d, 3, len);
  }
}

// The quick check in make test: each op in float32 and float16 on cpu, walked and as passes,
// and softmax in float32 on every device backend.
TEST(RowKernels, CpuWalkAndPassesMatchReference) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "the cpu backend is not built";
  for (const auto& [name, op] : row_ops()) {
    for (Dtype d : {float32, float16}) {
      expect_matches_reference(name, op, "cpu", d, 33, 257);
      setenv("KILN_ROW_WALK_BYTES", "0", 1);  // passes: read when the kernels compile
      expect_matches_reference(name, op, "cpu", d, 5, 65);
      unsetenv("KILN_ROW_WALK_BYTES");
    }
    if (name != "softmax") continue;
    for (const char* dev : {"opencl", "vulkan"})
      if (test::backend_available(dev)) expect_matches_reference(name, op, dev, float32, 4, 65);
  }
}

// Each of the four is one row kernel when compiled.
TEST(RowKernels, EachOpIsOneRowKernel) {
  std::vector<Array> in = row_inputs(float32, 4, 64, 1);
  for (const auto& [name, op] : row_ops()) {
    SCOPED_TRACE(name);
    std::string k = kernels_of(op, in);
    EXPECT_EQ(k.find("kernel rows_"), k.rfind("kernel ")) << k;  // the only kernel
    EXPECT_NE(k.find(name == "rms_norm" ? " rows 2" : " rows 3"), std::string::npos) << k;
  }
}

TEST(RowKernels, CpuLineIsTheRowBytes) {
  Kernel k = [] {
    std::vector<Array> in = row_inputs(float32, 2, 1000, 1);
    std::string text = kernels_of(row_ops()[0].second, in);
    text = text.substr(text.find("kernel "));  // the reader keeps a view of it
    TextReader r(text, "test");
    return read_kernel(r);
  }();
  // x read and the output written along the row: 8 bytes per element.
  EXPECT_EQ(cpu::row_bytes(k), 8000);
  setenv("KILN_ROW_WALK_BYTES", "7999", 1);
  EXPECT_FALSE(cpu::row_walk_fits(k));
  setenv("KILN_ROW_WALK_BYTES", "8000", 1);
  EXPECT_TRUE(cpu::row_walk_fits(k));
  setenv("KILN_ROW_WALK_BYTES", "lots", 1);
  test::expect_error([&] { cpu::row_walk_fits(k); }, {"KILN_ROW_WALK_BYTES=lots", "byte count"});
  unsetenv("KILN_ROW_WALK_BYTES");
  EXPECT_TRUE(cpu::row_walk_fits(k));  // no line unless one is set
}

// Row fusion needs rows that are contiguous: a softmax over axis 0 keeps its three kernels (and
// its values; the column reductions keep the cpu backend's tiled walk); a shapeless compile
// keeps the passes apart (one kernel for every shape).
TEST(RowKernels, ColumnsAndShapelessStaySeparate) {
  std::vector<Array> in = row_inputs(float32, 6, 5, 2);
  auto col =
      compile([](const std::vector<Array>& a) { return std::vector<Array>{softmax(a[0], 0)}; });
  std::string text = col.lower(in).as_text();
  EXPECT_EQ(text.find("kernel rows_"), std::string::npos) << text;
  CompileOptions opts;
  opts.shapeless = true;
  auto free =
      compile([](const std::vector<Array>& a) { return std::vector<Array>{softmax(a[0])}; }, opts);
  text = free.lower(in).as_text();
  EXPECT_EQ(text.find("kernel rows_"), std::string::npos) << text;
  std::vector<double> want = test::values(softmax(in[0], 0));
  test::expect_near(test::values(col(in)[0]), want, 1e-5);
  test::expect_near(test::values(free(in)[0]), test::values(softmax(in[0])), 1e-5);
}

// A row kernel in an AOT artifact reads back as the same kernel and runs.
TEST(RowKernels, ArtifactRoundTrip) {
  std::vector<Array> in = row_inputs(float32, 3, 10, 3);
  Executable e = compiled(row_ops()[2].second).lower(in).compile();
  Executable back = Executable::from_artifact(e.artifact());
  EXPECT_EQ(back.as_text(), e.as_text());
  test::expect_near(test::values(back(in)[0]), test::values(nn::layer_norm(in[0], in[1], in[2])),
                    1e-5);
}

// What makes a row kernel ill-formed is refused by validate() and by the artifact reader.
TEST(RowKernels, MalformedRowKernelsAreRefused) {
  auto read = [](const std::string& text) {
    TextReader r(text, "test");
    return read_kernel(r);
  };
  const std::string head =
      "kernel k domain(2,4) rows 2\n"
      "  b0: in float32 [4,1]+0\n"
      "  b1: out float32 [1,0]+0\n"
      "  b2: out float32 [4,1]+0\n";
  const std::string max_pass =
      "  pass reduce max over last 1\n"
      "  v0: float32 = load b0\n"
      "  v1: float32 = reduce v0\n"
      "  store b1 <- v1\n";
  const std::string map_pass =
      "  pass\n"
      "  v0: float32 = load b0\n"
      "  v1: float32 = load b1\n"
      "  v2: float32 = subtract v0 v1\n"
      "  store b2 <- v2\n";
  Kernel ok = read(head + max_pass + map_pass);
  EXPECT_EQ(ok.row_axes(), 1);
  EXPECT_TRUE(ok.pass_kernel(0).buffers[1].output);
  EXPECT_FALSE(ok.pass_kernel(1).buffers[1].output);
  EXPECT_NE(ok.hash(), ok.pass_kernel(0).hash());
  // The map pass first: it loads b1 before the pass that stores it.
  test::expect_error([&] { read(head + map_pass + max_pass); }, {"loads b1 before"});
  // b1 stored by both passes.
  test::expect_error(
      [&] {
        read(head + max_pass +
             "  pass reduce sum over last 1\n  v0: float32 = load b0\n"
             "  v1: float32 = reduce v0\n  store b1 <- v1\n  store b2 <- v0\n");
      },
      {"stored twice"});
  // Passes that reduce different axes.
  test::expect_error(
      [&] {
        read(
            "kernel k domain(2,4) rows 2\n  b0: in float32 [4,1]+0\n"
            "  b1: out float32 [0,0]+0\n  b2: out float32 [1,0]+0\n" +
            std::string("  pass reduce max over last 2\n  v0: float32 = load b0\n"
                        "  v1: float32 = reduce v0\n  store b1 <- v1\n") +
            "  pass reduce max over last 1\n  v0: float32 = load b0\n"
            "  v1: float32 = reduce v0\n  store b2 <- v1\n");
      },
      {"different axes"});
  // A body outside the passes.
  test::expect_error(
      [&] {
        read(
            "kernel k domain(2,4) rows 1\n  b0: in float32 [4,1]+0\n  b1: out float32 [4,1]+0\n"
            "  v0: float32 = load b0\n  pass\n  v0: float32 = load b0\n  store b1 <- v0\n");
      },
      {"outside its passes"});
}

TEST(RowKernels, NormsCheckTheirArguments) {
  Array x = ones({3, 4});
  test::expect_error([&] { nn::layer_norm(x, ones({3})); }, {"layer_norm", "weight", "(4)"});
  test::expect_error([&] { nn::layer_norm(x, ones({4}), ones({2, 4})); }, {"bias", "(4)"});
  test::expect_error([&] { nn::rms_norm(ones({})); }, {"rms_norm", "0-d"});
  // The unscaled forms: mean 0 and variance 1 per row; rms 1 per row.
  Array y = nn::layer_norm(array(std::vector<float>{1, 2, 3, 4}, {1, 4}));
  test::expect_near(test::values(y), {-1.3416355, -0.4472118, 0.4472118, 1.3416355}, 1e-5);
  Array r = nn::rms_norm(array(std::vector<float>{3, 4}, {1, 2}), {}, 0.0);
  test::expect_near(test::values(r), {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)}, 1e-6);
}
