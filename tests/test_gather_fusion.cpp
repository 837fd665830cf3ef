// A gather fused into the kernel that reads it (backends/kernel_ir.h ValueKind::Gather,
// compile/fusion_plan.cpp): hand-built Gather kernels on every backend and dtype against the
// reference interpreter (shared and per-row indices, negative, out-of-range and 64-bit indices,
// runtime dims), their text form and checks, then compiled take / take_along_axis feeding
// element-wise chains and reductions on every backend, shapeless, under grad, and the plans
// that must (and must not) fuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <random>

#include "backends/kernel_text.h"
#include "compile/lower.h"
#include "graph/array_node.h"
#include "graph/trace_state.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using kdiff::Bytes;

const std::vector<Dtype> kAll = {bool_,  int8,    int32,    int64,   uint8,  uint32,
                                 uint64, float16, bfloat16, float32, float64};

std::vector<const char*> devices() {
  std::vector<const char*> out;
  for (const char* dev : {"cpu", "opencl", "vulkan"})
    if (test::backend_available(dev)) out.push_back(dev);
  return out;
}

// Indices of every kind the rule covers (both ends, one past them, 2^32 off, the int64
// extremes), then random ones in [-n - 3, n + 3].
std::vector<int64_t> indices(size_t count, int64_t n, uint64_t seed) {
  const int64_t k32 = int64_t{1} << 32;
  std::vector<int64_t> odd = {0,    n - 1,   n,         -1,        -n,        -n - 1,  k32,
                              -k32, k32 + 1, INT64_MAX, INT64_MIN, INT32_MAX, -k32 - 1};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(-n - 3, n + 3);
  std::vector<int64_t> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = i < odd.size() ? odd[i] : pick(rng);
  return out;
}

// out[o, j, i] = table[o, idx, i] over the domain (outer, m, inner): idx = ids[j] (shared) or
// ids[o, j, i] (per-row); with `runtime` every dim, stride and the gather's step and extent are
// launch parameters (the shapeless form).
struct GatherCase {
  int64_t outer, n, inner, m;
  bool shared;
};

Kernel gather_kernel(const GatherCase& c, Dtype d, bool runtime, std::vector<int64_t>& params) {
  auto dim = [&](int64_t v) {
    if (!runtime || v == 0) return Dim::constant(v);
    params.push_back(v);
    return Dim::runtime(static_cast<int32_t>(params.size()) - 1);
  };
  Kernel k;
  k.name = "gather_test";
  k.domain = {dim(c.outer), dim(c.m), dim(c.inner)};
  k.buffers.push_back({d, false, {{dim(c.n * c.inner), Dim::constant(0), dim(1)}, dim(0)}});
  IndexMap idx = c.shared ? IndexMap{{Dim::constant(0), dim(1), Dim::constant(0)}, dim(0)}
                          : IndexMap{{dim(c.m * c.inner), dim(c.inner), dim(1)}, dim(0)};
  k.buffers.push_back({int64, false, idx});
  k.buffers.push_back({d, true, {{dim(c.m * c.inner), dim(c.inner), dim(1)}, dim(0)}});
  Value ids;
  ids.kind = ValueKind::Load, ids.dtype = int64, ids.buffer = 1;
  Value g;
  g.kind = ValueKind::Gather, g.dtype = d, g.buffer = 0, g.a = 0;
  g.step = dim(c.inner), g.extent = dim(c.n);
  k.body = {ids, g};
  k.stores = {{2, 1}};
  k.validate();
  return k;
}

void expect_gather_matches_reference(const char* dev, const GatherCase& c, Dtype d, bool runtime,
                                     uint64_t seed) {
  SCOPED_TRACE(std::string(d.name()) + " on " + dev + " outer " + std::to_string(c.outer) + " n " +
               std::to_string(c.n) + " inner " + std::to_string(c.inner) + " m " +
               std::to_string(c.m) + (c.shared ? " shared" : " per-row") +
               (runtime ? " runtime dims" : ""));
  std::vector<int64_t> params;
  Kernel k = gather_kernel(c, d, runtime, params);
  size_t count = static_cast<size_t>(c.shared ? c.m : c.outer * c.m * c.inner);
  std::vector<Bytes> init = {kdiff::sample(d, static_cast<size_t>(c.outer * c.n * c.inner), seed),
                             kdiff::to_bytes(indices(count, c.n, seed)),
                             Bytes(static_cast<size_t>(c.outer * c.m * c.inner) * d.size(), 0)};
  std::vector<Bytes> got = kdiff::run(backend_for(device(dev)), k, init, params);
  std::vector<Bytes> want = kdiff::run(kdiff::ref_backend(), k, init, params);
  EXPECT_EQ(kdiff::compare(got[2], want[2], d, {}), "");
}

TEST(GatherFusion, GatherValuesReadBackFromTheirListingAndAreChecked) {
  std::vector<int64_t> params;
  Kernel k = gather_kernel({2, 9, 5, 6, true}, float32, true, params);
  std::string text = k.str();
  TextReader r(text, "test");
  Kernel back = read_kernel(r);
  EXPECT_EQ(back, k);
  EXPECT_EQ(back.hash(), k.hash());
  EXPECT_NE(k.str().find("gather b0 v0 step p"), std::string::npos) << k.str();
  Kernel other = k;
  other.body[1].step = Dim::constant(5);
  EXPECT_NE(other.hash(), k.hash());  // the step is structure
  EXPECT_FALSE(other == k);

  Kernel bad = k;
  bad.body[0].dtype = int32, bad.buffers[1].dtype = int32;
  test::expect_error([&] { bad.validate(); }, {"gather index is not int64"});
  bad = k;
  bad.body[1].buffer = 2;
  test::expect_error([&] { bad.validate(); }, {"gather from an output buffer"});
  // The table's rows must all lie inside its buffer: 9 rows of 5, 2 outer blocks, is 90.
  std::vector<int64_t> sizes = {89, 6, 60};
  test::expect_error([&] { k.validate_launch(params, sizes); }, {"buffer b0 reaches", "of 89"});
  sizes[0] = 90;
  k.validate_launch(params, sizes);
  // Launch words are not trusted (a loaded artifact): a span past int64 raises, never wraps.
  std::vector<int64_t> huge = params;
  huge[k.body[1].step.param] = int64_t{1} << 62;
  test::expect_error([&] { k.validate_launch(huge, sizes); }, {"spans more than int64"});
}

// ---- compiled ---------------------------------------------------------------------------------

using Fn = std::function<std::vector<Array>(const std::vector<Array>&)>;

// Values of dtype d on the reference device: small integers (non-negative for unsigned, 0/1 for
// bool), or floats of either sign.
Array values(Dtype d, const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<size_t>(shape_size(s)));
  for (double& x : v) {
    if (d.is_bool())
      x = static_cast<double>(rng() % 2);
    else if (d.is_float())
      x = std::normal_distribution<double>(0, 3)(rng);
    else
      x = static_cast<double>(rng() % 60) - (d.is_unsigned() ? 0 : 30);
  }
  return array(v, s, d, device("reference"));
}

Array ids(const Shape& s, int64_t n, uint64_t seed) {
  return array(indices(static_cast<size_t>(shape_size(s)), n, seed), s, device("reference"));
}

// Relative tolerance of float results computed in another order (none for integers).
double tolerance(Dtype d) { return d.is_float() ? kdiff::sum_rtol(d) : 0; }

void expect_close(const Array& got, const Array& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double scale = 0;  // sums near 0 are compared at the output's magnitude
  for (double x : w) scale = std::isfinite(x) ? std::max(scale, std::fabs(x)) : scale;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i])) ||
          std::fabs(g[i] - w[i]) <= rtol * (std::fabs(w[i]) + scale))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", want " << w[i];
      return;
    }
}

// `fn` compiled on every backend against `fn` run eagerly (one kernel per primitive, the
// library gather) on the reference interpreter.
void expect_compiled_matches_eager(const Fn& fn, const std::vector<Array>& in, double rtol,
                                   const std::string& what,
                                   std::vector<const char*> devs = {"reference", "cpu", "opencl",
                                                                    "vulkan"}) {
  std::vector<Array> want;
  {
    StreamScope scope(device("reference"));
    want = fn(in);
    eval(want);
  }
  auto f = compile(fn);
  for (const char* dev : devs) {
    if (!test::backend_available(dev)) continue;
    std::vector<Array> got;
    {
      StreamScope scope(device(dev));
      got = f(in);
      eval(got);
    }
    for (size_t i = 0; i < got.size(); ++i)
      expect_close(got[i], want[i], rtol, what + " on " + dev + ", output " + std::to_string(i));
  }
}

// The fused form computes take(W, ids) * s + b in float32 registers and rounds once; eagerly
// each op rounds: the float results agree within a reassociation tolerance.
void expect_scale_shift_and_sums_match(Dtype d, uint64_t seed,
                                       const std::vector<const char*>& devs) {
  SCOPED_TRACE(d.name());
  Array w = values(d, {50, 24}, seed), s = values(d, {24}, seed + 1), b = values(d, {24}, seed + 2);
  Array i = ids({70}, 50, seed + 3);
  Fn fn = [](const std::vector<Array>& x) {
    Array g = take(x[0], x[1], 0);
    // An element-wise chain, a row sum (over each gathered row) and a bag sum (over the
    // gathered axis: the table rows the indices pick, added up).
    return std::vector<Array>{g * x[2] + x[3], sum(g, 1), sum(take(x[0], x[1], 0) * x[2], 0)};
  };
  expect_compiled_matches_eager(fn, {w, i, s, b}, d.is_half() ? 0x1.0p-6 : tolerance(d),
                                "scale, shift and sums", devs);
}

// take and take_along_axis (shared and per-row indices, of every kind the rule covers) read
// by element-wise chains: one rounding in both forms (a gather and one add, or a select for
// bool), so exact.
void expect_take_chains_match(Dtype d, uint64_t seed, const std::vector<const char*>& devs) {
  SCOPED_TRACE(d.name());
  Array w = values(d, {37, 5}, seed), b = values(d, {5}, seed + 1);
  Array along = ids({37, 3}, 5, seed + 2), shared = ids({41}, 37, seed + 3);
  Fn chain = [&](const std::vector<Array>& x) {
    Array t = take(x[0], x[1], 0), u = take_along_axis(x[0], x[2], 1);
    if (d.is_bool()) return std::vector<Array>{where(t, x[3], t), logical_not(u)};
    return std::vector<Array>{t + x[3], u + take(x[3], array<int64_t>({4, -1, 9}, {3}), 0)};
  };
  expect_compiled_matches_eager(chain, {w, shared, along, b}, 0, "take chain", devs);
}

TEST(GatherFusion, CompiledEmbeddingScaleShiftAndReductionsMatchEager) {
  expect_scale_shift_and_sums_match(float32, 200, {"reference", "cpu", "opencl", "vulkan"});
}

// take over ids of any rank (an embedding of [batch, seq] tokens): the gather reads its ids
// through a reshape of them. Compiling it once failed every backend with "internal: lowering
// reads reshape ... before anything produced it" (the gather stored, its reshaped ids not).
TEST(GatherFusion, CompiledTakeOfIdsOfAnyRankMatchesEager) {
  Array w = values(float32, {50, 6}, 300), s = values(float32, {6}, 301),
        b = values(float32, {6}, 302);
  for (const Shape& shape : {Shape{4, 7}, Shape{2, 3, 5}}) {
    SCOPED_TRACE(to_string(shape));
    Array i = ids(shape, 50, 303);
    Fn fn = [](const std::vector<Array>& x) {
      Array e = take(x[0], x[1], 0);
      return std::vector<Array>{e * x[2] + x[3], sum(take(x[0], x[1], 0), -1), e};
    };
    expect_compiled_matches_eager(fn, {w, i, s, b}, tolerance(float32), "take of N-D ids");
  }
}

// take_along_axis broadcasts a table with extent-1 axes against its indices; a fused gather
// reads such a table in place through the broadcast (a table computed in the function, or a
// leaf), also when the indices broadcast too, on every backend against eager.
TEST(GatherFusion, CompiledTakeAlongAxisOfABroadcastTableMatchesEager) {
  Array w = values(float32, {1, 40}, 700), w3 = values(float32, {3, 1, 9}, 701);
  Array i = ids({6, 5}, 40, 702), j = ids({1, 4, 2}, 9, 703);
  Fn fn = [](const std::vector<Array>& x) {
    return std::vector<Array>{
        take_along_axis(x[0], x[1], 1) * 2.0f, take_along_axis(exp(x[0]), x[1], -1) + 1.0f,
        sum(take_along_axis(x[2], x[3], 2), 0), take_along_axis(x[2] * 3.0f, x[3], 2) - 1.0f};
  };
  expect_compiled_matches_eager(fn, {w, i, w3, j}, tolerance(float32), "broadcast tables");
}

// A sweep: make test runs a sample of the (device, dtype) cases, make test-long every one.
// Hand-built Gather kernels (constant and runtime dims) against the reference interpreter, then
// compiled take chains and reductions against eager evaluation.
TEST(GatherFusion, EveryBackendAndDtypeMatchesReference) {
  std::vector<const char*> devs = devices();
  test::CaseSample runs = test::case_sample(devs.size() * kAll.size(), 2);
  SCOPED_TRACE(runs.trace);
  const std::vector<GatherCase> cases = {{1, 7, 1, 20, true},
                                         {3, 5, 3, 17, true},
                                         {2, 9, 5, 16, false},
                                         {1, 300, 1, 257, false},
                                         {2, 40, 17, 33, true}};
  for (size_t di = 0; di < devs.size(); ++di)
    for (size_t ti = 0; ti < kAll.size(); ++ti) {
      if (!runs(di * kAll.size() + ti)) continue;
      Dtype d = kAll[ti];
      uint64_t seed = 1000 * (di * kAll.size() + ti);
      // Runtime dims: one compiled kernel per index form serves every case.
      for (size_t ci = 0; ci < cases.size(); ++ci)
        for (bool runtime : {false, true})
          if (runtime || ci % 2 == 0)
            expect_gather_matches_reference(devs[di], cases[ci], d, runtime, seed++);
      expect_take_chains_match(d, seed++, {devs[di]});
      if (!d.is_bool()) expect_scale_shift_and_sums_match(d, seed, {devs[di]});
    }
}

TEST(GatherFusion, ShapelessCompileServesNewShapes) {
  auto f = compile(
      [](const std::vector<Array>& x) {
        return std::vector<Array>{take(x[0], x[1], 1) * 2.0f + 1.0f,
                                  sum(take_along_axis(x[0], x[2], 0), 1)};
      },
      CompileOptions{.shapeless = true});
  uint64_t seed = 300;
  for (auto [rows, cols, m] :
       {std::tuple<int64_t, int64_t, int64_t>{6, 9, 4}, {11, 3, 13}, {2, 40, 1}}) {
    SCOPED_TRACE("shape " + std::to_string(rows) + " x " + std::to_string(cols));
    Array w = values(float32, {rows, cols}, seed++);
    Array i = ids({m}, cols, seed++), j = ids({3, cols}, rows, seed++);
    std::vector<Array> want = {take(w, i, 1) * 2.0f + 1.0f, sum(take_along_axis(w, j, 0), 1)};
    for (const char* dev : devices()) {
      StreamScope scope(device(dev));
      std::vector<Array> got = f({w, i, j});
      for (size_t k = 0; k < got.size(); ++k)
        expect_close(got[k], want[k], 1e-6, std::string(dev) + " output " + std::to_string(k));
    }
  }
  EXPECT_EQ(f.cache_size(), 1u);  // one trace served every shape
}

// take's indices keep their shape in the graph (the gather takes any rank), so a shapeless
// compile follows each call's ids: an embedding of [batch, seq] tokens whose batch and length
// change between calls. Once it reshaped them and raised on the second shape.
TEST(GatherFusion, ShapelessTakeFollowsIdsOfAnyRankAndShape) {
  Fn fn = [](const std::vector<Array>& x) {
    Array e = take(x[0], x[1], 0);
    return std::vector<Array>{e * x[2] + x[3], sum(e, -1), take(x[0], x[1], 1) * 2.0f};
  };
  CompiledFunction f = compile(fn, CompileOptions{.shapeless = true});
  uint64_t seed = 500;
  auto check = [&](const Shape& ids_shape, int64_t rows) {
    SCOPED_TRACE("ids " + to_string(ids_shape) + ", table " + std::to_string(rows) + " x 6");
    Array w = values(float32, {rows, 6}, seed++), i = ids(ids_shape, 6, seed++);
    Array s = values(float32, {6}, seed++), b = values(float32, {6}, seed++);
    std::vector<Array> want;
    {
      StreamScope scope(device("reference"));
      want = fn({w, i, s, b});
    }
    for (const char* dev : {"reference", "cpu", "opencl", "vulkan"}) {
      if (!test::backend_available(dev)) continue;
      StreamScope scope(device(dev));
      std::vector<Array> got = f({w, i, s, b});
      for (size_t k = 0; k < got.size(); ++k)
        expect_close(got[k], want[k], tolerance(float32),
                     std::string(dev) + " output " + std::to_string(k));
    }
  };
  for (auto [ids_shape, rows] :
       {std::pair<Shape, int64_t>{{2, 3}, 8}, {{4, 7}, 8}, {{1, 1}, 30}, {{5, 2}, 6}})
    check(ids_shape, rows);
  EXPECT_EQ(f.cache_size(), 1u);  // one trace served every [batch, seq]
  check({}, 7);                   // 0-d ids drop the axis
  check({3, 2, 5}, 9);
  EXPECT_EQ(f.cache_size(), 3u);  // a trace per rank
}

// vmap over ids of any rank, mapped (each row its own ids: per-row indices over the flattened
// ids, split after) or not (shared as they are), against a loop over the rows.
TEST(GatherFusion, VmapOfTakeOverIdsOfAnyRankMatchesALoop) {
  Array w = values(float32, {5, 7}, 600);
  Fn one = [](const std::vector<Array>& x) { return std::vector<Array>{take(x[0], x[1], 1)}; };
  for (const Shape& row_ids : {Shape{}, Shape{4}, Shape{2, 4}, Shape{2, 1, 3}}) {
    SCOPED_TRACE("ids per row " + to_string(row_ids));
    Shape batched = row_ids;
    batched.insert(batched.begin(), 3);
    Array i = ids(batched, 7, 601), table = values(float32, {3, 5, 7}, 602);
    for (bool table_mapped : {false, true}) {
      std::vector<Array> got = vmap(one, {table_mapped ? 0 : -1, 0})({table_mapped ? table : w, i});
      std::vector<Array> rows;
      for (int64_t r = 0; r < 3; ++r) {
        Array t = table_mapped ? take(table, array<int64_t>({r}, {}), 0) : w;
        rows.push_back(one({t, take(i, array<int64_t>({r}, {}), 0)})[0]);
      }
      expect_close(got[0], stack(rows, 0), 0, table_mapped ? "table mapped" : "table shared");
    }
  }
  // Ids not mapped stay shared: the table's rows each take the same [2, 4] ids.
  Array i = ids({2, 4}, 7, 603), table = values(float32, {3, 5, 7}, 604);
  std::vector<Array> got = vmap(one, {0, -1})({table, i});
  std::vector<Array> rows;
  for (int64_t r = 0; r < 3; ++r)
    rows.push_back(one({take(table, array<int64_t>({r}, {}), 0), i})[0]);
  expect_close(got[0], stack(rows, 0), 0, "ids unmapped");
}

TEST(GatherFusion, GradThroughAFusedGatherMatchesEager) {
  Array w = values(float32, {9, 4}, 400), s = values(float32, {4}, 401);
  Array i = array<int64_t>({3, -1, 3, 20, 0, -30}, {6}, device("reference"));
  Fn loss = [](const std::vector<Array>& x) {
    return std::vector<Array>{sum(exp(take(x[0], x[1], 0) * x[2]))};
  };
  std::vector<Array> want = grad(loss, {0, 2})({w, i, s});
  std::vector<Array> got = compile(grad(loss, {0, 2}))({w, i, s});
  for (size_t k = 0; k < got.size(); ++k)
    expect_close(got[k], want[k], 1e-5, "gradient " + std::to_string(k));
}

// ---- plans --------------------------------------------------------------------------------------

struct TaskCounts {
  int kernels = 0, natives = 0;
  int64_t largest_slot = 0;  // elements of the plan's largest buffer
};

// Lowers `fn` as compile does (fusion on) over placeholders of the given shapes and dtypes.
TaskCounts plan_of(const Fn& fn, const std::vector<std::pair<Shape, Dtype>>& inputs) {
  std::vector<Array> ph;
  for (const auto& [s, d] : inputs)
    ph.push_back(make_array(s, d, Op::Placeholder, {}, {},
                            ResolvedStream{current_stream(), StreamOrigin::Default}));
  std::vector<Array> outs;
  {
    TraceStateGuard tracing;
    outs = fn(ph);
  }
  LowerOptions lo;
  lo.eager = false;
  lo.fuse = true;
  LoweredGraph lg = lower(outs, ph, lo);
  TaskCounts c;
  for (const Slot& s : lg.plan.slots()) c.largest_slot = std::max(c.largest_slot, s.elements);
  for (const Task& t : lg.plan.tasks()) {
    c.kernels += t.kind == TaskKind::Kernel;
    c.natives += t.kind == TaskKind::Native;
  }
  return c;
}

TEST(GatherFusion, PlansReadGathersInsideTheirConsumersKernels) {
  StreamScope scope(device("reference"));
  std::vector<std::pair<Shape, Dtype>> in = {
      {{100, 16}, float32}, {{8}, int64}, {{16}, float32}, {{16}, float32}};
  Fn embed = [](const std::vector<Array>& x) {
    return std::vector<Array>{take(x[0], x[1], 0) * x[2] + x[3]};
  };
  TaskCounts c = plan_of(embed, in);
  EXPECT_EQ(c.natives, 0);  // no stored gather
  EXPECT_EQ(c.kernels, 1);
  Fn bag = [](const std::vector<Array>& x) {
    return std::vector<Array>{sum(take(x[0], x[1], 0), 1)};
  };
  c = plan_of(bag, in);
  EXPECT_EQ(c.natives, 0);
  EXPECT_EQ(c.kernels, 1);
  // Ids of any rank (an embedding of [batch, seq] tokens): the gather reads its [4, 8] ids at
  // the coordinates of their own two axes.
  std::vector<std::pair<Shape, Dtype>> in2 = {
      {{100, 16}, float32}, {{4, 8}, int64}, {{16}, float32}, {{16}, float32}};
  c = plan_of(embed, in2);
  EXPECT_EQ(c.natives, 0) << "2-D ids";
  EXPECT_EQ(c.kernels, 1) << "2-D ids";
  // take_along_axis of a table with an extent-1 axis broadcast against the indices reads the
  // table in place through the broadcast (it was a kernel of its own storing the broadcast).
  Fn along = [](const std::vector<Array>& x) {
    return std::vector<Array>{take_along_axis(x[0], x[1], 1) * 2.0f};
  };
  c = plan_of(along, {{{1, 100}, float32}, {{6, 5}, int64}});
  EXPECT_EQ(c.natives, 0) << "broadcast table";
  EXPECT_EQ(c.kernels, 1) << "broadcast table";
  Fn along_computed = [](const std::vector<Array>& x) {
    return std::vector<Array>{take_along_axis(exp(x[0]), x[1], 1) * 2.0f};
  };
  c = plan_of(along_computed, {{{1, 100}, float32}, {{6, 5}, int64}});
  EXPECT_EQ(c.natives, 0) << "broadcast of a computed table";
  EXPECT_EQ(c.kernels, 2) << "broadcast of a computed table: exp stored, then read through";
  EXPECT_EQ(c.largest_slot, 100) << "the [1, 100] table is stored, not its [6, 100] broadcast";
  // A gather that is an output, or that a matmul reads, is stored by its library call.
  Fn output = [](const std::vector<Array>& x) {
    Array g = take(x[0], x[1], 0);
    return std::vector<Array>{g, g * x[2]};
  };
  c = plan_of(output, in);
  EXPECT_EQ(c.natives, 1);
  Fn matmul_reads = [](const std::vector<Array>& x) {
    return std::vector<Array>{matmul(take(x[0], x[1], 0), reshape(x[2], {16, 1}))};
  };
  EXPECT_EQ(plan_of(matmul_reads, in).natives, 1);
  // KILN_GATHER_FUSION=0 keeps the stored gather (the benchmark's baseline).
  setenv("KILN_GATHER_FUSION", "0", 1);
  c = plan_of(embed, in);
  unsetenv("KILN_GATHER_FUSION");
  EXPECT_EQ(c.natives, 1);
  EXPECT_EQ(c.kernels, 1);
  setenv("KILN_GATHER_FUSION", "yes", 1);
  test::expect_error([&] { plan_of(embed, in); }, {"KILN_GATHER_FUSION"});
  unsetenv("KILN_GATHER_FUSION");
}

}  // namespace
}  // namespace kiln
