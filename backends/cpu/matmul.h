// Matmul on the cpu backend: float problems go to one of the libraries Kiln links, chosen per
// shape class by measuring this host (matmul_classes.h, tune.h; bench_matmul compares them):
//   - OpenBLAS gemm (float32, float64), and gemv for matrix-vector shapes (m == 1 or n == 1);
//   - oneDNN's matmul primitive for float32 (when built in; oneDNN 2.6 has no float64 matmul);
//   - float16/bfloat16: widened to float32 (exact), run by float32's choice, rounded back;
//   - integer dtypes: a plain loop with wrap-around accumulation (the oracle's meaning).
// Each reads an operand stored transposed (MatmulArgs::trans_a/trans_b) in place: BLAS's and
// oneDNN's transpose flags or strides, gemv's either layout, the loop's strides.
// Every library runs tiles of C over TBB (gemm_tiles.h). Whether oneDNN is built in is decided
// at configure time (CMake finds libdnnl or records why not, see matmul_libraries()); nothing
// falls back at run time. Both libraries accumulate float32 in float32, so results differ from
// the oracle's double accumulation by rounding.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace kiln::cpu {

enum class MatmulLibrary { OpenBlasGemm, OpenBlasGemv, OneDnn, Loop };

const char* library_name(MatmulLibrary lib);

// The library measured fastest for the problem's shape class on this host (measuring it first
// if no process has yet; matmul_classes.h), or the one KILN_MATMUL forces.
MatmulLibrary choose_matmul_library(const MatmulArgs& a);

// Runs the problem with the chosen library; kiln::Error for a malformed problem.
void matmul(const MatmulArgs& a);

// Runs the problem with `lib` (tests and benchmarks compare the libraries); raises kiln::Error
// when `lib` cannot run it (oneDNN not built in, a dtype or shape the library does not take).
void matmul_with(MatmulLibrary lib, const MatmulArgs& a);

// True when oneDNN was found at configure time.
bool have_onednn();

// oneDNN primitives created so far (0 without oneDNN): tests check that shapes reuse theirs.
int64_t onednn_primitives_created();

// One line for `kiln devices`: "matmul: oneDNN 2.6.3 (float32), OpenBLAS 0.3.21 Haswell", or why
// oneDNN is absent.
std::string matmul_libraries();

}  // namespace kiln::cpu
