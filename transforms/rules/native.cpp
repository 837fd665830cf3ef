// Transform rules of the native primitives. Sort moves each element to its sorted place, so its
// derivative follows the permutation (argsort) back with a scatter; gathers and scatters are
// each other's transposes. Scans: cumsum's cotangent is the scan run the other way; cumprod's
// is exact with zeros (the zeros in each window are counted, and the product of the rest
// taken, rather than divided by zero); cummax/cummin send each cotangent to the first place
// that attained the running extreme; logcumsumexp's weights exp(a_j - out_i) are summed in
// log space, split by sign, so nothing overflows. Under vmap every one works along its axis
// shifted past the mapped one, with indices made full-shape.
#include <cmath>

#include "compile/rules.h"
#include "graph/ops.h"
#include "transforms/rules.h"

namespace kiln {

namespace {

using rule::differentiable;

int axis_of(const ArrayNode& n) { return n.params.axes.at(0); }

Array native(const ArrayNode& n, Op op, Shape shape, Dtype dtype, std::vector<Array> inputs) {
  return make_array(std::move(shape), dtype, op, n.params, std::move(inputs), n.stream);
}

// The permutation Sort applied: argsort with the node's own order.
Array permutation(const ArrayNode& n) {
  return native(n, Op::Argsort, n.shape, int64, {n.inputs[0]});
}

std::vector<MaybeArray> no_vjp(const ArrayNode& n, const Array&, const Array&) {
  return std::vector<MaybeArray>(n.inputs.size());
}

MaybeArray no_jvp(const ArrayNode&, const Array&, const std::vector<MaybeArray>&) {
  return std::nullopt;
}

// One input, worked along params.axes[0]: the same primitive one axis further in.
Batched along_axis_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.axes[0] += 1;
  Array x = rule::materialize(in[0], size);
  return {rule::remake(n, rule::prepend(size, n.shape), {x}, p), true};
}

std::vector<MaybeArray> sort_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt};
  const Array& a = n.inputs[0];
  return {scatter_add_along_axis(zeros(a.shape(), a.dtype()), permutation(n), ct, axis_of(n))};
}

MaybeArray sort_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0] || !differentiable(n.dtype)) return std::nullopt;
  return take_along_axis(*t[0], permutation(n), axis_of(n));
}

// ---- scans

// -inf: a logcumsumexp over an empty window (or of -inf only), which no input moves.
Array is_neg_inf(const Array& x) { return x == full({}, -INFINITY, x.dtype()); }

// x shifted by one place along the axis in the scan's direction, `fill` entering at the start.
Array shifted(const Array& x, int ax, bool reverse, const Array& fill_one) {
  int64_t n = x.shape()[ax];
  std::vector<int64_t> lo(x.ndim(), 0), hi(x.shape().begin(), x.shape().end());
  if (reverse)
    lo[ax] = 1;
  else
    hi[ax] = n - 1;
  Array body = slice(x, lo, hi);
  return reverse ? concatenate({body, fill_one}, ax) : concatenate({fill_one, body}, ax);
}

// Where the running max/min of an inclusive scan was first attained, per place (int64).
Array scan_source(const ArrayNode& n, const Array& out) {
  int ax = axis_of(n);
  bool rev = n.params.reverse;
  int64_t len = out.shape()[ax];
  Shape one = out.shape();
  one[ax] = 1;
  Shape pos_shape(out.ndim(), 1);
  pos_shape[ax] = len;
  Array pos = broadcast_to(reshape(arange(len, int64), pos_shape), out.shape());
  // A place starts a new extreme where the running value changes (the first place always).
  Array prev = shifted(out, ax, rev, full(one, 0.0, out.dtype()));
  Array first = broadcast_to(reshape(rev ? pos == len - 1 : pos == 0, pos.shape()), out.shape());
  Array record = logical_or(first, not_equal(out, prev));
  return rev ? cummin(where(record, pos, full({}, static_cast<double>(len - 1), int64)), ax, true)
             : cummax(where(record, pos, zeros({}, int64)), ax);
}

// Signed weights summed in log space: sum over the window of w_j * exp(e_j), as
// exp(lcse(log(w+) + e)) - exp(lcse(log(w-) + e)), with the scan of `n` but in `reverse`.
Array signed_logsum(const Array& w, const Array& e, int ax, bool reverse, bool inclusive,
                    const Array& shift) {
  Array zero = zeros({}, w.dtype());
  Array lp = logcumsumexp(log(maximum(w, zero)) + e, ax, reverse, inclusive);
  Array ln = logcumsumexp(log(maximum(-w, zero)) + e, ax, reverse, inclusive);
  return exp(lp + shift) - exp(ln + shift);
}

std::vector<MaybeArray> scan_vjp(const ArrayNode& n, const Array& out, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt};
  const Array& a = n.inputs[0];
  int ax = axis_of(n);
  bool rev = n.params.reverse, inc = n.params.inclusive;
  Dtype d = n.dtype;
  switch (n.params.scan) {
    case ScanOp::Sum: return {cumsum(ct, ax, !rev, inc)};
    case ScanOp::Prod: {
      Array is0 = a == 0;
      Array b = where(is0, ones({}, d), a);
      Array z = cumsum(astype(is0, d), ax, rev, inc);
      Array cb = ct * cumprod(b, ax, rev, inc);
      Array s0 = cumsum(where(z == 0, cb, zeros({}, d)), ax, !rev, inc);
      Array s1 = cumsum(where(z == 1, cb, zeros({}, d)), ax, !rev, inc);
      return {where(is0, s1, s0) / b};
    }
    case ScanOp::Max:
    case ScanOp::Min: {
      if (!inc)
        throw_error(op_name(n.params.scan),
                    ": no derivative for the exclusive form yet (differentiate the inclusive one "
                    "and shift it)");
      return {scatter_add_along_axis(zeros(a.shape(), d), scan_source(n, out), ct, ax)};
    }
    case ScanOp::LogAddExp: {
      // ct_a[j] = sum over the places i whose window holds j of ct[i] * exp(a[j] - out[i]).
      Array e = where(is_neg_inf(out), full({}, -INFINITY, d), -out);
      return {signed_logsum(ct, e, ax, !rev, inc, a)};
    }
  }
  return {std::nullopt};
}

MaybeArray scan_jvp(const ArrayNode& n, const Array& out, const std::vector<MaybeArray>& t) {
  if (!t[0] || !differentiable(n.dtype)) return std::nullopt;
  const Array& a = n.inputs[0];
  const Array& ta = *t[0];
  int ax = axis_of(n);
  bool rev = n.params.reverse, inc = n.params.inclusive;
  Dtype d = n.dtype;
  switch (n.params.scan) {
    case ScanOp::Sum: return cumsum(ta, ax, rev, inc);
    case ScanOp::Prod: {
      Array is0 = a == 0;
      Array b = where(is0, ones({}, d), a);
      Array z = cumsum(astype(is0, d), ax, rev, inc);
      Array tb = ta / b, zero = zeros({}, d);
      Array nonzero_part = cumsum(where(is0, zero, tb), ax, rev, inc);
      Array zero_part = cumsum(where(is0, tb, zero), ax, rev, inc);
      return cumprod(b, ax, rev, inc) * where(z == 0, nonzero_part, where(z == 1, zero_part, zero));
    }
    case ScanOp::Max:
    case ScanOp::Min:
      if (!inc)
        throw_error(op_name(n.params.scan),
                    ": no derivative for the exclusive form yet (differentiate the inclusive one "
                    "and shift it)");
      return take_along_axis(ta, scan_source(n, out), ax);
    case ScanOp::LogAddExp: {
      Array r = signed_logsum(ta, a, ax, rev, inc, -out);
      return where(is_neg_inf(out), zeros({}, d), r);
    }
  }
  return std::nullopt;
}

// ---- gathers and scatters

// Whether the Gather node's indices are shared by every row (take), of any rank.
bool shares_indices(const ArrayNode& n) {
  return gather_shares_indices(n.inputs[0].ndim(), n.inputs[1].ndim(), n.shape.size());
}

// Indices as full-shape (`shape`) ones with a leading mapped axis of `size`; `shared` ones are
// 1-D and name the coordinate along `ax`.
Array full_indices(int ax, bool shared, const Batched& idx, const Shape& shape, int64_t size) {
  Shape out = rule::prepend(size, shape);
  if (!shared || shape.size() == 1) return broadcast_to(rule::materialize(idx, size), out);
  Shape s(out.size(), 1);
  s[ax + 1] = shape[ax];
  if (idx.mapped) s[0] = size;
  return broadcast_to(reshape(idx.value, s), out);
}

// The transpose of a gather scatters the cotangent back; shared indices of two or more axes
// are flattened first, and so are the cotangent's axes they index.
std::vector<MaybeArray> gather_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt, std::nullopt};
  const Array& a = n.inputs[0];
  Array idx = n.inputs[1], c = ct;
  if (shares_indices(n) && idx.ndim() != 1) {
    int ax = axis_of(n), k = idx.ndim();
    c = flatten(ct, ax, ax + k - 1);
    idx = flatten(idx, 0, -1);
  }
  Array z = zeros(a.shape(), a.dtype());
  return {native(n, Op::ScatterAdd, a.shape(), a.dtype(), {z, idx, c}), std::nullopt};
}

MaybeArray gather_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if (!t[0] || !differentiable(n.dtype)) return std::nullopt;
  return native(n, Op::Gather, n.shape, n.dtype, {*t[0], n.inputs[1]});
}

// Shared indices not mapped stay shared (the axis moves one further in). Mapped ones differ per
// row: they become per-row indices over their flattened axes, split again after the gather.
Batched gather_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.axes[0] += 1;
  int ax = axis_of(n);
  Array a = rule::materialize(in[0], size);
  Shape out = rule::prepend(size, n.shape);
  if (!shares_indices(n))
    return {rule::remake(n, out, {a, full_indices(ax, false, in[1], n.shape, size)}, p), true};
  if (!in[1].mapped) return {rule::remake(n, out, {a, in[1].value}, p), true};
  int k = n.inputs[1].ndim();
  int64_t m = shape_size(n.inputs[1].shape());
  Shape merged(n.shape.begin(), n.shape.begin() + ax);
  merged.push_back(m);
  merged.insert(merged.end(), n.shape.begin() + ax + k, n.shape.end());
  Batched flat{reshape(in[1].value, {size, m}), true};
  Array idx = full_indices(ax, true, flat, merged, size);
  Array g = rule::remake(n, rule::prepend(size, merged), {a, idx}, p);
  return {k == 1 ? g : reshape(g, out), true};
}

std::vector<MaybeArray> scatter_vjp(const ArrayNode& n, const Array&, const Array& ct) {
  if (!differentiable(n.dtype)) return {std::nullopt, std::nullopt, std::nullopt};
  const Array& u = n.inputs[2];
  return {ct, std::nullopt, native(n, Op::Gather, u.shape(), u.dtype(), {ct, n.inputs[1]})};
}

MaybeArray scatter_jvp(const ArrayNode& n, const Array&, const std::vector<MaybeArray>& t) {
  if ((!t[0] && !t[2]) || !differentiable(n.dtype)) return std::nullopt;
  Array ta = t[0] ? *t[0] : rule::zeros_for(n.inputs[0]);
  Array tu = t[2] ? *t[2] : rule::zeros_for(n.inputs[2]);
  return native(n, Op::ScatterAdd, n.shape, n.dtype, {ta, n.inputs[1], tu});
}

Batched scatter_vmap(const ArrayNode& n, const std::vector<Batched>& in, int64_t size) {
  Params p = n.params;
  p.axes[0] += 1;
  Array a = rule::materialize(in[0], size);
  Array u = rule::materialize(in[2], size);
  Array idx = full_indices(axis_of(n), n.inputs[1].ndim() == 1, in[1], n.inputs[2].shape(), size);
  return {rule::remake(n, rule::prepend(size, n.shape), {a, idx, u}, p), true};
}

}  // namespace

const TransformRules kSortTransforms{.vjp = sort_vjp, .jvp = sort_jvp, .vmap = along_axis_vmap};
// Positions are integers: no derivative.
const TransformRules kArgsortTransforms{.vjp = no_vjp, .jvp = no_jvp, .vmap = along_axis_vmap};
const TransformRules kScanTransforms{.vjp = scan_vjp, .jvp = scan_jvp, .vmap = along_axis_vmap};
const TransformRules kGatherTransforms{.vjp = gather_vjp, .jvp = gather_jvp, .vmap = gather_vmap};
const TransformRules kScatterAddTransforms{
    .vjp = scatter_vjp, .jvp = scatter_jvp, .vmap = scatter_vmap};

}  // namespace kiln
