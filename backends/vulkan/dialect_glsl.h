// GLSL 450 as a dialect of the shared source emitter (backends/source/): Kiln values in GLSL
// types (8-bit integers computed in 32 bits and wrapped after every op, 16-bit floats in float),
// 8/16-bit buffers packed in uint words, launch words read from `prm.w[]` (push constants or a
// params buffer), float launch scalars in slots the host converts, and the vector access of
// contiguous element-wise kernels (4 points through vec4, 8 through u64vec4).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "backends/source/shader_layout.h"
#include "backends/vulkan/glsl_codegen.h"

namespace kiln::vulkan {

class GlslDialect : public source::ShaderDialect {
 public:
  explicit GlslDialect(const ShaderFeatures& f) : f_(f) {}

  std::string value_type(Dtype d) const override { return ctype(d); }
  std::string define(Dtype d, const std::string& name, const std::string& e) override;
  std::string define_constant(Dtype d, const std::string& name, const std::string& e) override {
    return Dialect::define(d, name, e);
  }
  std::string dim(const Dim& d) override;
  std::string constant(int value) override;
  std::string load(int buffer) override;
  std::string gather(const Value& v) override;
  std::string store(const Store& s, const std::string& ind) override;
  std::string index(const Value& v) override;
  std::string unary(const Value& v) override;
  std::string binary(const Value& v) override;
  std::string select(const Value& v) override;
  std::string cast(const Value& v) override;
  std::string random(const Value& v) override;
  std::string floor_div_rem(bool rem, Dtype d, const std::string& a, const std::string& b) const;
  std::string bool_literal(bool v) const override { return v ? "true" : "false"; }

  static const char* ctype(Dtype d);
  // Bits of a packed (8/16-bit) element, 0 for a dtype stored in its own word(s).
  static int packed_bits(Dtype d) { return d.size() < 4 ? static_cast<int>(d.size()) * 8 : 0; }
  static const char* storage_type(Dtype d) { return packed_bits(d) ? "uint" : ctype(d); }
  std::string wrap(Dtype d, const std::string& x) const override;
  const source::ShaderWords& words() const override;
  // Checks the device's features, then plans vector access (find_vector_buffers).
  void prepare() override;
  int vector_step() const override { return vec.empty() ? 0 : width; }
  std::string vector_begin() override;
  void set_lane(int l) override { lane = l; }
  std::string vector_end() override;
  // The element type of a buffer accessed as vectors (vec4-like, or u64vec4 at width 8).
  const char* vec_type(Dtype d) const;
  // Raises kiln::Error naming the device feature a kernel needs and the device lacks.
  [[noreturn]] void lacks(const char* feature, const std::string& why);
  void check_features();

  // Launch words: the kernel's own params, then float scalars converted by the host.
  int nparams = 0;
  std::vector<FloatSlot> float_slots;
  // Vector access (find_vector_buffers): buffers read and written as vectors, points per step,
  // and while >= 0, the lane of the step being written.
  std::set<int> vec;
  // The vector-read buffers bound as texel buffers (ShaderFeatures::texel_loads): in vec,
  // loaded and never stored. Step q of buffer b is texels (offset / 4 + q * width / 4) onwards.
  std::set<int> texel;
  int width = 4;
  int lane = -1;

 private:
  // Element `a` (an IDX expression) of buffer b, read as a scalar (8/16-bit types unpacked).
  std::string scalar_element(int b, const std::string& a);
  static std::string from_bits(Dtype d, const std::string& bits);
  static std::string to_bits(Dtype d, const std::string& x);
  static std::string truth(Dtype d, const std::string& x);
  std::string literal(Dtype d, const Scalar& s);
  std::string param_value(Dtype d, int p);
  std::string convert(Dtype from, Dtype to, const std::string& x);
  bool is_const_two(int i) const;
  void find_vector_buffers();  // sets vec and width
  std::string vector_index(int b) const;
  // Texel t of step q of texel buffer b, as the name of the uvec4 holding it.
  static std::string texel_name(int b, int t);

  const ShaderFeatures& f_;
};

}  // namespace kiln::vulkan
