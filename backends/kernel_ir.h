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
//     the reduced axes. A Gather reads its buffer at map(point) plus a row the index value a
//     picks (clamped), so the buffer's map spans only the other axes; its epilogue rule is
//     Load's.
//  5. Stores write each output element exactly once: with a reduction, output maps have stride 0
//     on the reduced axes and are written after the reduction completes. A buffer that is both
//     read and written is read only at the element being written, before the write.
//  6. A row kernel (`passes` non-empty; its own body, reduce, stores and in_place empty) is a
//     sequence of passes over one domain and one buffer list. Pass i alone (pass_kernel(i)) is a
//     valid kernel whose outputs are the buffers it stores; the passes that reduce all reduce
//     the same trailing axes, and a buffer a pass stores is loaded only by later passes, at
//     the map it was stored through (so a row's later passes read what its earlier ones wrote
//     for that row). Running the passes one after another is its meaning; a backend may
//     instead walk the rows once and run every pass per row (softmax: max, sum of exp, the
//     scaled exp, with the row in cache).
//  7. hash() covers structure, never values: everything except `name`, the values of launch
//     scalars and random keys read from params. Kernels that differ only in those share a binary.
//
// Values are launch arguments, not code. A Constant or a Random key with `param >= 0` is read
// from params[param] at launch, as a word (launch_word): floats as the bits of a double, integers
// and bools as int64. Eager ops, `full`, arange, folded constants and random keys all travel this
// way, so a new learning rate or key reuses the compiled kernel. Specialised (kept as immediates,
// part of the hash, because they change the generated code): the exponent 2 of `power`
// (emitted as x*x) and constants that are not user values (mean's element count, iota strides).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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
  Random,    // counter-based random value of `dist` from counter a (int64) and the key: value
             // b (uint64) when b >= 0, else `key` or params[param]
  Reduce,    // Kernel::reduce->op of a over the reduced axes (int64 position for argmax)
  Gather,    // buffers[buffer] at map(point) + clamp(wrap(a)) * step: a (int64) indexes an axis
             // of `extent` rows `step` elements apart; wrap adds extent to a negative index and
             // clamp keeps it in [0, extent-1] (take's rule), so the access stays in the buffer
};

struct Value {
  ValueKind kind = ValueKind::Constant;
  Dtype dtype = float32;
  int a = -1, b = -1, c = -1;  // operand value indices
  int buffer = -1;             // Load, Gather
  IndexMap map;                // Index
  Dim step, extent;            // Gather: the gathered axis' stride and extent
  Scalar constant;             // Constant with param < 0 (an immediate)
  UnaryOp unary = UnaryOp::Negative;
  BinaryOp binary = BinaryOp::Add;
  RandomDist dist = RandomDist::Uniform;
  uint64_t key = 0;  // Random with param < 0
  // >= 0: a Constant's value or a Random's key is params[param] at launch (see launch_word).
  int32_t param = -1;
  bool operator==(const Value& o) const;
};

// The params word carrying a launch scalar: floats as the bits of a double (every Kiln float
// value is exact as a double), integers and bools as int64 (uint64 as its bits).
int64_t launch_word(const Scalar& s);
// The scalar of dtype `d` a params word carries (the inverse of launch_word).
Scalar scalar_from_word(int64_t word, Dtype d);

struct Reduction {
  ReduceOp op = ReduceOp::Sum;
  int naxes = 0;   // the trailing naxes domain axes are reduced
  int value = -1;  // index of the body value of kind Reduce
};

struct Store {
  int buffer;
  int value;
};

// One pass of a row kernel (invariant 6): a body, its optional reduction and its stores, over
// the kernel's domain and buffers.
struct Pass {
  std::vector<Value> body;
  std::optional<Reduction> reduce;
  std::vector<Store> stores;
};

struct Kernel {
  std::string name;
  std::vector<Dim> domain;
  std::vector<KernelBuffer> buffers;
  std::vector<Value> body;
  std::optional<Reduction> reduce;
  std::vector<Store> stores;
  // (input, output) buffer pairs a launch may bind to one buffer (a donated input, element-wise
  // kernels only, equal maps and dtypes). Part of the structure: the cpu backend compiles a
  // walk that reads and writes such a pair through one pointer, taken when the launch binds
  // them to the same memory (its vectoriser's alias checks would fail on equal pointers).
  std::vector<std::pair<int, int>> in_place;
  // Non-empty: a row kernel (invariant 6); body, reduce, stores and in_place are then empty.
  std::vector<Pass> passes;

  uint64_t hash() const;
  // Throws kiln::Error describing the first broken invariant (a bug in whoever built it).
  void validate() const;
  // The invariants that need a launch: `params` supplied, every address inside its buffer of
  // `elements[b]` elements, each output element written once, and each (input, output) pair in
  // `donated` (bound to the same memory) read only at the element being written.
  void validate_launch(const std::vector<int64_t>& params, const std::vector<int64_t>& elements,
                       const std::vector<std::pair<int, int>>& donated = {}) const;
  std::vector<int64_t> extents(const std::vector<int64_t>& params) const;
  std::string str() const;  // readable listing for `kiln inspect` and test failures
  // The listing without the name: equal for exactly the kernels that compute the same thing
  // (what hash() summarises). Caches confirm every hit with it, so a hash collision cannot run
  // the wrong kernel.
  std::string canonical() const;
  bool operator==(const Kernel& o) const { return canonical() == o.canonical(); }

  // How many params words a launch must supply (1 + the highest param any Dim or Value reads).
  int num_params() const;
  int ndim() const { return static_cast<int>(domain.size()); }
  int kept_axes() const { return ndim() - (reduce ? reduce->naxes : 0); }
  bool is_rows() const { return !passes.empty(); }
  // A row kernel's row axes: the trailing axes its reducing passes reduce (0 without any).
  int row_axes() const;
  // Pass i of a row kernel as a kernel of its own: the same name, domain and buffers, the
  // buffers it stores as outputs and every other buffer as an input.
  Kernel pass_kernel(size_t i) const;

 private:
  void validate_rows() const;
  void check_outputs_written_once(const std::vector<int64_t>& params) const;
};

}  // namespace kiln
