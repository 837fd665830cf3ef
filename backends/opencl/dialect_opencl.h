// OpenCL C 1.2 as a dialect of the shared source emitter (backends/source/): Kiln values in
// OpenCL C types (bool as uchar, 16-bit floats computed in float and stored as ushort), wrapping
// integer arithmetic through unsigned types, launch words as `long` arguments p0.. and float
// launch scalars as float arguments c<value>. Semantics are scalar_ops.h's (see codegen.h).
#pragma once

#include <string>

#include "backends/opencl/codegen.h"
#include "backends/source/workgroup_layout.h"

namespace kiln::opencl {

class OpenclDialect : public source::WorkgroupDialect {
 public:
  explicit OpenclDialect(const DeviceCaps& caps) : caps_(caps) {}

  std::string value_type(Dtype d) const override;
  std::string dim(const Dim& d) override;
  std::string address(const IndexMap& m) override;
  std::string define(Dtype d, const std::string& name, const std::string& e) override;
  std::string constant(int value) override;
  std::string load(int buffer) override;
  std::string gather(const Value& v) override;
  std::string store(const Store& s, const std::string& ind) override;
  std::string index(const Value& v) override;
  std::string unary(const Value& v) override;
  std::string binary(const Value& v) override;
  std::string cast(const Value& v) override;
  std::string random(const Value& v) override;
  std::string bool_literal(bool v) const override { return v ? "1" : "0"; }

  const source::Builtins& words() const override;
  std::string preamble() override;
  std::string storage_type(Dtype d) const override;
  std::string unsigned_type(Dtype d) const override;
  // The float16 form (below) of an element-wise run on a CPU device.
  void vector_run(source::Emitter& em, const std::string& ind) override;
  // The float16 form of a CPU-device fold over one reduced axis: sums (in double16 where the
  // sum accumulates in double), max and min of float32.
  void vector_fold(source::Emitter& em, Dtype acc, const std::string& q0, const std::string& hi,
                   const std::string& ind) override;
  // The float4 form of a GPU's element-wise kernel (see map_lanes in the .cpp).
  int map_lanes() override;
  void vector_map(source::Emitter& em, const std::string& ind) override;

 private:
  std::string element(int b, const std::string& at);
  // A float32 kernel whose loads are contiguous or constant along the last axis, whose stores
  // are contiguous along it, and whose every op OpenCL C defines on vectors (see vector_run).
  bool vector_form() const;
  // Whether values [0, end) have the float16 form: float32, loads contiguous or constant along
  // the last axis, ops OpenCL C defines on vectors.
  bool vector_values(int end) const;
  // Emits the float16 constants (outside a vector loop) and their shadows (inside it).
  void vector_constants(source::Emitter& em, const std::string& ind, bool shadows, int lanes) const;

  std::string via_double(const std::string& expr_of_d, const std::string& a, Dtype d) const;
  std::string integer_binary(const Value& v, const std::string& a, const std::string& b);

  DeviceCaps caps_;
  // Writing a vector form: values are this many points along the last axis (16: a CPU
  // device's float16 runs and folds; 4: a GPU's float4 map), 0: scalar.
  int lanes_ = 0;
  std::string vtype() const { return "float" + std::to_string(lanes_); }
};

}  // namespace kiln::opencl
