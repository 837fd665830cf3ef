// The shared source emitter of the C-family backends (OpenCL C, GLSL; CUDA C or Metal would be
// a dialect more): it walks a Kernel's SSA body in order, defines each value through the
// Dialect's spelling of its op, and writes constants, coordinates and stores. A backend's kernel
// layout (its entry points, loops over the domain, reduction scheme) is written on top of it.
// KILN_CODEGEN_CORPUS=<file> appends every kernel generated to <file> (Kernel::str() listings),
// which is how tests/golden/codegen/kernels.txt was gathered from the differential tests.
#pragma once

#include <sstream>
#include <string>

#include "backends/kernel_ir.h"
#include "backends/source/dialect.h"

namespace kiln::source {

class Emitter {
 public:
  Emitter(const Kernel& k, Dialect& d);

  const Kernel& kernel() const { return k_; }
  std::ostringstream& out() { return os_; }
  static std::string v(int i) { return "v" + std::to_string(i); }

  // The expression of body value i (a Constant's is its literal or launch scalar).
  std::string expr(int i);
  // Defines body values [from, to), skipping Constants (see constants) and the Reduce value.
  void values(int from, int to, const std::string& ind);
  // Defines every Constant (a kernel's prologue and epilogue both read them).
  void constants(const std::string& ind);
  void stores(const std::string& ind);

 private:
  const Kernel& k_;
  Dialect& d_;
  std::ostringstream os_;
};

// Appends k's listing to $KILN_CODEGEN_CORPUS when that is set (see above).
void record_for_corpus(const Kernel& k);

}  // namespace kiln::source
