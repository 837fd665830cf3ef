// Shapes, strides and NumPy broadcasting. Shape is a plain vector of extents; these helpers do
// the checking and raise kiln::Error naming the op when shapes do not fit.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "graph/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;

int64_t shape_size(const Shape& s);
std::string to_string(const Shape& s);  // "(2, 3)"
std::ostream& operator<<(std::ostream& os, const Shape& s);

// Row-major element strides of a contiguous array of this shape.
std::vector<int64_t> contiguous_strides(const Shape& s);

// NumPy broadcasting of two shapes; `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// Maps a possibly negative axis into [0, ndim); raises naming `op` when out of range.
int normalize_axis(int axis, int ndim, const char* op);

// Normalizes, sorts and de-duplicates-checks a list of axes; empty `axes` means all axes.
std::vector<int> normalize_axes(const std::vector<int>& axes, int ndim, const char* op);

// The most bytes one array may hold: every byte offset and size then fits int64 with room for
// the arithmetic kernels do on it (NumPy's own limit is the same order).
inline constexpr int64_t kMaxArrayBytes = int64_t{1} << 62;

// Raises when any extent is negative or the element count overflows kMaxArrayBytes.
void check_shape(const Shape& s, const char* op);
// Raises (naming `op`) for a Dtype whose kind is none of Kiln's (made from a number).
void check_dtype(Dtype d, const char* op);
// The bytes an array of this shape and dtype holds; raises (naming `op`) when any extent is
// negative or the byte size exceeds kMaxArrayBytes. Every size computation goes through here.
size_t checked_nbytes(const Shape& s, Dtype d, const char* op);

}  // namespace kiln
