#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(bool_.size(), 1u);
  EXPECT_EQ(int32.size(), 4u);
  EXPECT_EQ(int64.size(), 8u);
  EXPECT_EQ(float32.size(), 4u);
  EXPECT_EQ(float64.size(), 8u);
  EXPECT_EQ(float32.name(), "float32");
  EXPECT_EQ(dtype_from_name("int64"), int64);
  expect_error([] { dtype_from_name("float16"); }, {"float16", "float32"});
}

TEST(Dtype, NumpyPromotion) {
  EXPECT_EQ(promote_types(bool_, int32), int32);
  EXPECT_EQ(promote_types(int32, int64), int64);
  EXPECT_EQ(promote_types(int32, float32), float64);  // NumPy: float32 cannot hold all int32
  EXPECT_EQ(promote_types(int64, float32), float64);
  EXPECT_EQ(promote_types(float32, float64), float64);
  EXPECT_EQ(promote_types(bool_, float32), float32);
  EXPECT_EQ(promote_types(float32, float32), float32);
}

TEST(Shape, Broadcasting) {
  EXPECT_EQ(broadcast_shapes({2, 1, 3}, {4, 1}, "t"), (Shape{2, 4, 3}));
  EXPECT_EQ(broadcast_shapes({}, {5}, "t"), (Shape{5}));
  EXPECT_EQ(broadcast_shapes({0, 3}, {1, 3}, "t"), (Shape{0, 3}));
  expect_error([] { broadcast_shapes({2, 3}, {4, 3}, "myop"); }, {"myop", "(2, 3)", "(4, 3)"});
}

TEST(Shape, Axes) {
  EXPECT_EQ(normalize_axis(-1, 3, "t"), 2);
  expect_error([] { normalize_axis(3, 3, "sum"); }, {"sum", "axis 3", "rank 3"});
  EXPECT_EQ(normalize_axes({-1, 0}, 3, "t"), (std::vector<int>{0, 2}));
  expect_error([] { normalize_axes({1, -2}, 3, "sum"); }, {"sum", "repeated"});
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
}
