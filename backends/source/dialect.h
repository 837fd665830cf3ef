// One C-family language as the shared source emitter (emitter.h) sees it: how values are typed
// and spelled, how launch parameters and buffers are reached, and how each Kernel IR op is
// written. The base class holds the spellings C, OpenCL C, GLSL, CUDA and Metal share (float
// arithmetic, NaN-propagating max/min, floor/ceil/sqrt); a language overrides what differs.
#pragma once

#include <string>

#include "backends/kernel_ir.h"

namespace kiln::source {

class Emitter;

class Dialect {
 public:
  virtual ~Dialect() = default;

  // ---- types and names --------------------------------------------------------------------
  // The type a value of dtype d is computed in.
  virtual std::string value_type(Dtype d) const = 0;
  // A constant or runtime extent, stride or offset.
  virtual std::string dim(const Dim& d) = 0;
  // The element index `map` gives at the current point (axes named i0, i1, ...).
  virtual std::string address(const IndexMap& m);
  // The statement defining body value `name` of dtype d (no indentation, no newline), and the
  // one defining a Constant.
  virtual std::string define(Dtype d, const std::string& name, const std::string& e);
  virtual std::string define_constant(Dtype d, const std::string& name, const std::string& e) {
    return define(d, name, e);
  }

  // ---- values -----------------------------------------------------------------------------
  // A Constant: an immediate or a launch scalar.
  virtual std::string constant(int value) = 0;
  virtual std::string load(int buffer) = 0;
  // A Gather: the buffer's element at its map's address plus gather_row(v) * v.step.
  virtual std::string gather(const Value& v) = 0;
  // The statement(s) storing s.value to its buffer, each line starting with `ind`.
  virtual std::string store(const Store& s, const std::string& ind) = 0;
  virtual std::string index(const Value& v) = 0;
  virtual std::string unary(const Value& v) = 0;
  virtual std::string binary(const Value& v) = 0;
  virtual std::string select(const Value& v);
  virtual std::string cast(const Value& v) = 0;
  virtual std::string random(const Value& v) = 0;
  // The language's true and false (a comparison's value).
  virtual std::string bool_literal(bool v) const = 0;

  // Called by the Emitter that walks a kernel with this dialect; kernel() and em() are valid
  // while that Emitter lives.
  void attach(Emitter& em) { em_ = &em; }

 protected:
  Emitter& em() const { return *em_; }
  const Kernel& kernel() const;
  Dtype dtype_of(int value) const;
  static std::string name(int value) { return "v" + std::to_string(value); }

  // Spellings every C-family language shares; an empty string where the op has none in common.
  static std::string float_arith(BinaryOp op, const std::string& a, const std::string& b);
  static std::string float_unary(UnaryOp op, const std::string& a);
  // A comparison (or "" for other ops) of values a and b, spelled a and b.
  std::string compare(const Value& v, const std::string& a, const std::string& b);

 private:
  Emitter* em_ = nullptr;
};

}  // namespace kiln::source
