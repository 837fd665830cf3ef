#include "backends/split_reduce.h"

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
    if (v.kind == ValueKind::Index && !constant_map(v.map)) return false;
  return !k.domain[0].is_runtime();
}

// A 1-D map over elements [first, first + parts*len) as a 2-D map over (part, element).
IndexMap split_map(const IndexMap& m, int64_t len, int64_t first) {
  int64_t s = m.strides[0].value;
  return {{Dim::constant(s * len), Dim::constant(s)}, Dim::constant(m.offset.value + first * s)};
}

// `parts` partial reductions of `len` elements each, starting at element `first`, written to
// the scratch buffer from element `out_offset` on.
Kernel make_part(const Kernel& k, Dtype partial, int64_t parts, int64_t len, int64_t first,
                 int64_t out_offset, const char* suffix) {
  const Reduction& red = *k.reduce;
  Kernel p;
  p.name = k.name + suffix;
  p.domain = {Dim::constant(parts), Dim::constant(len)};
  for (const KernelBuffer& b : k.buffers)
    p.buffers.push_back({b.dtype, false, split_map(b.map, len, first)});  // parts store none
  p.buffers.push_back(
      {partial, true, {{Dim::constant(1), Dim::constant(0)}, Dim::constant(out_offset)}});
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

// Reduces the partials in order, then runs the original epilogue and stores.
Kernel make_combine(const Kernel& k, Dtype partial, int64_t nparts) {
  const Reduction& red = *k.reduce;
  Kernel c;
  c.name = k.name + "_combine";
  c.domain = {Dim::constant(nparts)};
  c.buffers = k.buffers;  // rank 1 already; only epilogue loads (stride 0) are used
  c.buffers.push_back({partial, false, {{Dim::constant(1)}, Dim::constant(0)}});
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

std::optional<SplitReduce> split_full_reduction(const Kernel& k, const SplitOptions& opt) {
  if (!k.reduce || k.kept_axes() != 0 || k.ndim() != 1) return std::nullopt;
  if (k.reduce->op == ReduceOp::Argmax || !all_constant(k)) return std::nullopt;
  int64_t n = k.domain[0].value;
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
  const int64_t parts = opt.parts;
  int64_t len = n / parts, rest = n - parts * len;
  s.part = make_part(k, s.partial_dtype, parts, len, 0, 0, "_part");
  if (rest > 0) s.tail = make_part(k, s.partial_dtype, 1, rest, parts * len, parts, "_tail");
  s.partials = parts + (rest > 0 ? 1 : 0);
  s.combine = make_combine(k, s.partial_dtype, s.partials);
  return s;
}

}  // namespace kiln
