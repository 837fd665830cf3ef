// The work-group layout of C-family kernels: one program per Kernel whose entry points share one
// argument list (the kernel's buffers b0.., every launch word as a 64-bit integer p0.., the float
// launch scalars converted on the host c<value>.., and for reductions three work-group arrays
// sized by the launch). OpenCL C uses it; CUDA C or Metal would, with their own WorkgroupDialect.
//  - Element-wise: entry `kiln_map`; on a CPU device each work-item walks one contiguous run
//    (LayoutOptions::cpu), on a GPU one element per work-item (or a vector of them).
//  - Reductions: `kiln_reduce`, a work-group per output element (grid-stride over outputs), a
//    tree in work-group memory, work-item 0 runs the epilogue; `kiln_rows`, a work-item per
//    output, for many outputs; full reductions also `kiln_part` (each group reduces a chunk into
//    a scratch buffer) and `kiln_final` (one group combines the partials, then the epilogue).
#pragma once

#include <string>
#include <vector>

#include "backends/kernel_ir.h"
#include "backends/source/dialect.h"

namespace kiln::source {

// A language's words for the layout (work-item builtins of dimension 0, address spaces).
struct Builtins {
  std::string entry;   // before an entry point's name ("__kernel void ")
  std::string global;  // a device buffer argument's address space ("__global ")
  std::string local;   // a work-group array argument's address space ("__local ")
  std::string helper;  // before a helper function ("inline ")
  std::string index;   // the 64-bit signed integer of indices and launch words ("long")
  std::string global_id, global_size, local_id, local_size, group_id, num_groups;
  std::string barrier;  // a work-group barrier on work-group memory
  std::string min;      // the integer minimum function
};

class WorkgroupDialect : public Dialect {
 public:
  virtual const Builtins& words() const = 0;
  // What a program starts with: pragmas, extensions, helper functions.
  virtual std::string preamble() = 0;
  // The element type of a buffer of dtype d, and the unsigned type integer sums wrap in.
  virtual std::string storage_type(Dtype d) const = 0;
  virtual std::string unsigned_type(Dtype d) const = 0;
  // On a CPU device, an element-wise run goes in segments along the last axis; a segment may
  // first go several points at a time through the language's vector types: writes that loop
  // (advancing the linear index `g` and the last coordinate toward `stop`) where it applies.
  virtual void vector_run(Emitter& em, const std::string& ind) { (void)em, (void)ind; }
  // On a CPU device, a reduction over one axis may fold several positions at a time through
  // vector types: writes a loop folding positions from `q0` (advanced) toward `hi` into the
  // state `acc`/`pos`/`has` with kiln_comb, where it applies. `acc` is the state's dtype.
  virtual void vector_fold(Emitter& em, Dtype acc, const std::string& q0, const std::string& hi,
                           const std::string& ind) {
    (void)em, (void)acc, (void)q0, (void)hi, (void)ind;
  }
  // On a GPU, an element-wise kernel may take several consecutive points per work-item through
  // the language's vector types (wider memory accesses): how many (0: one point per item), and
  // the writes of those points' values and stores from coordinate i0, a multiple of the count.
  virtual int map_lanes() { return 0; }
  virtual void vector_map(Emitter& em, const std::string& ind) { (void)em, (void)ind; }
};

struct LayoutOptions {
  bool cpu = false;      // a CPU device: contiguous runs per work-item (see above)
  bool float64 = false;  // float sums and products accumulate in double
};

struct Program {
  std::string source;
  int num_params = 0;              // 64-bit launch words p0..
  std::vector<int> scalar_values;  // body values passed as float arguments c<value>
  bool reduction = false;
  bool split = false;   // kiln_part / kiln_final exist
  size_t acc_size = 0;  // bytes of one accumulator (work-group array and scratch element)
  int map_points = 1;   // kiln_map's points per work-item on a GPU (WorkgroupDialect::map_lanes)
};

Program workgroup_program(const Kernel& k, WorkgroupDialect& d, const LayoutOptions& o);

}  // namespace kiln::source
