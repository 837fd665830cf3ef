// one_hot and shape helpers (stack, split, pad, tril, triu) built from the primitives. Sorting,
// scans, gathers and scatters are native primitives of their own (graph/ops_native.cpp).

#include <algorithm>

#include "graph/ops.h"

namespace kiln {

namespace {

// 0, 1, ..., n-1 (int64) along axis `axis` of a rank-`rank` array of unit extents elsewhere.
Array positions(int64_t n, int axis, int rank, const StreamOrDevice& s) {
  Shape shape(rank, 1);
  shape[axis] = n;
  return reshape(arange(n, int64, s), shape, s);
}

Array zero_of(const Array& a, const StreamOrDevice& s) { return full({}, 0, a.dtype(), s); }

Array triangle(const Array& a, int k, bool lower, const char* op, const StreamOrDevice& s) {
  if (a.ndim() < 2) throw_error(op, ": needs at least 2 axes, got shape ", a.shape());
  int r = a.ndim();
  Array rows = positions(a.shape()[r - 2], r - 2, r, s),
        cols = positions(a.shape()[r - 1], r - 1, r, s);
  Array diff = subtract(cols, rows, s);
  Array kk = full({}, k, int64, s);
  Array keep = lower ? less_equal(diff, kk, s) : greater_equal(diff, kk, s);
  return where(keep, a, zero_of(a, s), s);
}

}  // namespace

Array one_hot(const Array& indices, int64_t depth, Dtype dtype, StreamOrDevice s) {
  if (!indices.dtype().is_int())
    throw_error("one_hot: indices must be integers, got ", indices.dtype());
  if (depth <= 0) throw_error("one_hot: depth must be positive, got ", depth);
  int r = indices.ndim();
  Array hit = equal(expand_dims(astype(indices, int64, s), r, s), positions(depth, r, r + 1, s), s);
  return astype(hit, dtype, s);
}

Array stack(const std::vector<Array>& arrays, int axis, StreamOrDevice s) {
  if (arrays.empty()) throw_error("stack: needs at least one array");
  int ax = normalize_axis(axis, arrays[0].ndim() + 1, "stack");
  std::vector<Array> parts;
  for (const Array& x : arrays) {
    if (x.shape() != arrays[0].shape())
      throw_error("stack: shapes ", arrays[0].shape(), " and ", x.shape(),
                  " differ; stacked arrays need one shape");
    parts.push_back(expand_dims(x, ax, s));
  }
  return concatenate(parts, ax, s);
}

std::vector<Array> split(const Array& a, const std::vector<int64_t>& indices, int axis,
                         StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("split: cannot split a 0-d array");
  int ax = normalize_axis(axis, a.ndim(), "split");
  int64_t n = a.shape()[ax], at = 0;
  std::vector<Array> parts;
  std::vector<int64_t> bounds = indices;
  bounds.push_back(n);
  for (int64_t b : bounds) {
    int64_t end = std::clamp<int64_t>(b < 0 ? b + n : b, at, n);  // negative: from the end
    std::vector<int64_t> lo(a.ndim(), 0), hi(a.shape().begin(), a.shape().end());
    lo[ax] = at, hi[ax] = end;
    parts.push_back(slice(a, lo, hi, s));
    at = end;
  }
  return parts;
}

std::vector<Array> split(const Array& a, int sections, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("split: cannot split a 0-d array");
  int ax = normalize_axis(axis, a.ndim(), "split");
  int64_t n = a.shape()[ax];
  if (sections <= 0 || n % sections != 0)
    throw_error("split: ", sections, " sections do not divide axis ", ax, " of extent ", n,
                " evenly (give a divisor of ", n, ", or split points)");
  std::vector<int64_t> points;
  for (int i = 1; i < sections; ++i) points.push_back(i * (n / sections));
  return split(a, points, ax, s);
}

Array pad(const Array& a, const std::vector<std::pair<int64_t, int64_t>>& widths, double value,
          StreamOrDevice s) {
  if (widths.size() != static_cast<size_t>(a.ndim()))
    throw_error("pad: ", widths.size(), " (before, after) pairs for an array of ", a.ndim(),
                " axes; give one per axis");
  Array r = a;
  for (int ax = 0; ax < a.ndim(); ++ax) {
    auto [before, after] = widths[ax];
    if (before < 0 || after < 0)
      throw_error("pad: widths must be >= 0, got (", before, ", ", after, ") for axis ", ax);
    std::vector<Array> parts;
    Shape side = r.shape();
    if (before > 0) side[ax] = before, parts.push_back(full(side, value, a.dtype(), s));
    parts.push_back(r);
    if (after > 0) side[ax] = after, parts.push_back(full(side, value, a.dtype(), s));
    if (parts.size() > 1) r = concatenate(parts, ax, s);
  }
  return r;
}

Array tril(const Array& a, int k, StreamOrDevice s) { return triangle(a, k, true, "tril", s); }
Array triu(const Array& a, int k, StreamOrDevice s) { return triangle(a, k, false, "triu", s); }

}  // namespace kiln
