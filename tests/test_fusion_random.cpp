// Differential test of fusion: many seeded random graphs (mixed dtypes, broadcasts, views,
// reductions with and without epilogues, concatenation) computed by kiln::compile (fused) and
// eagerly (one kernel per primitive) must agree. Both run on the device under test; the eager
// run on `reference` is the oracle. A failure prints the seed and the program that reproduces it.
#include <map>
#include <random>
#include <sstream>

#include "compile/graph_walk.h"
#include "compile/kernel_emit.h"
#include "compile/view.h"
#include "graph/trace_state.h"
#include "test_util.h"

using namespace kiln;

namespace {

struct Program {
  unsigned seed;
  int rank, extent;
  std::vector<Dtype> input_dtypes;
  std::vector<Shape> input_shapes;
  std::string text;  // the reproducer
};

// Builds the program's outputs from its inputs, drawing ops from a generator seeded the same way
// each time, so the compiled and the eager run build the same graph.
std::vector<Array> build(const Program& p, const std::vector<Array>& inputs, std::string* text) {
  std::mt19937 rng(p.seed * 7919 + 1);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  std::vector<Array> pool = inputs;
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) names.push_back("in" + std::to_string(i));
  std::ostringstream os;
  int steps = 3 + pick(10);
  for (int s = 0; s < steps; ++s) {
    int ia = pick(static_cast<int>(pool.size())), ib = pick(static_cast<int>(pool.size()));
    // Bool operands take part as int32 (arithmetic on bool is an error by design).
    auto num = [](const Array& x) { return x.dtype() == bool_ ? astype(x, int32) : x; };
    Array a = num(pool[ia]), b = num(pool[ib]);
    std::string an = names[ia], bn = names[ib], expr;
    Array r = a;
    int axis = p.rank ? pick(p.rank) : 0;
    switch (pick(17)) {
      case 0: r = exp(tanh(a)), expr = "exp(tanh(" + an + "))"; break;
      case 1: r = a * b + 1.0f, expr = an + "*" + bn + "+1"; break;
      case 2: r = a - b, expr = an + "-" + bn; break;
      case 3:
        r = divide(a, 1.0f + b * b), expr = "divide(" + an + ",1+" + bn + "*" + bn + ")";
        break;
      case 4:
        r = where(a > b, a, b * 2), expr = "where(" + an + ">" + bn + "," + an + "," + bn + "*2)";
        break;
      case 5:  // bounded arguments: sin of a reassociated 1e15-sized sum is noise
        r = maximum(sin(tanh(a) * 3.0f), cos(tanh(b) * 3.0f));
        expr = "maximum(sin(tanh(" + an + ")*3),cos(tanh(" + bn + ")*3))";
        break;
      case 6: {
        const Dtype to[] = {float32, int32, float16, bfloat16, int8, uint8, uint32, uint64, int64};
        Dtype d = to[pick(9)];
        r = astype(a, d), expr = "astype(" + an + "," + d.name() + ")";
        break;
      }
      case 7: r = erf(a) + sigmoid(b), expr = "erf(" + an + ")+sigmoid(" + bn + ")"; break;
      case 8:
        if (p.rank == 0) break;
        r = sum(a, axis, true), expr = "sum(" + an + "," + std::to_string(axis) + ",keep)";
        break;
      case 9:
        if (p.rank == 0) break;
        r = max(a * b, axis, true) + a, expr = "max(" + an + "*" + bn + ",keep)+" + an;
        break;
      case 10:
        if (p.rank == 0) break;
        r = mean(exp(astype(a, float32)), axis, true) * 2.0f, expr = "mean(exp(" + an + "))*2";
        break;
      case 11: {
        if (p.rank < 2) break;
        std::vector<int> perm(p.rank);
        for (int i = 0; i < p.rank; ++i) perm[i] = (i + 1) % p.rank;
        r = transpose(broadcast_to(a, Shape(p.rank, p.extent)), perm) + b;
        expr = "transpose(broadcast(" + an + "))+" + bn;
        break;
      }
      case 12: {
        if (p.rank == 0) break;
        Array full_a = broadcast_to(a, Shape(p.rank, p.extent));
        std::vector<int64_t> start(p.rank, 0), stop(p.rank, p.extent), step(p.rank, 1);
        start[axis] = -1, stop[axis] = -p.extent - 1, step[axis] = -1;  // reverse one axis
        r = slice(full_a, start, stop, step) * b, expr = "reverse(" + an + ")*" + bn;
        break;
      }
      case 13: {
        Array full_a = broadcast_to(a + 1.0f, Shape(p.rank, p.extent));
        r = reshape(flatten(full_a), Shape(p.rank, p.extent)) - b;
        expr = "reshape(flatten(" + an + "+1))-" + bn;
        break;
      }
      case 14: {
        if (p.rank == 0 || p.extent < 2) break;
        Array full_a = broadcast_to(a, Shape(p.rank, p.extent));
        std::vector<int64_t> s0(p.rank, 0), e0(p.rank, p.extent), s1(p.rank, 0),
            e1(p.rank, p.extent);
        e0[axis] = 1, s1[axis] = 1;
        r = concatenate({slice(full_a, s1, e1) * 2.0f, slice(full_a, s0, e0)}, axis);
        expr = "rotate(" + an + ")";
        break;
      }
      case 15:
        if (p.rank == 0) break;
        r = astype(argmax(a + b, axis, true), float32), expr = "argmax(" + an + "+" + bn + ")";
        break;
      default: r = abs(a) + floor(b * 3.0f), expr = "abs(" + an + ")+floor(" + bn + "*3)"; break;
    }
    if (expr.empty()) continue;
    pool.push_back(r);
    names.push_back(std::string("v").append(std::to_string(pool.size() - 1)));  // GCC bug 105329
    os << names.back() << " = " << expr << "\n";
  }
  int nout = 1 + pick(3);
  std::vector<Array> out;
  os << "outputs:";
  for (int i = 0; i < nout; ++i) {
    int k =
        static_cast<int>(pool.size()) - 1 - pick(std::min<int>(3, static_cast<int>(pool.size())));
    out.push_back(pool[k]);
    os << " " << names[k];
  }
  if (text) *text = os.str();
  return out;
}

Program make_program(unsigned seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  Program p;
  p.seed = seed;
  p.rank = pick(4);
  p.extent = 1 + pick(5);
  int n = 1 + pick(3);
  // Inputs of the 16-bit floats and the byte types; the wider unsigned types come in through
  // astype (each extra input type multiplies the distinct kernels the cpu run compiles).
  const Dtype dts[] = {float32, float32, float64, int32, bool_, float16, bfloat16, uint8, int8};
  for (int i = 0; i < n; ++i) {
    Shape s(p.rank, p.extent);
    for (auto& e : s)
      if (pick(3) == 0) e = 1;  // broadcast axes
    p.input_shapes.push_back(s);
    p.input_dtypes.push_back(dts[pick(static_cast<int>(std::size(dts)))]);
  }
  return p;
}

std::vector<Array> make_inputs(const Program& p, const Device& d) {
  std::vector<Array> in;
  for (size_t i = 0; i < p.input_shapes.size(); ++i) {
    Array u =
        random::uniform(-2.0, 2.0, p.input_shapes[i], float32, random::key(p.seed * 31 + i), d);
    Dtype dt = p.input_dtypes[i];
    Array x = dt == bool_ ? u > 0.0f : dt.is_int() ? astype(u * 3.0f, dt) : astype(u, dt);
    eval(x);
    in.push_back(x);
  }
  return in;
}

bool same_value(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol * (1 + std::fabs(b));
}

bool uses_half(const std::string& text) { return text.find("float16") != std::string::npos; }

// A program touching bfloat16 or float16 (an input or an astype) compares its outputs with that
// type's tolerance: on cpu their rare one-ulp differences (float32 vector math, then rounded)
// flow into every later value.
double tolerance(const std::string& text, double tol) {
  if (text.find("bfloat16") != std::string::npos) return 3e-2;
  if (uses_half(text)) return 4e-3;
  return tol;
}

// Runs `count` programs compiled (fused) on `under_test` against an oracle on reference: the
// eager program (one kernel per primitive), or with `compiled_oracle` the same compiled program.
// Programs using float16/bfloat16 are compared only with the compiled oracle: fused kernels
// round them where the kernels store (scalar_ops.h), so they legitimately differ from eager
// code, by more than any tolerance after a floor or a comparison.
// Programs with seeds first, first + 1, ..., first + count - 1.
void run_programs(const Device& under_test, int count, double base_tol, bool compiled_oracle,
                  unsigned first = 1) {
  int failures = 0, compared = 0;
  for (unsigned seed = first; seed < first + static_cast<unsigned>(count) && failures < 5; ++seed) {
    Program p = make_program(seed);
    std::string text;
    build(p, make_inputs(p, device("reference")), &text);
    std::ostringstream in;
    for (size_t i = 0; i < p.input_dtypes.size(); ++i)
      in << "in" << i << ": " << p.input_dtypes[i] << " " << to_string(p.input_shapes[i]) << "\n";
    text = in.str() + text;
    if (!compiled_oracle && uses_half(text)) continue;
    auto f = compile([&](const std::vector<Array>& in) { return build(p, in, nullptr); });
    std::vector<Array> oracle;
    {
      StreamScope scope(device("reference"));
      auto inputs = make_inputs(p, device("reference"));
      oracle = compiled_oracle ? f(inputs) : build(p, inputs, nullptr);
      eval(oracle);
    }
    std::vector<Array> got;
    try {
      StreamScope scope(under_test);
      got = f(make_inputs(p, under_test));
      eval(got);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "seed " << seed << " raised " << e.what() << "\n" << text;
      ++failures;
      continue;
    }
    ++compared;
    ASSERT_EQ(got.size(), oracle.size());
    double tol = tolerance(text, base_tol);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].shape(), oracle[i].shape()) << "seed " << seed << "\n" << text;
      ASSERT_EQ(got[i].dtype(), oracle[i].dtype()) << "seed " << seed << "\n" << text;
      auto g = got[i].to_vector<double>(), w = oracle[i].to_vector<double>();
      for (size_t j = 0; j < g.size(); ++j)
        if (!same_value(g[j], w[j], tol)) {
          ADD_FAILURE() << "seed " << seed << ", output " << i << ", element " << j << ": got "
                        << g[j] << ", want " << w[j] << " (rank " << p.rank << ", extent "
                        << p.extent << ")\n"
                        << text;
          ++failures;
          break;
        }
    }
  }
  // The generator must not drift into skipping most programs. Against the eager oracle about
  // half use float16/bfloat16 and are skipped, so a window of seeds may compare fewer than half.
  EXPECT_GT(compared, compiled_oracle ? count / 2 : count / 3);
}

}  // namespace

// Fused (compiled) against one-kernel-per-primitive, both on the reference interpreter: every
// value is rounded to its dtype at every op in both, so results agree exactly. (Programs using
// float16/bfloat16 are skipped here: see run_programs.)
TEST(FusionRandom, CompiledMatchesEagerOnReference) {
  test::Sweep sw = test::sweep(1, 500, 150);
  SCOPED_TRACE(sw.trace);
  run_programs(device("reference"), sw.count, 0, false, static_cast<unsigned>(sw.first));
}

// Fused kernels JIT-compiled for the cpu backend against the same fused program on the
// reference interpreter (which the test above ties to eager semantics). The cpu backend's
// float32 transcendental functions are vector approximations (a few ulp, see
// backends/cpu/vector_math.h) and its float reductions may reassociate, so values agree to a
// relative 2e-4 (float32 error compounds through up to a dozen chained ops); ints and bools
// exactly. float16/bfloat16 values are float32 results rounded, so they rarely differ, but by an
// ulp of their type when they do (2^-11, 2^-8): programs using them allow 4e-3 / 3e-2.
TEST(FusionRandom, CompiledOnCpuMatchesReference) {
  if (!test::backend_available("cpu")) GTEST_SKIP() << "the cpu backend is not built";
  // 300 programs in full: with eleven dtypes nearly every program compiles new kernels (~4.5 of
  // them, ~15 ms of LLVM each on a cold cache); the reference run above covers 500.
  test::Sweep sw = test::sweep(1, 300, 80);
  SCOPED_TRACE(sw.trace);
  run_programs(device("cpu"), sw.count, 2e-4, true, static_cast<unsigned>(sw.first));
}

// The planner's own promises, checked on the random programs with tight buffer bounds (so the
// split path runs often): every emitted kernel loads at most max_buffers buffers and validates,
// every output is stored by exactly one kernel, and every stored node has its kernel.
TEST(FusionRandom, PlannedGroupsKeepTheirBounds) {
  int split_programs = 0;
  for (unsigned seed = 1; seed <= 300; ++seed) {
    Program p = make_program(seed);
    std::vector<Array> ph;
    for (size_t i = 0; i < p.input_shapes.size(); ++i)
      ph.push_back(make_array(p.input_shapes[i], p.input_dtypes[i], Op::Placeholder, {}, {},
                              ResolvedStream{current_stream(), StreamOrigin::Default}));
    std::vector<Array> outs;
    {
      TraceStateGuard tracing;
      outs = build(p, ph, nullptr);
    }
    LeafFn leaf = [](const ArrayNode& n) {
      return n.op == Op::Placeholder || n.op == Op::Constant || n.data != nullptr;
    };
    std::vector<Array> order = topological_order(outs, leaf);
    for (int max_buffers : {3, 4, 24}) {
      FusionOptions fo;
      fo.max_buffers = max_buffers;
      SameLaneFn same = [](const ArrayNode&, const ArrayNode&) { return true; };
      FusionPlan plan = plan_fusion(order, outs, leaf, same, fo);
      std::map<const ArrayNode*, int> stored;
      for (const FusionGroup& g : plan.groups) {
        if (g.kind == FusionGroup::Kind::Library) {
          ++stored[g.roots[0]];
          continue;
        }
        FusedStep s = emit_kernel(g, plan.materialized, leaf, false);
        ASSERT_NO_THROW(s.kernel->validate()) << "seed " << seed;
        int loads = 0;
        for (size_t b = 0; b < s.buffers.size(); ++b)
          if (s.kernel->buffers[b].output)
            stored[s.buffers[b]] += g.kind == FusionGroup::Kind::Concatenate ? 0 : 1;
          else
            ++loads;
        if (g.kind == FusionGroup::Kind::Concatenate) stored[g.roots[0]] = 1;
        EXPECT_LE(loads, max_buffers) << "seed " << seed << " kernel " << s.kernel->name;
      }
      for (const Array& o : outs)
        if (!leaf(*o.node())) {
          EXPECT_EQ(stored[o.node().get()], 1) << "seed " << seed;
        }
      for (const ArrayNode* m : plan.materialized) {
        EXPECT_EQ(stored[m], 1) << "seed " << seed;
      }
      if (max_buffers == 3 && plan.materialized.size() > 1 + outs.size()) ++split_programs;
    }
  }
  EXPECT_GT(split_programs, 20);  // the tight bound must actually make the planner split
}

#ifdef KILN_HAVE_VULKAN_BACKEND
#include "backends/vulkan/vulkan_backend.h"
#else
namespace kiln {
inline int64_t vulkan_validation_messages() { return 0; }
}  // namespace kiln
#endif

// Fused kernels compiled to GLSL compute shaders on vulkan:0 (lavapipe here) against the same
// fused program on the reference interpreter. GPU float32 math (the driver's exp/log/sin/cos,
// Kiln's erf series) is within a few ulp, float sums accumulate in double, as on cpu: the same
// tolerances as the cpu run.
TEST(FusionRandom, CompiledOnVulkanMatchesReference) {
  if (!test::backend_available("vulkan")) GTEST_SKIP() << "no usable vulkan device";
  int64_t messages = vulkan_validation_messages();  // the layer is on in tests (CMakeLists)
  test::Sweep sw = test::device_sweep(1, 500, 60);
  SCOPED_TRACE(sw.trace);
  run_programs(device("vulkan"), sw.count, 2e-4, true, static_cast<unsigned>(sw.first));
  EXPECT_EQ(vulkan_validation_messages(), messages) << "validation problems (printed above)";
}

// Fused kernels compiled to OpenCL C (PoCL here) against the same fused program on the
// reference interpreter, with the cpu backend's tolerances (OpenCL's float32 builtins are
// within a few ulp; the work-group trees reassociate float sums). 500 programs under long tests
// (~4.5 kernels each; KILN_OPENCL_RANDOM_GRAPHS changes the total), a random sample otherwise,
// in three shards, so that ctest runs them on separate cores: a cold PoCL build costs ~1.5 s
// per program (~4 min per shard of the full sweep on a cold cache).
void run_opencl_shard(int shard) {
  if (!test::backend_available("opencl")) GTEST_SKIP() << "no usable OpenCL device";
  test::Sweep sw = test::device_sweep(1, 500, 24);
  if (const char* e = std::getenv("KILN_OPENCL_RANDOM_GRAPHS")) sw.count = std::atoi(e);
  SCOPED_TRACE(sw.trace);
  int begin = sw.count * shard / 3, end = sw.count * (shard + 1) / 3;
  run_programs(device("opencl"), end - begin, 2e-4, true, static_cast<unsigned>(sw.first + begin));
}

TEST(FusionRandom, CompiledOnOpenclMatchesReference) { run_opencl_shard(0); }
TEST(FusionRandom, CompiledOnOpenclMatchesReferenceShard2) { run_opencl_shard(1); }
TEST(FusionRandom, CompiledOnOpenclMatchesReferenceShard3) { run_opencl_shard(2); }

// A reshape reads its input through the reader's view when it adds or drops unit axes or splits
// axes (row-major): input coordinate = the parts' coordinates combined by their extents. One
// that merges axes is not a view (its kernel reads the input stored, row-major).
TEST(FusionViews, ReshapesThatSplitAxesComposeIntoViews) {
  View v = View::identity(4);  // a kernel over the output [2, 3, 1, 4]
  v.offset = {1, 0, 0, 2};     // read at an offset, as a slice would
  View in;
  ASSERT_TRUE(v.reshape_input({6, 4}, {2, 3, 1, 4}, in));  // [6, 4] split into [2, 3], [4]
  EXPECT_EQ(in.coeff, (std::vector<std::vector<int64_t>>{{3, 1, 0, 0}, {0, 0, 0, 1}}));
  EXPECT_EQ(in.offset, (std::vector<int64_t>{3, 2}));
  ASSERT_TRUE(v.reshape_input({1, 24}, {2, 3, 1, 4}, in));  // everything from one axis
  EXPECT_EQ(in.coeff[1], (std::vector<int64_t>{12, 4, 0, 1}));
  EXPECT_EQ(in.offset, (std::vector<int64_t>{0, 14}));
  ASSERT_TRUE(v.reshape_input({2, 3, 4}, {2, 3, 1, 4}, in));  // a unit axis added
  EXPECT_EQ(in.coeff[2], (std::vector<int64_t>{0, 0, 0, 1}));
  View w = View::identity(2);  // over [6, 4]
  EXPECT_FALSE(w.reshape_input({2, 3, 4}, {6, 4}, in)) << "a merge of [2, 3] is not affine";
  EXPECT_FALSE(w.reshape_input({4, 6}, {6, 4}, in)) << "[4, 6] -> [6, 4] splits across axes";
  EXPECT_FALSE(w.reshape_input({0, 24}, {0, 4}, in)) << "[0, 24] -> [0, 4] merges";
  View e = View::identity(3);  // over [0, 1, 4]: an empty array, a unit axis added
  ASSERT_TRUE(e.reshape_input({0, 4}, {0, 1, 4}, in));
  EXPECT_EQ(in.coeff, (std::vector<std::vector<int64_t>>{{1, 0, 0}, {0, 0, 1}}));
}

// Split views under shapeless compile: the split's inner extent, a coefficient of the view,
// follows each call's shape (a plan per shape, kernels shared), on every backend.
TEST(FusionViews, ShapelessSplitsFollowEachShape) {
  auto fn = [](const std::vector<Array>& x) {
    Array z = reshape(x[0] * 2.0f, {2, -1});
    Array t = transpose(reshape(x[0] + 1.0f, {-1, 2}), {1, 0});
    return std::vector<Array>{sum(z, 0) + 1.0f, t * 3.0f};
  };
  for (const char* dev : {"reference", "cpu", "opencl", "vulkan"}) {
    if (!test::backend_available(dev)) continue;
    SCOPED_TRACE(dev);
    StreamScope scope(device(dev));
    CompiledFunction f = compile(fn, {.shapeless = true});
    for (int64_t n : {6, 10, 14, 4, 1000}) {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i * 7 % 13);
      std::vector<Array> in = {array(v, {n})};
      std::vector<Array> got = f(in), want = fn(in);
      for (size_t k = 0; k < got.size(); ++k) {
        ASSERT_EQ(got[k].shape(), want[k].shape()) << "n " << n << " output " << k;
        EXPECT_EQ(got[k].to_vector<float>(), want[k].to_vector<float>()) << "n " << n;
      }
    }
  }
}
