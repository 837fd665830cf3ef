// NumPy .npy files in and out, so users can bring data to Kiln and take results away.
// Reads format versions 1.0-3.0, little-endian, C or Fortran order, dtypes bool, int32, int64,
// float32 and float64; anything else is rejected with a kiln::Error naming what was found.
#pragma once

#include <string>

#include "graph/array.h"

namespace kiln {

Array load_npy(const std::string& path, StreamOrDevice s = {});
void save_npy(const std::string& path, const Array& a);  // evaluates `a` first

}  // namespace kiln
