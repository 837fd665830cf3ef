#include "backends/split_reduce.h"

#include <algorithm>
#include <map>

namespace kiln {

namespace {

bool constant_map(const IndexMap& m) {
  for (const Dim& d : m.strides)
    if (d.is_runtime()) return false;
  return !m.offset.is_runtime();
}

bool all_constant(const Kernel& k) {
  for (const KernelBuffer& b : k.buffers)
    if (!constant_map(b.map)) return false;
  for (const Value& v : k.body)
    if ((v.kind == ValueKind::Index && !constant_map(v.map)) ||
        (v.kind == ValueKind::Gather && (v.step.is_runtime() || v.extent.is_runtime())))
      return false;
  for (const Dim& d : k.domain)  // the kept extents size the scratch buffer
    if (d.is_runtime()) return false;
  return true;
}

// A map over [K..., elements first .. first + parts*len) as one over [K..., part, element].
IndexMap split_map(const IndexMap& m, int64_t len, int64_t first) {
  IndexMap out = m;
  int64_t s = m.strides.back().value;
  out.strides.back() = Dim::constant(s * len);
  out.strides.push_back(Dim::constant(s));
  out.offset = Dim::constant(m.offset.value + first * s);
  return out;
}

// Row-major strides of the scratch buffer [K..., nparts] over `axes` leading domain axes (the
// kept ones), then `zeros` zero strides.
std::vector<Dim> scratch_strides(const std::vector<Dim>& kept, int64_t nparts, int zeros) {
  std::vector<Dim> st(kept.size());
  int64_t step = nparts;
  for (size_t a = kept.size(); a-- > 0;) {
    st[a] = Dim::constant(step);
    step *= kept[a].value;
  }
  st.push_back(Dim::constant(1));
  for (int z = 0; z < zeros; ++z) st.push_back(Dim::constant(0));
  return st;
}

// `parts` partial reductions of `len` elements each per row, starting at element `first`,
// written to partials out_offset... of each row of the scratch buffer (nparts per row).
Kernel make_part(const Kernel& k, Dtype partial, int64_t parts, int64_t len, int64_t first,
                 int64_t out_offset, int64_t nparts, const char* suffix) {
  const Reduction& red = *k.reduce;
  std::vector<Dim> kept(k.domain.begin(), k.domain.end() - 1);
  Kernel p;
  p.name = k.name + suffix;
  p.domain = kept;
  p.domain.push_back(Dim::constant(parts));
  p.domain.push_back(Dim::constant(len));
  for (const KernelBuffer& b : k.buffers)
    p.buffers.push_back({b.dtype, false, split_map(b.map, len, first)});  // parts store none
  p.buffers.push_back(
      {partial, true, {scratch_strides(kept, nparts, 1), Dim::constant(out_offset)}});
  for (int i = 0; i < red.value; ++i) {
    Value v = k.body[i];
    if (v.kind == ValueKind::Index) v.map = split_map(v.map, len, first);
    p.body.push_back(v);
  }
  Value r = k.body[red.value];
  r.dtype = partial;
  p.body.push_back(r);
  p.reduce = Reduction{red.op, 1, red.value};
  p.stores = {{static_cast<int>(k.buffers.size()), red.value}};
  return p;
}

// Reduces each row's partials in order, then runs the original epilogue and stores (their maps
// are read at reduced index 0, as in the original kernel).
Kernel make_combine(const Kernel& k, Dtype partial, int64_t nparts) {
  const Reduction& red = *k.reduce;
  std::vector<Dim> kept(k.domain.begin(), k.domain.end() - 1);
  Kernel c;
  c.name = k.name + "_combine";
  c.domain = kept;
  c.domain.push_back(Dim::constant(nparts));
  c.buffers = k.buffers;  // the same rank; only epilogue loads are used
  c.buffers.push_back({partial, false, {scratch_strides(kept, nparts, 0), Dim::constant(0)}});
  std::map<int, int> renumber;
  Value load;
  load.kind = ValueKind::Load, load.dtype = partial;
  load.buffer = static_cast<int>(k.buffers.size());
  c.body.push_back(load);
  for (int i = 0; i < red.value; ++i)  // constants the epilogue may use
    if (k.body[i].kind == ValueKind::Constant) {
      renumber[i] = static_cast<int>(c.body.size());
      c.body.push_back(k.body[i]);
    }
  Value r = k.body[red.value];
  r.a = 0;
  renumber[red.value] = static_cast<int>(c.body.size());
  c.reduce = Reduction{red.op, 1, static_cast<int>(c.body.size())};
  c.body.push_back(r);
  for (int i = red.value + 1; i < static_cast<int>(k.body.size()); ++i) {
    Value v = k.body[i];
    for (int* op : {&v.a, &v.b, &v.c})
      if (*op >= 0) *op = renumber.at(*op);
    renumber[i] = static_cast<int>(c.body.size());
    c.body.push_back(v);
  }
  for (const Store& s : k.stores) c.stores.push_back({s.buffer, renumber.at(s.value)});
  return c;
}

}  // namespace

namespace {

std::optional<SplitReduce> split(const Kernel& k, const SplitOptions& opt) {
  if (!k.reduce || k.reduce->naxes != 1) return std::nullopt;
  if (k.reduce->op == ReduceOp::Argmax || !all_constant(k)) return std::nullopt;
  int64_t n = k.domain.back().value;
  if (n < opt.min_elements) return std::nullopt;
  const Value& rv = k.body[k.reduce->value];
  Dtype in = k.body[rv.a].dtype;
  bool fsum = in.is_float() && (k.reduce->op == ReduceOp::Sum || k.reduce->op == ReduceOp::Prod);
  SplitReduce s;
  // Partials keep the accumulator's precision: double sums, float32 for 16-bit max/min (whose
  // result is a float32 value until the final store).
  s.partial_dtype = fsum && opt.float64_partials ? float64
                    : rv.dtype.is_half()         ? float32
                                                 : rv.dtype;
  int64_t parts = opt.parts;
  if (opt.max_part > 0) parts = std::max(parts, (n + opt.max_part - 1) / opt.max_part);
  int64_t len = n / parts, rest = n - parts * len;
  int64_t nparts = parts + (rest > 0 ? 1 : 0);
  int64_t rows = 1;
  for (int a = 0; a + 1 < k.ndim(); ++a) rows *= k.domain[a].value;
  s.part = make_part(k, s.partial_dtype, parts, len, 0, 0, nparts, "_part");
  if (rest > 0)
    s.tail = make_part(k, s.partial_dtype, 1, rest, parts * len, parts, nparts, "_tail");
  s.partials = rows * nparts;
  s.combine = make_combine(k, s.partial_dtype, nparts);
  return s;
}

}  // namespace

std::optional<SplitReduce> split_full_reduction(const Kernel& k, const SplitOptions& opt) {
  if (!k.reduce || k.kept_axes() != 0 || k.ndim() != 1) return std::nullopt;
  return split(k, opt);
}

std::optional<SplitReduce> split_long_rows(const Kernel& k, const SplitOptions& opt) {
  if (!k.reduce || k.kept_axes() == 0 || opt.max_part <= 0) return std::nullopt;
  if (k.domain.back().is_runtime() || k.domain.back().value <= opt.max_part) return std::nullopt;
  return split(k, opt);
}

}  // namespace kiln
