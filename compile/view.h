// An affine view: how a node's coordinates follow from a kernel's domain point. Coordinate j of
// the node is offset[j] + sum_k coeff[j][k] * point[k]. Broadcasts, transposes, slices and
// reshapes that split axes compose into views, so fused kernels read inputs through one index
// map.
#pragma once

#include <cstdint>
#include <vector>

#include "backends/kernel_ir.h"
#include "graph/shape.h"

namespace kiln {

struct View {
  int domain = 0;                           // rank of the kernel's domain
  std::vector<std::vector<int64_t>> coeff;  // [node axis][domain axis]
  std::vector<int64_t> offset;              // [node axis]

  static View identity(int ndim);
  size_t domain_size() const { return static_cast<size_t>(domain); }
  // The view of an input of shape `in` broadcast (NumPy rules) to this view's node shape `out`.
  View broadcast_input(const Shape& in, const Shape& out) const;
  View transpose_input(const std::vector<int>& perm) const;
  View slice_input(const std::vector<int64_t>& start, const std::vector<int64_t>& step) const;
  // For a reshape that adds or removes extent-1 axes or splits axes into several (row-major);
  // false for one that merges axes (their coordinate would need a division).
  bool reshape_input(const Shape& in, const Shape& out, View& result) const;
  // Whether a reshape of `in` into `out` composes into every view (reshape_input holds).
  static bool reshape_is_view(const Shape& in, const Shape& out);
  // The element index map into a buffer of `shape` stored with row-major strides `strides`.
  IndexMap buffer_map(const std::vector<int64_t>& strides) const;
  bool is_identity() const;
  bool operator<(const View& o) const {
    if (domain != o.domain) return domain < o.domain;
    return coeff != o.coeff ? coeff < o.coeff : offset < o.offset;
  }
  bool operator==(const View& o) const {
    return domain == o.domain && coeff == o.coeff && offset == o.offset;
  }
};

}  // namespace kiln
