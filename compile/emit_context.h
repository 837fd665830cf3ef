// What a primitive's emission rule (PrimitiveRules::emit in compile/rules.h) may ask of the
// kernel being built: its inputs' values at the views fusion chose, and new Kernel IR values.
// compile/kernel_emit.cpp implements it for one node at one view; a rule returns the index of
// the value that computes the node.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backends/kernel_ir.h"
#include "compile/view.h"

namespace kiln {

class EmitContext {
 public:
  virtual ~EmitContext() = default;
  // The value of input i, read at the view input_view gives (a planner bug if it gives none).
  virtual int input(size_t i) = 0;
  // Whether input i is read through a view (see PrimitiveRules::input_view).
  virtual bool has_view(size_t i) const = 0;
  // Input i, stored, read by the node's row-major index (a reshape that is not a view).
  virtual int load_row_major(size_t i) = 0;
  // Input i, stored, read at the node's element with its coordinate on `axis` replaced by the
  // row the int64 value `index` picks (a Gather: take's wrap and clamp, backends/kernel_ir.h).
  virtual int load_gathered(size_t i, int axis, int index) = 0;
  virtual int add(Value v) = 0;
  // A user value: a launch scalar, so a new value reuses the compiled kernel.
  virtual int constant(Scalar c) = 0;
  // A value that shapes the generated code (backends/kernel_ir.h lists them): part of the hash.
  virtual int immediate(Scalar c) = 0;
  // Appends a launch parameter word; returns its index.
  virtual int32_t launch_param(int64_t word) = 0;
  // An extent, stride or offset: a launch parameter when the kernel takes runtime dims.
  virtual Dim dim(int64_t v) = 0;
  virtual IndexMap runtime_map(IndexMap m) = 0;  // dim() applied to a map's non-zero entries
  virtual bool runtime_dims() const = 0;
  virtual size_t domain_rank() const = 0;
  // The view at which the node is computed (its element for each kernel index).
  virtual const View& view() const = 0;
};

}  // namespace kiln
