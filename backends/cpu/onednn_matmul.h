// float32 GEMM through oneDNN's matmul primitive (Debian's libdnnl, oneDNN 2.6), one tile on the
// calling thread: the cpu backend spreads tiles over TBB itself (gemm_tiles.h). Built only when
// the library was found at configure time (KILN_HAVE_ONEDNN); no oneDNN type appears here.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::cpu {

// A matmul operand: its first element, the leading dimension of the row-major matrix stored
// there, and whether what is stored is the operand's transpose.
struct OneDnnOperand {
  const float* data;
  int64_t ld;
  bool transposed;
};

// C = A @ B for m x k and k x n operands (each stored as is or transposed) and a row-major C
// with leading dimension ldc, on the calling thread alone. Thread-safe. The primitive for a
// (shape, layouts) is created on first use and kept: creation JIT-compiles a kernel (0.1-0.4 ms).
void onednn_sgemm(const OneDnnOperand& A, const OneDnnOperand& B, float* C, int64_t ldc, int64_t m,
                  int64_t n, int64_t k);

// "oneDNN 2.6.3": the library's version.
std::string onednn_version();

// Primitives created so far (each distinct shape and layout once).
int64_t onednn_primitive_count();

}  // namespace kiln::cpu
