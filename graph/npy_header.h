// The header of a .npy file: a Python dict literal with 'descr', 'fortran_order' and 'shape'.
// A small hand-written parser reads it in one pass with bounded work and no recursion, so a
// hostile header (huge strings, deep nesting, giant numbers) gets a kiln::Error, never a crash.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "graph/shape.h"

namespace kiln {

// NumPy refuses headers longer than this (numpy.lib.format's max_header_size) unless told to
// trust the file; Kiln never does.
inline constexpr size_t kNpyMaxHeaderBytes = 10000;

struct NpyHeader {
  std::string descr;  // the dtype string as written, e.g. "<f4"; mapped to a Dtype by npy.cpp
  bool fortran_order = false;
  Shape shape;
};

// Parses the dict that follows the magic, version and length fields. `file` names the file in
// errors. Raises kiln::Error saying what was found, where, and what is valid.
NpyHeader parse_npy_header(std::string_view text, const std::string& file);

}  // namespace kiln
