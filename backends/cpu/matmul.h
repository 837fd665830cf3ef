// Matmul on the cpu backend: each problem goes to the library measured fastest for its shape
// class (benchmarks/bench_matmul.cpp measures them side by side; numbers in matmul.cpp):
//   - matrix-vector (m == 1 or n == 1), float32/float64: OpenBLAS gemv;
//   - float32 with m*n*k >= kOneDnnMinWork: oneDNN's matmul primitive (when built in);
//   - other float32 and all float64 (oneDNN 2.6 has no float64 matmul on CPU): OpenBLAS gemm;
//   - float16/bfloat16: widened to float32 (exact), run by float32's choice, rounded back;
//   - integer dtypes: a plain loop with wrap-around accumulation (the oracle's meaning).
// Whether oneDNN is built in is decided at configure time (CMake finds libdnnl or records why
// not, see matmul_libraries()); nothing falls back at run time. Both libraries accumulate float32
// in float32, so results differ from the oracle's double accumulation by rounding.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace kiln::cpu {

enum class MatmulLibrary { OpenBlasGemm, OpenBlasGemv, OneDnn, Loop };

// Smallest float32 m*n*k that oneDNN takes: below it OpenBLAS's lower call overhead wins.
constexpr int64_t kOneDnnMinWork = int64_t{64} * 64 * 64;

const char* library_name(MatmulLibrary lib);

// The library the rule above picks for a problem.
MatmulLibrary choose_matmul_library(const MatmulArgs& a);

// Runs the problem with the chosen library.
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
