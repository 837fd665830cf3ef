// Kernel IR: one fused kernel, the unit every backend compiles (LLVM IR, OpenCL C, GLSL, or the
// reference interpreter). Fusion builds one Kernel per group of graph nodes; eager evaluation
// builds one per primitive. It is deliberately small: an iteration domain, typed buffers read and
// written through affine index maps, an SSA list of scalar ops, at most one reduction.
//
// Invariants (checked by validate()):
//  1. One domain per kernel. Its axes are [kept axes..., reduced axes...]: a reduction reduces the
//     trailing `reduce.naxes` axes, so every backend walks the reduced extent innermost.
//  2. Every Dim is a constant or a runtime parameter (params[i] at launch); runtime dims make one
//     kernel serve every shape (compile's `shapeless`).
//  3. Buffer element address for domain point (i_0..i_{n-1}) = offset + sum_k i_k * stride_k.
//     A stride of 0 broadcasts. Every address a kernel touches lies inside its buffer.
//  4. body is in SSA order: operands refer to earlier values only. With a reduction, body holds
//     exactly one value of kind Reduce. Values before it (the prologue) run once per domain point;
//     values after it (the epilogue) run once per output element and may use only the Reduce
//     value, Constants and other epilogue values; epilogue Loads and Indexes have stride 0 on
//     the reduced axes.
//  5. Stores write each output element exactly once: with a reduction, output maps have stride 0
//     on the reduced axes and are written after the reduction completes. A buffer that is both
//     read and written is read only at the element being written, before the write.
//  6. hash() covers everything except `name`, so kernels that differ only in name share a binary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/primitives.h"
#include "graph/scalar.h"

namespace kiln {

// A constant extent, stride or offset, or one read from the launch parameters.
struct Dim {
  int64_t value = 0;
  int32_t param = -1;  // >= 0: params[param] at launch time
  static Dim constant(int64_t v) { return {v, -1}; }
  static Dim runtime(int32_t p) { return {0, p}; }
  bool is_runtime() const { return param >= 0; }
  int64_t eval(const int64_t* params) const { return param >= 0 ? params[param] : value; }
  bool operator==(const Dim& o) const { return value == o.value && param == o.param; }
};

// Affine map from a domain point to an element index of a buffer.
struct IndexMap {
  std::vector<Dim> strides;  // one per domain axis
  Dim offset;
  bool operator==(const IndexMap& o) const { return strides == o.strides && offset == o.offset; }
};

struct KernelBuffer {
  Dtype dtype;
  bool output = false;
  IndexMap map;
};

enum class ValueKind : uint8_t {
  Load,      // buffers[buffer] at map(point)
  Constant,  // constant
  Index,     // the integer map(point) itself (int64): iota, linear index, arange
  Unary,     // unary(a)
  Binary,    // binary(a, b)
  Select,    // a ? b : c
  Cast,      // a converted to dtype
  Random,    // counter-based random value of `dist` from counter a (int64) and `key`
  Reduce,    // Kernel::reduce->op of a over the reduced axes (int64 position for argmax)
};

struct Value {
  ValueKind kind = ValueKind::Constant;
  Dtype dtype = float32;
  int a = -1, b = -1, c = -1;  // operand value indices
  int buffer = -1;             // Load
  IndexMap map;                // Index
  Scalar constant;             // Constant
  UnaryOp unary = UnaryOp::Negative;
  BinaryOp binary = BinaryOp::Add;
  RandomDist dist = RandomDist::Uniform;
  uint64_t key = 0;
  bool operator==(const Value& o) const;
};

struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  int naxes = 0;   // the trailing naxes domain axes are reduced
  int value = -1;  // index of the body value of kind Reduce
};

struct Store {
  int buffer;
  int value;
};

struct Kernel {
  std::string name;
  std::vector<Dim> domain;
  std::vector<KernelBuffer> buffers;
  std::vector<Value> body;
  std::optional<Reduction> reduce;
  std::vector<Store> stores;

  uint64_t hash() const;
  // Throws kiln::Error describing the first broken invariant (a bug in whoever built it).
  void validate() const;
  std::string str() const;  // readable listing for `kiln inspect` and test failures

  int ndim() const { return static_cast<int>(domain.size()); }
  int kept_axes() const { return ndim() - (reduce ? reduce->naxes : 0); }
};

}  // namespace kiln
