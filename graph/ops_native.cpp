// Sorting, scans, gathers and scatters: the ops over native primitives (Op::Sort, Argsort,
// Scan, Gather, ScatterAdd), which each backend runs as one library call (radix sorts and
// parallel scans on cpu; see backends/native.h). This file checks arguments, casts indices
// to int64 and turns each op into its primitive.
#include <algorithm>

#include "graph/array_node.h"
#include "graph/device_hooks.h"
#include "graph/ops.h"

namespace kiln {

namespace {

Array make(Shape shape, Dtype dtype, Op op, Params p, std::vector<Array> inputs,
           const StreamOrDevice& s) {
  checked_nbytes(shape, dtype, op_name(op));
  return make_array(std::move(shape), dtype, op, std::move(p), std::move(inputs),
                    resolve_stream(s));
}

Params along(int axis) {
  Params p;
  p.axes = {axis};
  return p;
}

Array index_array(const Array& indices, const char* op, const StreamOrDevice& s) {
  if (!indices.dtype().is_int())
    throw_error(op, ": indices must be integers, got ", indices.dtype(),
                " (cast with astype(i, int64))");
  return indices.dtype() == int64 ? indices : astype(indices, int64, s);
}

Array sorted(const Array& a, int axis, bool descending, bool indices, const char* op,
             const StreamOrDevice& s) {
  if (a.ndim() == 0) throw_error(op, ": needs at least one axis, got a 0-d array");
  Params p = along(normalize_axis(axis, a.ndim(), op));
  p.descending = descending;
  return indices ? make(a.shape(), int64, Op::Argsort, p, {a}, s)
                 : make(a.shape(), a.dtype(), Op::Sort, p, {a}, s);
}

Array scan(const Array& a, int axis, ScanOp op, bool reverse, bool inclusive,
           const StreamOrDevice& s) {
  const char* name = op_name(op);
  if (a.ndim() == 0) throw_error(name, ": needs at least one axis, got a 0-d array");
  Params p = along(normalize_axis(axis, a.ndim(), name));
  p.scan = op;
  p.reverse = reverse;
  p.inclusive = inclusive;
  Array x = a;
  if (op == ScanOp::Sum || op == ScanOp::Prod) {
    if (a.dtype().size() == 1) x = astype(a, a.dtype() == uint8 ? uint32 : int32, s);
  } else if (op == ScanOp::LogAddExp && !a.dtype().is_float()) {
    x = astype(a, float_result_type(a.dtype()), s);
  }
  return make(x.shape(), x.dtype(), Op::Scan, p, {x}, s);
}

void check_rank(const Array& a, const char* op) {
  if (a.ndim() == 0) throw_error(op, ": needs an array with at least one axis, got a 0-d array");
}

// The gather or scatter of `x` along `ax` at full-shape indices (the output's, or the
// updates' shape), after the extent check.
void check_extent(int64_t n, int64_t m, const char* op) {
  if (n == 0 && m > 0)
    throw_error(op, ": cannot index an axis of extent 0 (", m, " indices given)");
}

}  // namespace

Array cumsum(const Array& a, int axis, StreamOrDevice s) {
  return scan(a, axis, ScanOp::Sum, false, true, s);
}
Array cumsum(const Array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, ScanOp::Sum, reverse, inclusive, s);
}
Array cumprod(const Array& a, int axis, StreamOrDevice s) {
  return scan(a, axis, ScanOp::Prod, false, true, s);
}
Array cumprod(const Array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, ScanOp::Prod, reverse, inclusive, s);
}
Array cummax(const Array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, ScanOp::Max, reverse, inclusive, s);
}
Array cummin(const Array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, ScanOp::Min, reverse, inclusive, s);
}
Array logcumsumexp(const Array& a, int axis, bool reverse, bool inclusive, StreamOrDevice s) {
  return scan(a, axis, ScanOp::LogAddExp, reverse, inclusive, s);
}

Array take(const Array& a, const Array& indices, int axis, StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("take: cannot take from a 0-d array");
  int ax = normalize_axis(axis, a.ndim(), "take");
  Array i = index_array(indices, "take", s);
  check_extent(a.shape()[ax], i.size(), "take");
  // The indices' axes replace the gathered one; the gather takes them as they are, whatever
  // their rank, so no reshape with a fixed shape is recorded (a shapeless compile replays the
  // graph with new shapes). A 0-d index is one of extent 1, squeezed away: the library call
  // reads its indices from a buffer, and a 0-d array travels as a launch value.
  if (i.ndim() == 0) return squeeze(take(a, expand_dims(i, 0, s), ax, s), {ax}, s);
  Shape out(a.shape().begin(), a.shape().begin() + ax);
  out.insert(out.end(), i.shape().begin(), i.shape().end());
  out.insert(out.end(), a.shape().begin() + ax + 1, a.shape().end());
  return make(out, a.dtype(), Op::Gather, along(ax), {a, i}, s);
}

Array take_along_axis(const Array& a, const Array& indices, int axis, StreamOrDevice s) {
  if (indices.ndim() != a.ndim())
    throw_error("take_along_axis: indices of shape ", indices.shape(), " need the rank of a (",
                a.ndim(), ", shape ", a.shape(), ")");
  check_rank(a, "take_along_axis");
  int ax = normalize_axis(axis, a.ndim(), "take_along_axis");
  Array i = index_array(indices, "take_along_axis", s);
  // Broadcast the other axes against each other; the axis keeps a's and the indices' extents.
  Shape ai = a.shape(), ii = i.shape();
  ai[ax] = ii[ax] = 1;
  Shape common = broadcast_shapes(ai, ii, "take_along_axis");
  Shape as = common, is = common;
  as[ax] = a.shape()[ax];
  is[ax] = i.shape()[ax];
  check_extent(as[ax], shape_size(is), "take_along_axis");
  Array x = a.shape() == as ? a : broadcast_to(a, as, s);
  if (i.shape() != is) i = broadcast_to(i, is, s);
  return make(is, a.dtype(), Op::Gather, along(ax), {x, i}, s);
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
  Array i = index_array(indices, "scatter_add", s);
  check_extent(a.shape()[ax], i.size(), "scatter_add");
  Array u = updates.dtype() == a.dtype() ? updates : astype(updates, a.dtype(), s);
  return make(a.shape(), a.dtype(), Op::ScatterAdd, along(ax), {a, i, u}, s);
}

Array scatter_add_along_axis(const Array& a, const Array& indices, const Array& updates, int axis,
                             StreamOrDevice s) {
  check_rank(a, "scatter_add_along_axis");
  int ax = normalize_axis(axis, a.ndim(), "scatter_add_along_axis");
  Shape want = a.shape();
  if (indices.ndim() == a.ndim()) want[ax] = indices.shape()[ax];
  if (indices.shape() != want || updates.shape() != want)
    throw_error("scatter_add_along_axis: indices of shape ", indices.shape(),
                " and updates of shape ", updates.shape(), " for a of shape ", a.shape(),
                " along axis ", ax, "; both need a's shape except at the axis");
  Array i = index_array(indices, "scatter_add_along_axis", s);
  check_extent(a.shape()[ax], i.size(), "scatter_add_along_axis");
  Array u = updates.dtype() == a.dtype() ? updates : astype(updates, a.dtype(), s);
  return make(a.shape(), a.dtype(), Op::ScatterAdd, along(ax), {a, i, u}, s);
}

Array sort(const Array& a, int axis, StreamOrDevice s) {
  return sorted(a, axis, false, false, "sort", s);
}

Array argsort(const Array& a, int axis, StreamOrDevice s) {
  return sorted(a, axis, false, true, "argsort", s);
}

std::pair<Array, Array> topk(const Array& a, int k, StreamOrDevice s) {
  if (a.ndim() == 0) throw_error("topk: needs at least one axis, got a 0-d array");
  int64_t n = a.shape().back();
  if (k < 1 || k > n)
    throw_error("topk: k = ", k, " but the last axis has ", n, " elements (valid: 1..", n, ")");
  Array order = sorted(a, -1, true, true, "topk", s);
  std::vector<int64_t> lo(a.ndim(), 0), hi(a.shape().begin(), a.shape().end());
  hi.back() = k;
  Array first = k == n ? order : slice(order, lo, hi, s);
  return {take_along_axis(a, first, -1, s), first};
}

Array partition(const Array& a, int kth, int axis, StreamOrDevice s) {
  Array r = sort(a, axis, s);
  int64_t n = a.shape()[normalize_axis(axis, a.ndim(), "partition")];
  if (kth < -n || kth >= n)
    throw_error("partition: kth = ", kth, " for an axis of ", n, " elements (valid: ", -n, "..",
                n - 1, ")");
  return r;
}

Array argpartition(const Array& a, int kth, int axis, StreamOrDevice s) {
  Array r = argsort(a, axis, s);
  int64_t n = a.shape()[normalize_axis(axis, a.ndim(), "argpartition")];
  if (kth < -n || kth >= n)
    throw_error("argpartition: kth = ", kth, " for an axis of ", n, " elements (valid: ", -n, "..",
                n - 1, ")");
  return r;
}

}  // namespace kiln
