// Misuse of the public API and broken Kernel IR: each case raises kiln::Error (naming what was
// wrong) instead of crashing, wrapping or computing garbage. CI also runs these under ASan+UBSan.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "backends/extension.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using test::expect_error;

TEST(Hardening, ByteSizesNeverWrap) {
  expect_error([] { eval(zeros({1LL << 62})); }, {"2^62 bytes"});
  expect_error([] { eval(zeros({(1LL << 61) + 1}, float64)); }, {"2^62 bytes"});
  expect_error([] { ones({1LL << 31, 1LL << 31}); }, {"2^62 bytes"});
  auto f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{sum(ones({1LL << 31, 1LL << 31}), 1) + in[0]};
  });
  expect_error([&] { f({array(1.0f)}); }, {"2^62 bytes"});
  float x = 0;
  expect_error([&] { array_from_bytes(&x, 0, {1LL << 62}, float32); }, {"2^62 bytes"});
  expect_error([&] { array_from_bytes(&x, 4, {1LL << 62, 4}, float32); }, {"2^62 elements"});
  // Empty arrays of absurd extents are fine (nothing to hold), as in NumPy.
  EXPECT_EQ(zeros({0, 1LL << 62}).size(), 0);
}

TEST(Hardening, ShapeArithmeticIsChecked) {
  expect_error([] { reshape(arange(4), {4, (1LL << 62) + 1}); }, {"reshape", "(4,)"});
  expect_error([] { reshape(arange(4), {-1, 1LL << 62, 1LL << 62}); }, {"reshape"});
  Array big = broadcast_to(zeros({1}), {1LL << 60});
  expect_error([&] { concatenate({big, big, big, big}); }, {"2^62"});
  expect_error(
      [&] {
        Array b = broadcast_to(zeros({1}, bool_), {INT64_MAX / 2 + 1});
        concatenate({b, b});
      },
      {"concatenate", "overflows"});
  // A step of INT64_MAX or INT64_MIN takes one element, as NumPy does.
  Array a = arange(10);
  EXPECT_EQ(slice(a, {0}, {10}, {INT64_MAX}).to_vector<int64_t>(), (std::vector<int64_t>{0}));
  EXPECT_EQ(slice(a, {9}, {-11}, {INT64_MIN}).to_vector<int64_t>(), (std::vector<int64_t>{9}));
  EXPECT_EQ(slice(a, {INT64_MIN}, {INT64_MAX}, {3}).to_vector<int64_t>(),
            (std::vector<int64_t>{0, 3, 6, 9}));
}

TEST(Hardening, EmptyCompiledFunctionRaises) {
  CompiledFunction f;
  expect_error([&] { f({ones({2})}); }, {"empty", "kiln::compile"});
  expect_error([&] { f.cache_size(); }, {"empty"});
}

TEST(Hardening, NullArrayHandleRaises) {
  expect_error([] { Array a(std::shared_ptr<ArrayNode>{}); }, {"null"});
}

TEST(Hardening, CompositesNameThemselvesAndHandleEmptyAxes) {
  expect_error([] { softmax(ones({2, 3}), std::vector<int>{5}); }, {"softmax", "axis 5"});
  expect_error([] { logsumexp(ones({2, 3}), 7); }, {"logsumexp", "axis 7"});
  Array e = zeros({2, 0});
  EXPECT_EQ(softmax(e, -1).shape(), (Shape{2, 0}));
  EXPECT_EQ(softmax(e, -1).to_vector<float>().size(), 0u);
  std::vector<float> l = logsumexp(e, 1).to_vector<float>();  // SciPy: -inf per row
  ASSERT_EQ(l.size(), 2u);
  EXPECT_TRUE(std::isinf(l[0]) && l[0] < 0);
  EXPECT_EQ(logsumexp(e, 1, true).shape(), (Shape{2, 1}));
}

// ---- Kernel IR invariants: validate() and validate_launch() -----------------------------------

IndexMap map(std::vector<int64_t> strides, int64_t offset = 0) {
  IndexMap m;
  for (int64_t s : strides) m.strides.push_back(Dim::constant(s));
  m.offset = Dim::constant(offset);
  return m;
}

// out[i, j] = in[i, j] over a 4x8 domain.
Kernel copy_kernel() {
  Kernel k;
  k.name = "copy";
  k.domain = {Dim::constant(4), Dim::constant(8)};
  k.buffers = {{float32, false, map({8, 1})}, {float32, true, map({8, 1})}};
  Value load;
  load.kind = ValueKind::Load, load.dtype = float32, load.buffer = 0;
  k.body = {load};
  k.stores = {{1, 0}};
  return k;
}

// out[i] = sum_j in[i, j], then * 2 (an epilogue).
Kernel row_sum_kernel() {
  Kernel k;
  k.name = "row_sum";
  k.domain = {Dim::constant(4), Dim::constant(8)};
  k.buffers = {{float32, false, map({8, 1})}, {float32, true, map({1, 0})}};
  Value load, red, two, mul;
  load.kind = ValueKind::Load, load.dtype = float32, load.buffer = 0;
  red.kind = ValueKind::Reduce, red.dtype = float32, red.a = 0;
  two.kind = ValueKind::Constant, two.dtype = float32, two.constant = Scalar::of(2.0f);
  mul.kind = ValueKind::Binary, mul.binary = BinaryOp::Multiply, mul.dtype = float32;
  mul.a = 1, mul.b = 2;
  k.body = {load, red, two, mul};
  k.reduce = Reduction{ReduceOp::Sum, 1, 1};
  k.stores = {{1, 3}};
  return k;
}

TEST(Hardening, ValidKernelsPass) {
  copy_kernel().validate();
  row_sum_kernel().validate();
  copy_kernel().validate_launch({}, {32, 32});
  row_sum_kernel().validate_launch({}, {32, 4});
  copy_kernel().validate_launch({}, {32, 32}, {{0, 1}});  // read where written: fine to donate
}

TEST(Hardening, OutputsAreWrittenExactlyOnce) {
  Kernel k = copy_kernel();
  k.stores.push_back({1, 0});
  expect_error([&] { k.validate(); }, {"stored 2 times"});
  k = copy_kernel();
  k.stores.clear();
  expect_error([&] { k.validate(); }, {"stored 0 times"});
  k = copy_kernel();
  k.buffers[1].map = map({4, 1});  // rows overlap: element 4 is written by (0,4) and (1,0)
  expect_error([&] { k.validate(); }, {"more than once"});
  k = copy_kernel();
  k.buffers[1].map = map({0, 1});  // every row writes the same 8 elements
  expect_error([&] { k.validate(); }, {"more than once"});
}

TEST(Hardening, EpilogueMovesOnlyAlongKeptAxes) {
  Kernel k = row_sum_kernel();
  Value extra;  // an epilogue load that walks the reduced axis
  extra.kind = ValueKind::Load, extra.dtype = float32, extra.buffer = 2;
  k.buffers.push_back({float32, false, map({8, 1})});
  k.body.push_back(extra);
  Value add;
  add.kind = ValueKind::Binary, add.binary = BinaryOp::Add, add.dtype = float32, add.a = 3;
  add.b = 4;
  k.body.push_back(add);
  k.stores = {{1, 5}};
  expect_error([&] { k.validate(); }, {"moves along a reduced axis"});
  k.buffers[2].map = map({1, 0});
  k.validate();
  k = row_sum_kernel();
  k.buffers[1].map = map({1, 1});
  expect_error([&] { k.validate(); }, {"non-zero stride on a reduced axis"});
}

TEST(Hardening, LaunchesStayInBounds) {
  Kernel k = copy_kernel();
  expect_error([&] { k.validate_launch({}, {31, 32}); }, {"b0", "0..31 of 31"});
  expect_error([&] { k.validate_launch({}, {32}); }, {"buffers"});
  k.buffers[0].map = map({8, 1}, -1);
  expect_error([&] { k.validate_launch({}, {32, 32}); }, {"b0"});
  // Runtime dims are checked with the launch's params.
  Kernel r = copy_kernel();
  r.domain[0] = Dim::runtime(0);
  r.validate();
  r.validate_launch({4}, {32, 32});
  expect_error([&] { r.validate_launch({5}, {32, 32}); }, {"of 32"});
  expect_error([&] { r.validate_launch({}, {32, 32}); }, {"params"});
  // Extents whose reach overflows int64 raise instead of wrapping into range.
  r.buffers[0].map.strides[0] = Dim::runtime(1);
  expect_error([&] { r.validate_launch({4, int64_t{1} << 62}, {32, 32}); }, {"past the int64"});
}

TEST(Hardening, DonatedInputsAreReadOnlyWhereWritten) {
  Kernel k = copy_kernel();
  k.buffers[0].map = map({8, 1}, 0);
  k.buffers[1].map = map({8, 1}, 0);
  k.domain = {Dim::constant(4), Dim::constant(7)};
  k.buffers[0].map = map({8, 1}, 1);  // reads the element after the one written
  expect_error([&] { k.validate_launch({}, {32, 32}, {{0, 1}}); }, {"donated"});
  k.validate_launch({}, {32, 32});  // not donated: fine
}

TEST(Hardening, BackendsCheckEveryLaunch) {
  Kernel k = copy_kernel();
  for (const char* name : {"reference", "cpu"}) {
    Device d = device(name);
    Backend& be = backend_for(d);
    auto ck = be.compile(d.index, k);
    auto small = be.allocate(d.index, 4 * 31);
    auto out = be.allocate(d.index, 4 * 32);
    auto q = be.create_queue(d.index);
    KernelArgs args{{small.get(), out.get()}, {}};
    expect_error([&] { q->enqueue_kernel(*ck, args); }, {"0..31 of 31"});
    KernelArgs missing{{small.get()}, {}};
    expect_error([&] { q->enqueue_kernel(*ck, missing); }, {"buffers"});
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Hardening, IntegerScalarsStayExact) {
  Array x = array(std::vector<int64_t>{0, 1}, {2});
  EXPECT_EQ((x + 9007199254740993LL).to_vector<int64_t>()[0], 9007199254740993LL);
  EXPECT_EQ((x + INT64_MAX).to_vector<int64_t>()[0], INT64_MAX);
  // A literal the array's dtype cannot hold is an error, as in NumPy 2.
  test::expect_error([] { ones({2}, int32) + 3000000000LL; }, {"3000000000", "int32"});
  // Conversions follow astype's rule (saturating, NaN -> 0), never a plain C++ cast.
  EXPECT_EQ(full({2}, NAN, int32).to_vector<int32_t>(), (std::vector<int32_t>{0, 0}));
  Array f = array(std::vector<float>{NAN, 1e20f, -1e20f, 2.7f}, {4});
  EXPECT_EQ(f.to_vector<int32_t>(), (std::vector<int32_t>{0, INT32_MAX, INT32_MIN, 2}));
  EXPECT_EQ(f.to_vector<int32_t>(), astype(f, int32).to_vector<int32_t>());
  EXPECT_EQ(array(NAN).item<int64_t>(), 0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(Hardening, MadeUpDtypesRaise) {
  Dtype bad{static_cast<Dtype::Kind>(99)};
  test::expect_error([&] { zeros({3}, bad); }, {"unknown dtype"});
  test::expect_error([&] { astype(ones({3}), bad); }, {"unknown dtype"});
  float x = 0;
  test::expect_error([&] { array_from_bytes(&x, 4, {1}, bad); }, {"unknown dtype"});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Found by tests/probe_misuse.cpp: each raised late, crashed or named the wrong op.
TEST(Hardening, ProbeFindings) {
  float x[2] = {1, 2};
  test::expect_error([&] { array_from_bytes(nullptr, 8, {2}, float32); }, {"null data"});
  test::expect_error([&] { array_from_bytes(x, 7, {2}, float32); }, {"array_from_bytes", "7"});
  EXPECT_EQ(array_from_bytes(nullptr, 0, {0}, float32).size(), 0);
  // Draws too large to address are refused when made, not when a kernel is launched.
  test::expect_error([] { random::normal({1LL << 62}); }, {"random::normal", "2^62 bytes"});
  Dtype bad{static_cast<Dtype::Kind>(99)};
  test::expect_error([&] { arange(0, 3, 1, bad); }, {"arange", "unknown dtype"});
  test::expect_error([&] { array<float>({1}, {1}, bad); }, {"array", "unknown dtype"});
  test::expect_error([&] { random::uniform({2}, bad); }, {"unknown dtype"});
  // Streams are a device's default (0) or made by new_stream; others are refused by name.
  Device ref = device("reference");
  test::expect_error([&] { zeros({2}, float32, Stream{12345, ref}); }, {"stream 12345"});
  test::expect_error([&] { zeros({2}, float32, Stream{-1, ref}); }, {"stream -1"});
  test::expect_error([&] { synchronize(Stream{777, ref}); }, {"new_stream"});
  test::expect_error([&] { StreamScope s(Stream{777, ref}); }, {"stream 777"});
  Stream made = new_stream(ref);
  EXPECT_EQ((ones({2}, float32, made) + 1.0f).to_vector<float>(), (std::vector<float>{2, 2}));
  synchronize(made);
}

}  // namespace
}  // namespace kiln
