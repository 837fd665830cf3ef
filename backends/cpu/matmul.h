// Matmul on the cpu backend: float32/float64 through OpenBLAS (cblas_sgemm/dgemm, row-major,
// one call per batch element at MatmulArgs' offsets); integer and bool dtypes through a plain
// loop with wrap-around accumulation (the oracle's meaning). OpenBLAS accumulates float32 in
// float32, so results differ from the oracle's double accumulation by rounding.
#pragma once

#include "backends/backend.h"

namespace kiln::cpu {

void matmul(const MatmulArgs& a);

}  // namespace kiln::cpu
