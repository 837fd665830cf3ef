#include "backends/vulkan/split_reduce.h"

#include <map>

namespace kiln::vulkan {

namespace {

bool constant(const IndexMap& m) {
  for (const Dim& d : m.strides)
    if (d.is_runtime()) return false;
  return !m.offset.is_runtime();
}

// Elements [first, first + parts * len) of a 1-D map as a [part, element] map.
IndexMap part_map(const IndexMap& m, int64_t len, int64_t first) {
  int64_t s = m.strides[0].value;
  return {{Dim::constant(s * len), Dim::constant(s)}, Dim::constant(m.offset.value + first * s)};
}

Kernel make_part(const Kernel& k, Dtype partial, int64_t parts, int64_t len, int64_t first,
                 int64_t out_offset, const char* suffix) {
  const Reduction& red = *k.reduce;
  Kernel p;
  p.name = k.name + suffix;
  p.domain = {Dim::constant(parts), Dim::constant(len)};
  for (const KernelBuffer& b : k.buffers)  // read only here: the combine stores
    p.buffers.push_back({b.dtype, false, part_map(b.map, len, first)});
  p.buffers.push_back(
      {partial, true, {{Dim::constant(1), Dim::constant(0)}, Dim::constant(out_offset)}});
  for (int i = 0; i < red.value; ++i) {
    Value v = k.body[i];
    if (v.kind == ValueKind::Index) v.map = part_map(v.map, len, first);
    p.body.push_back(v);
  }
  Value r = k.body[red.value];
  r.dtype = partial;
  p.body.push_back(r);
  p.reduce = Reduction{red.op, 1, red.value};
  p.stores = {{static_cast<int>(k.buffers.size()), red.value}};
  return p;
}

Kernel make_combine(const Kernel& k, Dtype partial, int64_t nparts) {
  const Reduction& red = *k.reduce;
  Kernel c;
  c.name = k.name + "_combine";
  c.domain = {Dim::constant(nparts)};
  c.buffers = k.buffers;  // only epilogue loads (stride 0 on the reduced axis) touch them
  c.buffers.push_back({partial, false, {{Dim::constant(1)}, Dim::constant(0)}});
  Value load;
  load.kind = ValueKind::Load, load.dtype = partial;
  load.buffer = static_cast<int>(k.buffers.size());
  c.body.push_back(load);
  std::map<int, int> renumber;
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

std::optional<SplitReduce> split_full_reduction(const Kernel& k, bool has_float64) {
  if (!k.reduce || k.kept_axes() != 0 || k.ndim() != 1) return std::nullopt;
  if (k.reduce->op == ReduceOp::Argmax || k.domain[0].is_runtime()) return std::nullopt;
  for (const KernelBuffer& b : k.buffers)
    if (!constant(b.map)) return std::nullopt;
  for (const Value& v : k.body)
    if (v.kind == ValueKind::Index && !constant(v.map)) return std::nullopt;
  int64_t n = k.domain[0].value;
  if (n < SplitReduce::kMinElements) return std::nullopt;
  const Value& rv = k.body[k.reduce->value];
  Dtype in = k.body[rv.a].dtype;
  bool fsum = in.is_float() && (k.reduce->op == ReduceOp::Sum || k.reduce->op == ReduceOp::Prod);
  SplitReduce s;
  s.partial = fsum && has_float64 ? float64 : rv.dtype.is_half() ? float32 : rv.dtype;
  const int64_t parts = SplitReduce::kParts;
  int64_t len = n / parts, rest = n - parts * len;
  s.part = make_part(k, s.partial, parts, len, 0, 0, "_part");
  if (rest > 0) s.tail = make_part(k, s.partial, 1, rest, parts * len, parts, "_tail");
  s.partials = parts + (rest > 0 ? 1 : 0);
  s.combine = make_combine(k, s.partial, s.partials);
  return s;
}

}  // namespace kiln::vulkan
