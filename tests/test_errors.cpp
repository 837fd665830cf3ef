// Every user mistake raises kiln::Error naming the op, the shapes/dtypes and what would be valid,
// and leaves everything else usable.
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

TEST(Errors, BinaryShapes) {
  Array a = zeros({2, 3}), b = zeros({4, 3});
  expect_error([&] { add(a, b); }, {"add", "(2, 3)", "(4, 3)", "broadcast"});
  expect_error([&] { a* b; }, {"multiply", "(2, 3)", "(4, 3)"});
  expect_error([&] { where(zeros({2}, bool_), a, b); }, {"where"});
}

TEST(Errors, BadDtypes) {
  Array t = array<bool>({true}, {1});
  expect_error([&] { add(t, t); }, {"add", "bool"});
  expect_error([&] { negative(t); }, {"negative", "bool", "logical_not"});
  expect_error([&] { matmul(t, t); }, {"matmul", "bool"});
  expect_error([&] { random::uniform({2}, int32); }, {"random::uniform", "int32", "float32"});
  expect_error([&] { arange(0, 3, 1, bool_); }, {"arange", "bool"});
}

TEST(Errors, Axes) {
  Array a = zeros({2, 3});
  expect_error([&] { sum(a, 2); }, {"sum", "axis 2", "rank 2", "-2 to 1"});
  expect_error([&] { max(a, -3); }, {"max", "axis -3"});
  expect_error([&] { mean(a, std::vector<int>{0, 0}); }, {"mean", "repeated"});
  expect_error([&] { argmax(a, 5); }, {"argmax", "axis 5"});
  expect_error([&] { softmax(a, 3); }, {"softmax", "axis 3"});
  expect_error([&] { max(zeros({0, 2}), 0); }, {"max", "extent 0"});
  expect_error([&] { squeeze(a, {0}); }, {"squeeze", "extent 2"});
  expect_error([&] { expand_dims(a, 4); }, {"expand_dims", "axis 4"});
  expect_error([&] { flatten(a, 1, 0); }, {"flatten"});
}

TEST(Errors, ShapeOps) {
  Array a = zeros({2, 3});
  expect_error([&] { reshape(a, {4, 2}); }, {"reshape", "(2, 3)", "(4, 2)", "6 elements"});
  expect_error([&] { reshape(a, {-1, -1}); }, {"reshape", "more than one -1"});
  expect_error([&] { reshape(a, {-1, 4}); }, {"reshape", "(2, 3)"});
  expect_error([&] { transpose(a, {0}); }, {"transpose", "rank 2"});
  expect_error([&] { transpose(a, {0, 0}); }, {"transpose", "repeat"});
  expect_error([&] { broadcast_to(a, {3, 3}); }, {"broadcast_to", "(2, 3)", "(3, 3)"});
  expect_error([&] { broadcast_to(a, {3}); }, {"broadcast_to", "(2, 3)", "(3,)"});
  expect_error([&] { slice(a, {0}, {1}); }, {"slice", "one entry per axis"});
  expect_error([&] { slice(a, {0, 0}, {1, 1}, {1, 0}); }, {"slice", "step", "non-zero"});
  expect_error([&] { concatenate({a, zeros({2, 4})}, 0); }, {"concatenate", "(2, 3)", "(2, 4)"});
  expect_error([&] { concatenate({a, zeros({2})}); }, {"concatenate", "ranks"});
  expect_error([&] { concatenate({}); }, {"concatenate", "at least one"});
  expect_error([&] { concatenate({array(1.0f), array(2.0f)}); }, {"concatenate", "zero-dim"});
}

TEST(Errors, Matmul) {
  expect_error(
      [&] {
        matmul(zeros({2, 3}), zeros({2, 3}));
      },
      {"matmul", "(2, 3)", "not aligned", "3", "2"});
  expect_error([&] { matmul(array(1.0f), zeros({2})); }, {"matmul", "at least one dimension"});
  expect_error([&] { matmul(zeros({2, 2, 3}), zeros({3, 3, 4})); }, {"matmul", "broadcast"});
}

TEST(Errors, Creation) {
  expect_error([] { array<float>({1, 2, 3}, {2, 2}); }, {"array", "3 values", "(2, 2)"});
  expect_error([] { zeros({2, -1}); }, {"full", "negative"});
  expect_error([] { arange(0, 1, 0); }, {"arange", "non-zero step"});
  expect_error([] { zeros({2}).item<float>(); }, {"item", "(2,)", "exactly one"});
  expect_error([] { random::uniform(1.0, 0.0, {2}); }, {"low", "high"});
  expect_error([] { zeros({int64_t{1} << 40, int64_t{1} << 40}); }, {"full", "2^62"});
  expect_error([] { arange(0.0, 1e30); }, {"arange", "2^48"});
}

TEST(Errors, Devices) {
  expect_error([] { device("tpu"); }, {"tpu", "cpu", "opencl", "vulkan", "reference"});
  expect_error([] { device("reference:7"); }, {"reference:7", "device(s)"});
  expect_error([] { device("opencl:x"); }, {"opencl:x", "index"});
  expect_error([] { device(":1"); }, {"no backend name"});
  expect_error([] { set_default_device(Device{"nope", 0}); }, {"nope"});
  expect_error([] { StreamScope s(Stream{0, Device{"nope", 0}}); }, {"nope"});
  // A backend that is listed but not usable says why.
  for (const DeviceInfo& d : devices())
    if (!d.available) {
      EXPECT_FALSE(d.reason.empty()) << d.device;
      expect_error([&] { device(d.device.str()); }, {d.device.str(), "not available"});
    }
}

TEST(Errors, ArraysStayUsableAfterErrors) {
  Array a = array<float>({1, 2, 3}, {3});
  expect_error([&] { reshape(a, {2, 2}); }, {"reshape"});
  expect_error([&] { add(a, zeros({2})); }, {"add"});
  EXPECT_FLOAT_EQ(sum(a).item<float>(), 6);
}
