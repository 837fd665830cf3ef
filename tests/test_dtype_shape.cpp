#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

TEST(Dtype, SizesAndNames) {
  EXPECT_EQ(bool_.size(), 1u);
  EXPECT_EQ(int8.size(), 1u);
  EXPECT_EQ(uint8.size(), 1u);
  EXPECT_EQ(float16.size(), 2u);
  EXPECT_EQ(bfloat16.size(), 2u);
  EXPECT_EQ(int32.size(), 4u);
  EXPECT_EQ(uint32.size(), 4u);
  EXPECT_EQ(int64.size(), 8u);
  EXPECT_EQ(uint64.size(), 8u);
  EXPECT_EQ(float32.size(), 4u);
  EXPECT_EQ(float64.size(), 8u);
  EXPECT_EQ(float32.name(), "float32");
  EXPECT_EQ(bfloat16.name(), "bfloat16");
  for (Dtype d : kAllDtypes) EXPECT_EQ(dtype_from_name(d.name()), d);
  EXPECT_EQ(dtype_from_name("int64"), int64);
  expect_error([] { dtype_from_name("int16"); }, {"int16", "float32", "bfloat16", "uint64"});
  EXPECT_TRUE(uint32.is_int() && uint32.is_unsigned() && !int8.is_unsigned());
  EXPECT_TRUE(bfloat16.is_float() && bfloat16.is_half() && !float32.is_half());
  EXPECT_FALSE(bool_.is_int());
}

// NumPy's promote_types (numpy 2.4), with int16 (which Kiln lacks) replaced by int32; bfloat16
// promotes as JAX and MLX do.
TEST(Dtype, NumpyPromotion) {
  // Rows and columns in kAllDtypes order:
  // bool int8 int32 int64 uint8 uint32 uint64 float16 bfloat16 float32 float64
  const Dtype b = bool_, i8 = int8, i32 = int32, i64 = int64, u8 = uint8, u32 = uint32,
              u64 = uint64, f16 = float16, bf = bfloat16, f32 = float32, f64 = float64;
  const Dtype table[11][11] = {{b, i8, i32, i64, u8, u32, u64, f16, bf, f32, f64},       // bool
                               {i8, i8, i32, i64, i32, i64, f64, f16, bf, f32, f64},     // int8
                               {i32, i32, i32, i64, i32, i64, f64, f64, f64, f64, f64},  // int32
                               {i64, i64, i64, i64, i64, i64, f64, f64, f64, f64, f64},  // int64
                               {u8, i32, i32, i64, u8, u32, u64, f16, bf, f32, f64},     // uint8
                               {u32, i64, i64, i64, u32, u32, u64, f64, f64, f64, f64},  // uint32
                               {u64, f64, f64, f64, u64, u64, u64, f64, f64, f64, f64},  // uint64
                               {f16, f16, f64, f64, f16, f64, f64, f16, f32, f32, f64},  // float16
                               {bf, bf, f64, f64, bf, f64, f64, f32, bf, f32, f64},      // bfloat16
                               {f32, f32, f64, f64, f32, f64, f64, f32, f32, f32, f64},  // float32
                               {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64, f64}};  // float64
  for (int i = 0; i < 11; ++i)
    for (int j = 0; j < 11; ++j)
      EXPECT_EQ(promote_types(kAllDtypes[i], kAllDtypes[j]), table[i][j])
          << kAllDtypes[i] << " + " << kAllDtypes[j];
}

TEST(Dtype, HoldsExactlyAndFloatResultType) {
  EXPECT_TRUE(holds_exactly(float16, int8));
  EXPECT_TRUE(holds_exactly(bfloat16, uint8));
  EXPECT_FALSE(holds_exactly(float32, int32));
  EXPECT_TRUE(holds_exactly(float64, uint32));
  EXPECT_FALSE(holds_exactly(float64, int64));
  EXPECT_FALSE(holds_exactly(bfloat16, float16));  // precision
  EXPECT_FALSE(holds_exactly(float16, bfloat16));  // range
  EXPECT_TRUE(holds_exactly(float32, bfloat16));
  EXPECT_FALSE(holds_exactly(uint64, int8));
  EXPECT_TRUE(holds_exactly(int64, uint32));
  EXPECT_FALSE(holds_exactly(int32, uint32));
  EXPECT_FALSE(holds_exactly(int8, float16));
  for (Dtype d : {bool_, int8, uint8}) EXPECT_EQ(float_result_type(d), float32) << d;
  for (Dtype d : {int32, int64, uint32, uint64}) EXPECT_EQ(float_result_type(d), float64) << d;
  for (Dtype d : {float16, bfloat16, float32, float64}) EXPECT_EQ(float_result_type(d), d);
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
