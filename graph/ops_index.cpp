// Gathers, scatters, sorting and shape helpers built from the primitives. A gather or scatter
// selects with a mask (index == position) and reduces, so every backend runs it as a fused
// reduction, reverse mode turns a gather into the matching scatter by itself, and no index can
// read out of bounds. Sorting ranks each element by counting the elements before it.

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

// Indices as int64 in [0, n): negative ones from the end, out-of-range ones clamped.
Array valid_indices(const Array& indices, int64_t n, const char* op, const StreamOrDevice& s) {
  if (!indices.dtype().is_int())
    throw_error(op, ": indices must be integers, got ", indices.dtype(),
                " (cast with astype(i, int64))");
  if (n == 0) throw_error(op, ": cannot index an axis of extent 0");
  Array i = astype(indices, int64, s);
  Array zero = full({}, 0, int64, s);
  i = where(less(i, zero, s), add(i, full({}, static_cast<double>(n), int64, s), s), i, s);
  return clip(i, zero, full({}, static_cast<double>(n - 1), int64, s), s);
}

Array zero_of(const Array& a, const StreamOrDevice& s) { return full({}, 0, a.dtype(), s); }

// sum over `axis` of where(mask, values, 0), in values' dtype.
Array select_sum(const Array& mask, const Array& values, int axis, const StreamOrDevice& s) {
  Array r = sum(where(mask, values, zero_of(values, s), s), axis, false, s);
  return astype(r, values.dtype(), s);
}

// rank[..., i]: how many elements of the row come before element i in the order (ascending
// or descending, NaN after every number, ties by position), along the last axis.
Array ranks(const Array& x, bool descending, const StreamOrDevice& s) {
  int r = x.ndim();
  Array xi = expand_dims(x, r, s), xj = expand_dims(x, r - 1, s);  // [.., i, 1] and [.., 1, j]
  Array before = descending ? greater(xj, xi, s) : less(xj, xi, s);
  Array tie = equal(xj, xi, s);
  if (x.dtype().is_float()) {
    Array nan_i = not_equal(xi, xi, s), nan_j = not_equal(xj, xj, s);
    Array nan_order = descending ? logical_and(nan_j, logical_not(nan_i, s), s)
                                 : logical_and(logical_not(nan_j, s), nan_i, s);
    before = logical_or(before, nan_order, s);
    tie = logical_or(tie, logical_and(nan_i, nan_j, s), s);
  }
  int64_t n = x.shape().back();
  Array j_first = less(positions(n, r, r + 1, s), positions(n, r - 1, r + 1, s), s);
  before = logical_or(before, logical_and(tie, j_first, s), s);
  return sum(astype(before, int32, s), r, false, s);
}

// The first k elements in rank order and their positions, along the last axis.
std::pair<Array, Array> by_rank(const Array& x, const Array& rank, int64_t k,
                                const StreamOrDevice& s) {
  int r = x.ndim();
  int64_t n = x.shape().back();
  Array mask = equal(expand_dims(rank, r - 1, s), astype(positions(k, r - 1, r + 1, s), int32, s),
                     s);  // [.., k, i]
  Array values = select_sum(mask, expand_dims(x, r - 1, s), r, s);
  Array index = select_sum(mask, positions(n, r, r + 1, s), r, s);
  return {values, index};
}

std::pair<Array, Array> sorted(const Array& a, int axis, bool descending, int64_t k, const char* op,
                               const StreamOrDevice& s) {
  if (a.ndim() == 0) throw_error(op, ": needs at least one axis, got a 0-d array");
  int ax = normalize_axis(axis, a.ndim(), op);
  Array x = moveaxis(a, ax, a.ndim() - 1, s);
  auto [values, index] = by_rank(x, ranks(x, descending, s), k, s);
  return {moveaxis(values, a.ndim() - 1, ax, s), moveaxis(index, a.ndim() - 1, ax, s)};
}

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

Array take(const Array& a, const Array& indices, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("take: cannot take from a 0-d array");
  int ax = normalize_axis(axis, a.ndim(), "take");
  int64_t n = a.shape()[ax];
  Array i = reshape(valid_indices(indices, n, "take", s), {-1}, s);  // (m)
  Array rows = moveaxis(a, ax, 0, s);                                // (n, rest...)
  int rest = a.ndim() - 1;
  Array mask = equal(reshape(i, {i.size(), 1}, s), reshape(arange(n, int64, s), {1, n}, s), s);
  Shape mshape{i.size(), n};
  mshape.insert(mshape.end(), rest, 1);
  Array picked = select_sum(reshape(mask, mshape, s), expand_dims(rows, 0, s), 1, s);  // (m, rest)
  Shape out = indices.shape();
  out.insert(out.end(), rows.shape().begin() + 1, rows.shape().end());
  Array r = reshape(picked, out, s);
  // Put the index axes where `axis` was: a[:axis] + indices + a[axis+1:].
  int ni = indices.ndim();
  std::vector<int> perm;
  for (int d = 0; d < ax; ++d) perm.push_back(ni + d);
  for (int d = 0; d < ni; ++d) perm.push_back(d);
  for (int d = ax; d < rest; ++d) perm.push_back(ni + d);
  return transpose(r, perm, s);
}

Array take_along_axis(const Array& a, const Array& indices, int axis, StreamOrDevice s) {
  if (indices.ndim() != a.ndim())
    throw_error("take_along_axis: indices of shape ", indices.shape(), " need the rank of a (",
                a.ndim(), ", shape ", a.shape(), ")");
  int ax = normalize_axis(axis, a.ndim(), "take_along_axis");
  int64_t n = a.shape()[ax];
  Array i = valid_indices(indices, n, "take_along_axis", s);
  Array mask = equal(expand_dims(i, ax + 1, s), positions(n, ax + 1, a.ndim() + 1, s), s);
  return select_sum(mask, expand_dims(a, ax, s), ax + 1, s);
}

Array scatter_add(const Array& a, const Array& indices, const Array& updates, int axis,
                  StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("scatter_add: cannot scatter into a 0-d array");
  int ax = normalize_axis(axis, a.ndim(), "scatter_add");
  if (indices.ndim() != 1)
    throw_error("scatter_add: indices must be 1-D, got shape ", indices.shape());
  Shape want = a.shape();
  want[ax] = indices.shape()[0];
  if (updates.shape() != want)
    throw_error("scatter_add: updates of shape ", updates.shape(), " for a of shape ", a.shape(),
                " and ", indices.shape()[0], " indices along axis ", ax, "; expected shape ", want);
  int64_t n = a.shape()[ax], m = indices.shape()[0];
  Array i = valid_indices(indices, n, "scatter_add", s);
  Array mask = equal(reshape(i, {m, 1}, s), reshape(arange(n, int64, s), {1, n}, s), s);
  Shape mshape{m, n};
  mshape.insert(mshape.end(), a.ndim() - 1, 1);
  Array u = expand_dims(moveaxis(astype(updates, a.dtype(), s), ax, 0, s), 1, s);  // (m, 1, rest)
  Array added = select_sum(reshape(mask, mshape, s), u, 0, s);                     // (n, rest)
  return add(a, moveaxis(added, 0, ax, s), s);
}

Array sort(const Array& a, int axis, StreamOrDevice s) {
  int64_t n = a.ndim() ? a.shape()[normalize_axis(axis, a.ndim(), "sort")] : 0;
  return sorted(a, axis, false, n, "sort", s).first;
}

Array argsort(const Array& a, int axis, StreamOrDevice s) {
  int64_t n = a.ndim() ? a.shape()[normalize_axis(axis, a.ndim(), "argsort")] : 0;
  return sorted(a, axis, false, n, "argsort", s).second;
}

std::pair<Array, Array> topk(const Array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("topk: needs at least one axis, got a 0-d array");
  int64_t n = a.shape().back();
  if (k < 1 || k > n)
    throw_error("topk: k = ", k, " but the last axis has ", n, " elements (valid: 1..", n, ")");
  return sorted(a, -1, true, k, "topk", s);
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
