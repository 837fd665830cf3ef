// Differential tests of the opencl backend (OpenCL C on PoCL here) against the reference
// interpreter: every op and dtype through the Backend interface, reductions (work-group trees
// and the split scheme), runtime extents and launch scalars, matmul, the program cache, and
// errors. Kernels are batched (one kernel computes every unary op of a dtype into its own
// output) because each distinct kernel costs PoCL ~0.5 s to build on a cold cache.
//
// Tolerances (README "opencl"): arithmetic, casts, comparisons, max/min/argmax, random uniform
// and integer work are bitwise equal; float32 exp/log/sin/cos/tanh/sigmoid use OpenCL's
// builtins (within 4 ulp here), erf Kiln's rational fit (5 ulp); float64 functions
// are PoCL's libm against glibc (2 ulp); float sums and products are reassociated by the
// work-group tree (rtol as the cpu backend's).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "backends/extension.h"
#include "backends/opencl/codegen.h"
#include "backends/opencl/device.h"
#include "backends/opencl/opencl_backend.h"
#include "backends/opencl/program_cache.h"
#include "graph/log.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace kdiff;

bool have_opencl() { return test::backend_available("opencl"); }

#define REQUIRE_OPENCL() \
  if (!have_opencl()) GTEST_SKIP() << "no usable OpenCL device"

Backend& cl_backend() { return backend_for(device("opencl")); }

Dtype unary_dtype(UnaryOp u, Dtype d) { return u == UnaryOp::LogicalNot ? bool_ : d; }

bool float_only(UnaryOp u) {
  return u != UnaryOp::Negative && u != UnaryOp::Abs && u != UnaryOp::LogicalNot &&
         u != UnaryOp::Floor && u != UnaryOp::Ceil && u != UnaryOp::BitwiseInvert;
}

// Runs `k` on opencl and reference and compares output buffer b with tols[b].
void compare_outputs(const Kernel& k, const std::vector<Bytes>& init,
                     const std::vector<Tolerance>& tols, const std::vector<std::string>& what,
                     const std::vector<int64_t>& params = {}) {
  std::vector<Bytes> got = run(cl_backend(), k, init, params);
  std::vector<Bytes> want = run(ref_backend(), k, init, params);
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    if (!k.buffers[b].output) continue;
    std::string diff = compare(got[b], want[b], k.buffers[b].dtype, tols[b]);
    EXPECT_EQ(diff, "") << what[b] << "\n" << k.str();
  }
}

TEST(OpenclBackend, DevicesAndSelection) {
  bool listed = false;
  for (const DeviceInfo& d : devices())
    if (d.device.backend == "opencl") {
      listed = true;
      if (d.available) {
        EXPECT_NE(d.description.find("compute units"), std::string::npos) << d.description;
        EXPECT_NE(d.description.find("fp64"), std::string::npos) << d.description;
        EXPECT_NE(d.description.find("int64"), std::string::npos) << d.description;
      } else {
        EXPECT_FALSE(d.reason.empty());
      }
    }
  EXPECT_TRUE(listed);
  REQUIRE_OPENCL();
  EXPECT_EQ(device("opencl"), (Device{"opencl", 0}));
  EXPECT_EQ(device("opencl:0"), (Device{"opencl", 0}));
  EXPECT_THROW(device("opencl:57"), Error);  // never falls back to another device
  try {
    device("opencl:57");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("opencl:57"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(cl_backend().uses_host_memory());
  EXPECT_FALSE(cl_backend().create_queue(0)->runs_inline());
  EXPECT_THROW(cl_backend().create_queue(57), Error);
}

TEST(OpenclBackend, EveryUnaryOpAndDtype) {
  REQUIRE_OPENCL();
  const int64_t n = 203;
  for (Dtype d : kAll) {
    Kernel k;
    k.name = std::string("unary_") + d.name();
    k.domain = {Dim::constant(n)};
    int x = load(k, d, map_of({1}));
    std::vector<Tolerance> tols(1);
    std::vector<std::string> what(1);
    for (int op = 0; op < kNumUnaryOps; ++op) {
      auto u = static_cast<UnaryOp>(op);
      if ((float_only(u) && !d.is_float()) || !ir_defined(u, d)) continue;
      Value v;
      v.kind = ValueKind::Unary, v.unary = u, v.dtype = unary_dtype(u, d), v.a = x;
      if (u == UnaryOp::LogicalNot && d != bool_) {  // logical_not takes bools
        Value c;
        c.kind = ValueKind::Cast, c.dtype = bool_, c.a = x;
        v.a = add(k, c);
      }
      store(k, v.dtype, map_of({1}), add(k, v));
      Tolerance tol;
      if (d == float32 && approx_f32(u)) tol = {Tolerance::Ulp, 5};  // erf: Kiln's fit
      if (d == float64 && approx_f32(u)) tol = {Tolerance::Ulp, 2};
      if (d.is_half() && approx_f32(u)) tol = {Tolerance::Ulp, 1};
      tols.push_back(tol);
      what.push_back(std::string(op_name(u)) + " " + d.name());
    }
    std::vector<Bytes> init = {sample(d, n, 7 + d.size())};
    for (size_t b = 1; b < k.buffers.size(); ++b)
      init.push_back(Bytes(n * k.buffers[b].dtype.size()));
    compare_outputs(k, init, tols, what);
  }
}

// The float16 form of contiguous float32 element-wise kernels on CPU devices (16 lanes at a
// time, a scalar tail): every operation it takes, on a domain long enough that each work-item
// runs vector iterations and a tail, with wild values (NaN, inf, -0, huge), against the
// reference. Kernels of other dtypes or with other operations (sin and cos among them: PoCL's
// 16-lane versions are off on large arguments) keep the scalar form. Under
// KILN_OPENCL_GPU_LAYOUT=1 (ctest OpenclGpuLayoutMaps) the same kernels take a GPU's float4
// form, four points per work-item, the last item's partial step one by one.
TEST(OpenclBackend, VectorFormOfElementwiseKernels) {
  REQUIRE_OPENCL();
  const int64_t n = 100003;
  Kernel u;
  u.name = "unary_vector_f32";
  u.domain = {Dim::constant(n)};
  int x = load(u, float32, map_of({1}));
  std::vector<Tolerance> tols(1);
  std::vector<std::string> what(1);
  for (UnaryOp op :
       {UnaryOp::Negative, UnaryOp::Abs, UnaryOp::Exp, UnaryOp::Log, UnaryOp::Sqrt, UnaryOp::Tanh,
        UnaryOp::Erf, UnaryOp::Sigmoid, UnaryOp::Floor, UnaryOp::Ceil}) {
    Value v;
    v.kind = ValueKind::Unary, v.unary = op, v.dtype = float32, v.a = x;
    store(u, float32, map_of({1}), add(u, v));
    tols.push_back(approx_f32(op) ? Tolerance{Tolerance::Ulp, 5} : Tolerance{});
    what.push_back(op_name(op));
  }
  std::vector<Bytes> init = {sample(float32, n, 31)};
  for (size_t b = 1; b < u.buffers.size(); ++b) init.push_back(Bytes(n * 4));
  compare_outputs(u, init, tols, what);

  Kernel bk;
  bk.name = "binary_vector_f32";
  bk.domain = {Dim::constant(n)};
  int a = load(bk, float32, map_of({1})), b = load(bk, float32, map_of({1}));
  Value c;  // a constant operand too (the vector form broadcasts constants)
  c.kind = ValueKind::Constant, c.dtype = float32, c.constant = Scalar::of(0.25f);
  int k = add(bk, c);
  std::vector<Tolerance> btols(2);
  std::vector<std::string> bwhat(2);
  for (BinaryOp op : {BinaryOp::Add, BinaryOp::Subtract, BinaryOp::Multiply, BinaryOp::Divide,
                      BinaryOp::Maximum, BinaryOp::Minimum}) {
    for (int rhs : {b, k}) {
      Value v;
      v.kind = ValueKind::Binary, v.binary = op, v.dtype = float32, v.a = a, v.b = rhs;
      store(bk, float32, map_of({1}), add(bk, v));
      btols.push_back({});
      bwhat.push_back(std::string(op_name(op)) + (rhs == k ? " constant" : ""));
    }
  }
  std::vector<Bytes> binit = {sample(float32, n, 32), sample(float32, n, 33)};
  for (size_t i = 2; i < bk.buffers.size(); ++i) binit.push_back(Bytes(n * 4));
  compare_outputs(bk, binit, btols, bwhat);
}

TEST(OpenclBackend, EveryBinaryOpAndDtype) {
  REQUIRE_OPENCL();
  const int64_t n = 211;
  for (Dtype d : kAll) {
    Kernel k;
    k.name = std::string("binary_") + d.name();
    k.domain = {Dim::constant(n)};
    int x = load(k, d, map_of({1})), y = load(k, d, map_of({1}));
    std::vector<Tolerance> tols(2);
    std::vector<std::string> what(2);
    for (int op = 0; op < kNumBinaryOps; ++op) {
      auto bop = static_cast<BinaryOp>(op);
      if (!ir_defined(bop, d)) continue;
      Dtype out = is_comparison(bop) || is_logical(bop) ? bool_ : d;
      Value v;
      v.kind = ValueKind::Binary, v.binary = bop, v.dtype = out, v.a = x, v.b = y;
      store(k, out, map_of({1}), add(k, v));
      Tolerance tol;
      if (d == float64 && bop == BinaryOp::Power) tol = {Tolerance::Ulp, 2};
      tols.push_back(tol);
      what.push_back(std::string(op_name(bop)) + " " + d.name());
    }
    // int64 INT64_MIN / -1 is undefined in the oracle: keep int64 data tame.
    bool wild = d != int64;
    std::vector<Bytes> init = {sample(d, n, 3 + d.size(), wild), sample(d, n, 5 + d.size(), wild)};
    for (size_t b = 2; b < k.buffers.size(); ++b)
      init.push_back(Bytes(n * k.buffers[b].dtype.size()));
    compare_outputs(k, init, tols, what);
  }
}

TEST(OpenclBackend, EveryCastAndSelect) {
  REQUIRE_OPENCL();
  const int64_t n = 197;
  for (Dtype from : kAll) {
    Kernel k;
    k.name = std::string("cast_from_") + from.name();
    k.domain = {Dim::constant(n)};
    int x = load(k, from, map_of({1}));
    int c = load(k, bool_, map_of({1}));
    std::vector<Tolerance> tols(2);
    std::vector<std::string> what(2);
    for (Dtype to : kAll) {
      Value v;
      v.kind = ValueKind::Cast, v.dtype = to, v.a = x;
      store(k, to, map_of({1}), add(k, v));
      tols.push_back({});
      what.push_back(std::string("cast ") + from.name() + " -> " + to.name());
    }
    Value neg;
    neg.kind = ValueKind::Unary, neg.unary = UnaryOp::Negative, neg.dtype = from, neg.a = x;
    Value s;
    s.kind = ValueKind::Select, s.dtype = from, s.a = c, s.b = x, s.c = add(k, neg);
    store(k, from, map_of({1}), add(k, s));
    tols.push_back({});
    what.push_back(std::string("select ") + from.name());
    std::vector<Bytes> init = {sample(from, n, 17), sample(bool_, n, 1)};
    for (size_t b = 2; b < k.buffers.size(); ++b)
      init.push_back(Bytes(n * k.buffers[b].dtype.size()));
    compare_outputs(k, init, tols, what);
  }
}

TEST(OpenclBackend, RandomIndexAndLaunchScalars) {
  REQUIRE_OPENCL();
  Kernel k;
  k.name = "random";
  k.domain = {Dim::constant(37), Dim::constant(41)};
  Value idx;
  idx.kind = ValueKind::Index, idx.dtype = int64, idx.map = map_of({41, 1}, 5);
  int iv = add(k, idx);
  std::vector<Tolerance> tols;
  std::vector<std::string> what;
  for (Dtype d : {float32, float64, float16, bfloat16})
    for (RandomDist dist : {RandomDist::Uniform, RandomDist::Normal}) {
      Value r;
      r.kind = ValueKind::Random, r.dtype = d, r.dist = dist, r.a = iv;
      r.param = 0;  // the key is a launch word
      store(k, d, map_of({41, 1}), add(k, r));
      Tolerance tol;
      if (d == float64 && dist == RandomDist::Normal) tol = {Tolerance::Ulp, 2};
      tols.push_back(tol);
      what.push_back(std::string("random ") + d.name());
    }
  // Launch scalars: a float32, a float16 and an int32 constant read from params.
  for (Dtype d : {float32, float16, int32, float64}) {
    Value c;
    c.kind = ValueKind::Constant, c.dtype = d,
    c.param = d == float32   ? 1
              : d == float16 ? 2
              : d == int32   ? 3
                             : 4;
    Value sum;
    sum.kind = ValueKind::Binary, sum.binary = BinaryOp::Add, sum.dtype = d;
    Value ci;
    ci.kind = ValueKind::Cast, ci.dtype = d, ci.a = iv;
    sum.a = add(k, ci), sum.b = add(k, c);
    store(k, d, map_of({41, 1}), add(k, sum));
    tols.push_back({});
    what.push_back(std::string("index + scalar ") + d.name());
  }
  std::vector<Bytes> init;
  for (const KernelBuffer& b : k.buffers) init.push_back(Bytes(37 * 41 * b.dtype.size()));
  for (uint64_t key : {0x1234567ULL, 0xdeadbeefcafeULL}) {
    std::vector<int64_t> params = {static_cast<int64_t>(key), launch_word(Scalar::of(2.5f)),
                                   launch_word(Scalar::of(0.1).cast(float16)), -7,
                                   launch_word(Scalar::of(1e-3))};
    compare_outputs(k, init, tols, what, params);
  }
}

Tolerance reduce_tol(Dtype d, ReduceOp op) {
  bool fsum = d.is_float() && (op == ReduceOp::Sum || op == ReduceOp::Prod);
  if (fsum) return {Tolerance::Rel, 0, sum_rtol(d), 1e-6};
  if (d.is_float() && (op == ReduceOp::Max || op == ReduceOp::Min)) return {Tolerance::Value};
  return {};
}

// Every op and dtype, each in one of four walks (rows, columns, mixed strided, full), rotating
// so every walk meets every op and most dtypes: one kernel per (op, dtype).
TEST(OpenclBackend, EveryReductionAndDtype) {
  REQUIRE_OPENCL();
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int>>> walks = {
      {{7, 33}, {1}}, {{7, 33}, {0}}, {{5, 4, 9}, {0, 2}}, {{1000}, {0}}};
  const int ops = static_cast<int>(ReduceOp::Argmax) + 1;
  // Each case is a cold OpenCL build (~1 s on PoCL): make test runs a random quarter of them.
  test::CaseSample runs = test::case_sample(ops * std::size(kAll), 14);
  SCOPED_TRACE(runs.trace);
  for (int op = 0; op < ops; ++op)
    for (size_t di = 0; di < std::size(kAll); ++di) {
      if (!runs(op * std::size(kAll) + di)) continue;
      Dtype d = kAll[di];
      auto rop = static_cast<ReduceOp>(op);
      auto [shape, axes] = walks[(op + di) % walks.size()];
      Kernel k = reduce_kernel(d, rop, shape, axes);
      int64_t n = 1, outn = 1;
      for (int64_t e : shape) n *= e;
      for (int i = 0; i < k.kept_axes(); ++i) outn *= k.domain[i].value;
      Tolerance tol = reduce_tol(d, rop);
      Dtype od = k.body[k.reduce->value].dtype;
      bool fsum = tol.kind == Tolerance::Rel;
      compare_outputs(k, {sample(d, n, op + 100, !fsum), Bytes(outn * od.size())}, {{}, tol},
                      {"", std::string(op_name(rop)) + " " + d.name()});
    }
}

// Many outputs: one work-item reduces each (kiln_rows), on rows and on columns.
TEST(OpenclBackend, ManyOutputsOneWorkItemEach) {
  REQUIRE_OPENCL();
  const std::tuple<ReduceOp, Dtype, int> cases[] = {{ReduceOp::Sum, float32, 1},
                                                    {ReduceOp::Argmax, float32, 0},
                                                    {ReduceOp::Max, float64, 1},
                                                    {ReduceOp::Prod, int32, 0},
                                                    {ReduceOp::Min, uint8, 1}};
  for (auto [rop, d, axis] : cases) {
    std::vector<int64_t> shape =
        axis == 1 ? std::vector<int64_t>{5000, 37} : std::vector<int64_t>{37, 5000};
    Kernel k = reduce_kernel(d, rop, shape, {axis});
    Dtype od = k.body[k.reduce->value].dtype;
    Tolerance tol = reduce_tol(d, rop);
    compare_outputs(k,
                    {sample(d, 5000 * 37, 40, tol.kind != Tolerance::Rel), Bytes(5000 * od.size())},
                    {{}, tol}, {"", std::string(op_name(rop)) + " " + d.name()});
  }
}

// The float16 form on CPU devices beyond one contiguous axis: a broadcast along the last axis
// (x - m of a row softmax), and row folds (sum, max, min; a sum with a broadcasting prologue)
// 16 lanes at a time. Enough rows for a work-item per row (kiln_rows), rows of 67 (not a
// multiple of 16) so runs start mid-row and every segment and fold has a tail; NaN and
// infinities in a few rows only, so some lanes meet them and others not.
TEST(OpenclBackend, VectorFormOfBroadcastsAndRowFolds) {
  REQUIRE_OPENCL();
  const int64_t rows = 2053, cols = 67;
  Bytes x = sample(float32, rows * cols, 51, false), m = sample(float32, rows, 52, false);
  auto put = [&](int64_t r, int64_t c, float v) {
    scalar::store(x.data(), float32, r * cols + c, {v, 0});
  };
  put(3, 500, NAN), put(5, 17, INFINITY), put(7, cols - 1, -INFINITY), put(9, 0, NAN);
  put(11, 20, INFINITY), put(11, 50, NAN), put(13, 33, -INFINITY), put(13, 40, INFINITY);
  auto value = [](Kernel& k, ValueKind kind, int op, int a, int b = -1) {
    Value v;
    v.kind = kind, v.dtype = float32, v.a = a, v.b = b;
    if (kind == ValueKind::Unary) v.unary = static_cast<UnaryOp>(op);
    if (kind == ValueKind::Binary) v.binary = static_cast<BinaryOp>(op);
    return add(k, v);
  };
  const int sub = static_cast<int>(BinaryOp::Subtract), div = static_cast<int>(BinaryOp::Divide);
  const int exp = static_cast<int>(UnaryOp::Exp);

  Kernel map;
  map.name = "broadcast_rows";
  map.domain = {Dim::constant(rows), Dim::constant(cols)};
  int a = load(map, float32, map_of({cols, 1})), b = load(map, float32, map_of({1, 0}));
  int e = value(map, ValueKind::Unary, exp, value(map, ValueKind::Binary, sub, a, b));
  store(map, float32, map_of({cols, 1}), value(map, ValueKind::Binary, div, e, b));
  compare_outputs(map, {x, m, Bytes(rows * cols * 4)}, {{}, {}, {Tolerance::Ulp, 5}},
                  {"", "", "exp(x - m) / m, m broadcast along rows"});

  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min}) {
    Kernel k = reduce_kernel(float32, op, {rows, cols}, {1});
    compare_outputs(k, {x, Bytes(rows * 4)}, {{}, reduce_tol(float32, op)},
                    {"", std::string("row ") + op_name(op)});
  }

  Kernel sumexp;
  sumexp.name = "row_sum_exp";
  sumexp.domain = {Dim::constant(rows), Dim::constant(cols)};
  a = load(sumexp, float32, map_of({cols, 1})), b = load(sumexp, float32, map_of({1, 0}));
  e = value(sumexp, ValueKind::Unary, exp, value(sumexp, ValueKind::Binary, sub, a, b));
  Value r;
  r.kind = ValueKind::Reduce, r.dtype = float32, r.a = e;
  int rv = add(sumexp, r);
  sumexp.reduce = Reduction{ReduceOp::Sum, 1, rv};
  store(sumexp, float32, map_of({1, 0}), rv);
  compare_outputs(sumexp, {x, m, Bytes(rows * 4)}, {{}, {}, reduce_tol(float32, ReduceOp::Sum)},
                  {"", "", "row sum of exp(x - m)"});
}

// Full reductions long enough for the split scheme (partials per work-group, then a combine),
// with an epilogue that uses a constant and a load; argmax splits too (partials carry positions).
TEST(OpenclBackend, FullReductionsSplitAcrossWorkGroups) {
  REQUIRE_OPENCL();
  const int64_t n = (int64_t{1} << 20) + 12345;
  const std::pair<ReduceOp, Dtype> cases[] = {{ReduceOp::Sum, float32},
                                              {ReduceOp::Max, float64},
                                              {ReduceOp::Argmax, float32},
                                              {ReduceOp::Min, int32},
                                              {ReduceOp::Sum, uint8}};
  for (auto [rop, d] : cases) {
    Kernel k;
    k.name = "full";
    k.domain = {Dim::constant(n)};
    Value c;
    c.kind = ValueKind::Constant, c.dtype = d, c.constant = Scalar::of(int64_t{1}).cast(d);
    int cv = add(k, c);
    int x = load(k, d, map_of({1}, 7));
    Value r;
    r.kind = ValueKind::Reduce, r.dtype = rop == ReduceOp::Argmax ? int64 : d, r.a = x;
    int rv = add(k, r);
    k.reduce = Reduction{rop, 1, rv};
    Dtype od = r.dtype;
    int e = load(k, od, map_of({0}, 2));
    Value sum;
    sum.kind = ValueKind::Binary, sum.binary = BinaryOp::Maximum, sum.dtype = od;
    sum.a = rv, sum.b = e;
    if (od == d) sum.binary = BinaryOp::Add, sum.b = cv;
    store(k, od, map_of({0}), add(k, sum));
    store(k, od, map_of({0}, 1), rv);
    Tolerance tol = reduce_tol(d, rop);
    Bytes data = sample(d, n + 7, 300 + static_cast<int>(rop), tol.kind != Tolerance::Rel);
    compare_outputs(k, {data, sample(od, 3, 5), Bytes(3 * od.size()), Bytes(3 * od.size())},
                    {{}, {}, tol, tol}, {"", "", "epilogue", "reduced"});
  }
}

TEST(OpenclBackend, RuntimeExtentsAndLargeLaunches) {
  REQUIRE_OPENCL();
  Kernel rt;
  rt.name = "runtime_2d";
  rt.domain = {Dim::runtime(0), Dim::runtime(1)};
  int a = load(rt, int32, {{Dim::runtime(1), Dim::constant(1)}, Dim::constant(3)});
  int b = load(rt, int32, {{Dim::constant(0), Dim::constant(1)}, Dim::constant(0)});
  Value v;
  v.kind = ValueKind::Binary, v.binary = BinaryOp::Multiply, v.dtype = int32, v.a = a, v.b = b;
  store(rt, int32, {{Dim::runtime(1), Dim::constant(1)}, Dim::constant(0)}, add(rt, v));
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 90'001}, {3, 5}, {1, 1}}) {
    compare_outputs(
        rt, {sample(int32, rows * cols + 3, 23), sample(int32, cols, 24), Bytes(rows * cols * 4)},
        {{}, {}, {}}, {"", "", "runtime 2-D multiply"}, {rows, cols});
  }
  // A row reduction over runtime extents, including an empty reduced extent (sum = 0).
  Kernel red;
  red.name = "runtime_rows";
  red.domain = {Dim::runtime(0), Dim::runtime(1)};
  int x = load(red, float32, {{Dim::runtime(1), Dim::constant(1)}, Dim::constant(0)});
  Value r;
  r.kind = ValueKind::Reduce, r.dtype = float32, r.a = x;
  int rv = add(red, r);
  red.reduce = Reduction{ReduceOp::Sum, 1, rv};
  store(red, float32, {{Dim::constant(1), Dim::constant(0)}, Dim::constant(0)}, rv);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{300, 1001}, {4, 0}})
    compare_outputs(red, {sample(float32, rows * cols + 1, 5, false), Bytes(rows * 4)},
                    {{}, {Tolerance::Rel, 0, 1e-6, 1e-6}}, {"", "runtime row sum"}, {rows, cols});
}

TEST(OpenclBackend, MatmulMatchesReference) {
  REQUIRE_OPENCL();
  // CLBlast builds its kernels cold for each dtype (~15 s on PoCL): make test runs two.
  const Dtype dtypes[] = {float32, float64, float16, int32};
  test::CaseSample runs = test::case_sample(std::size(dtypes), 2);
  SCOPED_TRACE(runs.trace);
  for (size_t di = 0; di < std::size(dtypes); ++di) {
    if (!runs(di)) continue;
    Dtype d = dtypes[di];
    const int64_t m = 17, n = 9, k = 33, batches = 3;
    Bytes a = sample(d, batches * m * k, 1, false), b = sample(d, k * n, 2, false);
    std::vector<Bytes> outs;
    for (Backend* be : {&cl_backend(), &ref_backend()}) {
      auto A = be->allocate(0, a.size()), B = be->allocate(0, b.size());
      auto C = be->allocate(0, batches * m * n * d.size());
      A->write(a.data(), 0, a.size());
      B->write(b.data(), 0, b.size());
      MatmulArgs args;
      args.dtype = d, args.m = m, args.n = n, args.k = k;
      for (int64_t i = 0; i < batches; ++i) {
        args.a_offsets.push_back(i * m * k);
        args.b_offsets.push_back(0);  // broadcast B
        args.c_offsets.push_back(i * m * n);
      }
      args.a = A.get(), args.b = B.get(), args.c = C.get();
      auto q = be->create_queue(0);
      if (EventPtr ev = q->enqueue_matmul(args)) ev->wait();
      Bytes c(C->bytes());
      C->read(c.data(), 0, c.size());
      outs.push_back(c);
    }
    Tolerance tol;
    if (d.is_float()) tol = {Tolerance::Rel, 0, sum_rtol(d), 1e-6};
    if (d == float32) tol.rtol = 2e-5;  // CLBlast sums in float32; the reference in double
    EXPECT_EQ(compare(outs[0], outs[1], d, tol), "") << "matmul " << d.name();
  }
}

// ---- errors and the program cache -----------------------------------------------------------

TEST(OpenclBackend, Float64WithoutTheExtensionIsAnError) {
  Kernel k = reduce_kernel(float64, ReduceOp::Sum, {8}, {0});
  try {
    opencl::generate(k, {false, true}, "opencl:0 (test)");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cl_khr_fp64"), std::string::npos) << e.what();
  }
  // float32 work still compiles: its sums accumulate in float.
  Kernel f = reduce_kernel(float32, ReduceOp::Sum, {8}, {0});
  EXPECT_EQ(opencl::generate(f, {false, true}, "x").source.find("double"), std::string::npos);
}

// Run by ctest with KILN_OPENCL_HIDE_FP64=1: the device then says fp64 no, float64 kernels
// raise kiln::Error, float32 ones still run and match.
TEST(OpenclNoFp64, Float64RaisesFloat32Runs) {
  const char* hide = std::getenv("KILN_OPENCL_HIDE_FP64");
  if (!hide || std::string(hide) != "1") GTEST_SKIP() << "needs KILN_OPENCL_HIDE_FP64=1";
  REQUIRE_OPENCL();
  for (const DeviceInfo& d : devices()) {
    if (d.device == Device{"opencl", 0}) {
      EXPECT_NE(d.description.find("fp64 no"), std::string::npos) << d.description;
    }
  }
  Array x = arange(0, 10, 1, float64), xf = arange(0, 10, 1, float32);
  eval({x, xf});
  {
    StreamScope s(device("opencl"));
    Array y = x * 2.0;
    EXPECT_THROW(eval(y), Error);
    Array z = xf * 2.0f;  // float32 sums accumulate in float without fp64
    EXPECT_EQ(sum(z).item<float>(), 90.0f);
  }
  // In one compiled call, the float64 kernel fails to build and fails only its output (the
  // shapes differ, so fusion keeps the two in separate kernels).
  Array xs = arange(0, 5, 1, float32);
  eval(xs);
  auto f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{in[0] * 3.0, in[1] * 3.0f};
  });
  StreamScope s(device("opencl"));
  std::vector<Array> out;
  try {
    out = f({x, xs});
    eval(out[1]);
  } catch (const Error& e) {
    ADD_FAILURE() << "the float32 output failed too: " << e.what();
  }
  if (out.size() == 2) {
    EXPECT_EQ(out[1].to_vector<float>()[3], 9.0f);
    try {
      eval(out[0]);
      ADD_FAILURE() << "the float64 output evaluated without fp64";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cl_khr_fp64"), std::string::npos) << e.what();
    }
  }
}

TEST(OpenclBackend, BuildFailuresCarryTheLog) {
  REQUIRE_OPENCL();
  auto devs = opencl::discover();
  ASSERT_TRUE(devs[0]->available);
  try {
    opencl::build_program(*devs[0], "__kernel void broken( { nonsense }", "broken_kernel");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("broken_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("build log"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error:"), std::string::npos) << "the compiler's own words: " << msg;
  }
}

// PoCL's clang prints "N warnings generated." to stderr for a build with warnings: Kiln's
// builds keep it off, and KILN_LOG=debug (ctest OpenclBuildLogsInTheDebugLog) shows the log.
TEST(OpenclBackend, BuildWarningsStayOffStderrUnlessDebug) {
  REQUIRE_OPENCL();
  auto devs = opencl::discover();
  ASSERT_TRUE(devs[0]->available);
  // A new source each run, so that neither Kiln's nor PoCL's cache skips the compiler.
  std::string src = "// run " + std::to_string(::getpid()) + " " +
                    std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
                    "\n__kernel void warns(__global int* x) { int a = x[0]; if ((a == 1)) x[1] = "
                    "2; a == 2; }\n";
  testing::internal::CaptureStderr();
  opencl::BuiltProgram p = opencl::build_program(*devs[0], src, "warning_kernel");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(p.from_cache);
  clReleaseProgram(p.program);
  if (logging::enabled(logging::Level::debug)) {
    EXPECT_NE(err.find("kiln: debug: opencl: built kernel warning_kernel"), std::string::npos)
        << err;
    EXPECT_NE(err.find("warning"), std::string::npos) << err;
  } else {
    EXPECT_EQ(err, "");
  }
}

TEST(OpenclBackend, ProgramCacheHitsAndRebuildsCorruptEntries) {
  REQUIRE_OPENCL();
  auto dir =
      std::filesystem::temp_directory_path() / ("kiln_cl_cache_test_" + std::to_string(::getpid()));
  std::string old = std::getenv("KILN_CACHE_DIR") ? std::getenv("KILN_CACHE_DIR") : "";
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  auto devs = opencl::discover();
  opencl::ClDevice& dev = *devs[0];
  std::string src = "__kernel void k(__global int* x) { x[get_global_id(0)] += " +
                    std::to_string(::getpid() % 1000) + "; }";
  auto first = opencl::build_program(dev, src, "k");
  EXPECT_FALSE(first.from_cache);
  std::string path = opencl::program_cache_path(dev, src);
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  auto second = opencl::build_program(dev, src, "k");
  EXPECT_TRUE(second.from_cache);
  {  // corrupt the payload: the checksum fails, the program is rebuilt and the entry rewritten
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.write("zzz", 3);
  }
  auto third = opencl::build_program(dev, src, "k");
  EXPECT_FALSE(third.from_cache);
  auto fourth = opencl::build_program(dev, src, "k");
  EXPECT_TRUE(fourth.from_cache);
  std::filesystem::resize_file(path, 10);  // truncated
  EXPECT_FALSE(opencl::build_program(dev, src, "k").from_cache);
  for (auto* p : {&first, &second, &third, &fourth}) clReleaseProgram(p->program);
  if (old.empty())
    unsetenv("KILN_CACHE_DIR");
  else
    setenv("KILN_CACHE_DIR", old.c_str(), 1);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace kiln
