#include "compile/kernels.h"

#include <algorithm>

#include "backends/backend.h"

namespace kiln {

namespace {

std::vector<Dim> dims(const Shape& s) {
  std::vector<Dim> d;
  for (int64_t e : s) d.push_back(Dim::constant(e));
  return d;
}

IndexMap make_map(const std::vector<int64_t>& strides, int64_t offset = 0) {
  IndexMap m;
  for (int64_t s : strides) m.strides.push_back(Dim::constant(s));
  m.offset = Dim::constant(offset);
  return m;
}

int add_value(Kernel& k, Value v) {
  k.body.push_back(std::move(v));
  return static_cast<int>(k.body.size()) - 1;
}

int add_load(Kernel& k, Dtype d, IndexMap map) {
  k.buffers.push_back({d, false, std::move(map)});
  Value v;
  v.kind = ValueKind::Load;
  v.dtype = d;
  v.buffer = static_cast<int>(k.buffers.size()) - 1;
  return add_value(k, v);
}

int add_const(Kernel& k, Scalar c) {
  Value v;
  v.kind = ValueKind::Constant;
  v.dtype = c.dtype;
  v.constant = c;
  return add_value(k, v);
}

void add_store(Kernel& k, Dtype d, IndexMap map, int value) {
  k.buffers.push_back({d, true, std::move(map)});
  k.stores.push_back({static_cast<int>(k.buffers.size()) - 1, value});
}

// A kernel that writes out[p] = in[map(p)] for every point p of `out`.
Kernel gather_kernel(const ArrayNode& node, IndexMap in_map) {
  Kernel k;
  k.name = primitive_name(node.op, node.params);
  k.domain = dims(node.shape);
  int v = add_load(k, node.inputs[0].dtype(), std::move(in_map));
  add_store(k, node.dtype, contiguous_map(node.shape), v);
  return k;
}

Kernel elementwise_kernel(const ArrayNode& node) {
  Kernel k;
  k.name = primitive_name(node.op, node.params);
  k.domain = dims(node.shape);
  std::vector<int> in;
  for (const Array& x : node.inputs)
    in.push_back(add_load(k, x.dtype(), broadcast_map(x.shape(), node.shape)));
  Value v;
  v.dtype = node.dtype;
  switch (node.op) {
    case Op::Unary:
      v.kind = ValueKind::Unary, v.unary = node.params.unary, v.a = in[0];
      break;
    case Op::Binary:
      v.kind = ValueKind::Binary, v.binary = node.params.binary, v.a = in[0], v.b = in[1];
      break;
    case Op::Select:
      v.kind = ValueKind::Select, v.a = in[0], v.b = in[1], v.c = in[2];
      break;
    case Op::Cast:
      v.kind = ValueKind::Cast, v.a = in[0];
      break;
    default:
      break;
  }
  add_store(k, node.dtype, contiguous_map(node.shape), add_value(k, v));
  return k;
}

Kernel full_kernel(const ArrayNode& node) {
  Kernel k;
  k.name = "full";
  k.domain = dims(node.shape);
  add_store(k, node.dtype, contiguous_map(node.shape), add_const(k, node.params.value));
  return k;
}

Kernel arange_kernel(const ArrayNode& node) {
  Kernel k;
  k.name = "arange";
  k.domain = dims(node.shape);
  Value idx;
  idx.kind = ValueKind::Index;
  idx.dtype = int64;
  idx.map = make_map({1});
  int i = add_value(k, idx);
  if (node.dtype != int64) {
    Value c;
    c.kind = ValueKind::Cast, c.dtype = node.dtype, c.a = i;
    i = add_value(k, c);
  }
  Value mul, add;
  mul.kind = ValueKind::Binary, mul.binary = BinaryOp::Multiply, mul.dtype = node.dtype;
  mul.a = i, mul.b = add_const(k, node.params.step_value);
  add.kind = ValueKind::Binary, add.binary = BinaryOp::Add, add.dtype = node.dtype;
  add.a = add_value(k, mul), add.b = add_const(k, node.params.value);
  add_store(k, node.dtype, contiguous_map(node.shape), add_value(k, add));
  return k;
}

Kernel random_kernel(const ArrayNode& node) {
  Kernel k;
  k.name = primitive_name(node.op, node.params);
  k.domain = dims(node.shape);
  Value idx;
  idx.kind = ValueKind::Index, idx.dtype = int64, idx.map = contiguous_map(node.shape);
  Value r;
  r.kind = ValueKind::Random, r.dtype = node.dtype, r.dist = node.params.dist;
  r.key = node.params.key, r.a = add_value(k, idx);
  add_store(k, node.dtype, contiguous_map(node.shape), add_value(k, r));
  return k;
}

Kernel reduce_kernel(const ArrayNode& node) {
  const Array& x = node.inputs[0];
  const std::vector<int>& axes = node.params.axes;
  if (axes.empty()) {  // a 0-d reduction: the value itself
    return gather_kernel(node, contiguous_map(x.shape()));
  }
  std::vector<int64_t> in_strides = contiguous_strides(x.shape());
  Kernel k;
  k.name = primitive_name(node.op, node.params);
  std::vector<int64_t> load_strides, kept_shape;
  for (int i = 0; i < x.ndim(); ++i)
    if (std::find(axes.begin(), axes.end(), i) == axes.end()) {
      k.domain.push_back(Dim::constant(x.shape()[i]));
      load_strides.push_back(in_strides[i]);
      kept_shape.push_back(x.shape()[i]);
    }
  for (int a : axes) {
    k.domain.push_back(Dim::constant(x.shape()[a]));
    load_strides.push_back(in_strides[a]);
  }
  int v = add_load(k, x.dtype(), make_map(load_strides));
  Value r;
  r.kind = ValueKind::Reduce, r.dtype = node.dtype, r.a = v;
  int rv = add_value(k, r);
  k.reduce = Reduction{node.params.reduce, static_cast<int>(axes.size()), rv};
  std::vector<int64_t> out_strides = contiguous_strides(kept_shape);
  out_strides.resize(k.domain.size(), 0);
  add_store(k, node.dtype, make_map(out_strides), rv);
  return k;
}

Kernel transpose_kernel(const ArrayNode& node) {
  std::vector<int64_t> in = contiguous_strides(node.inputs[0].shape()), st;
  for (int p : node.params.axes) st.push_back(in[p]);
  return gather_kernel(node, make_map(st));
}

Kernel slice_kernel(const ArrayNode& node) {
  std::vector<int64_t> in = contiguous_strides(node.inputs[0].shape()), st;
  int64_t offset = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    st.push_back(in[i] * node.params.step[i]);
    offset += node.params.start[i] * in[i];
  }
  return gather_kernel(node, make_map(st, offset));
}

std::vector<Kernel> concatenate_kernels(const ArrayNode& node) {
  int axis = node.params.axes[0];
  std::vector<int64_t> out = contiguous_strides(node.shape);
  std::vector<Kernel> ks;
  int64_t at = 0;
  for (const Array& x : node.inputs) {
    Kernel k;
    k.name = "concatenate";
    k.domain = dims(x.shape());
    int v = add_load(k, x.dtype(), contiguous_map(x.shape()));
    add_store(k, node.dtype, make_map(out, at * out[axis]), v);
    at += x.shape()[axis];
    ks.push_back(std::move(k));
  }
  return ks;
}

}  // namespace

IndexMap broadcast_map(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0), in_st = contiguous_strides(in);
  size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i)
    st[lead + i] = in[i] == 1 && out[lead + i] != 1 ? 0 : in_st[i];
  return make_map(st);
}

IndexMap contiguous_map(const Shape& s) {
  return make_map(contiguous_strides(s));
}

std::vector<Kernel> kernels_for(const ArrayNode& node) {
  switch (node.op) {
    case Op::Unary:
    case Op::Binary:
    case Op::Select:
    case Op::Cast:
      return {elementwise_kernel(node)};
    case Op::Full:
      return {full_kernel(node)};
    case Op::Arange:
      return {arange_kernel(node)};
    case Op::Random:
      return {random_kernel(node)};
    case Op::Reduce:
      return {reduce_kernel(node)};
    case Op::Reshape:
      return {gather_kernel(node, contiguous_map(node.shape))};
    case Op::Broadcast:
      return {gather_kernel(node, broadcast_map(node.inputs[0].shape(), node.shape))};
    case Op::Transpose:
      return {transpose_kernel(node)};
    case Op::Slice:
      return {slice_kernel(node)};
    case Op::Concatenate:
      return concatenate_kernels(node);
    case Op::Constant:
    case Op::Placeholder:
    case Op::Matmul:
      break;
  }
  throw_error("internal: no kernel for primitive ", op_name(node.op));
}

void matmul_offsets(const ArrayNode& node, MatmulArgs& args) {
  const Shape& as = node.inputs[0].shape();
  const Shape& bs = node.inputs[1].shape();
  args.dtype = node.dtype;
  args.m = as[as.size() - 2];
  args.k = as.back();
  args.n = bs.back();
  Shape batch(node.shape.begin(), node.shape.end() - 2);
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  IndexMap am = broadcast_map(ab, batch), bm = broadcast_map(bb, batch);
  int64_t nb = shape_size(batch);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t ao = 0, bo = 0;
    for (size_t d = 0; d < batch.size(); ++d) {
      ao += idx[d] * am.strides[d].value;
      bo += idx[d] * bm.strides[d].value;
    }
    args.a_offsets.push_back(ao * args.m * args.k);
    args.b_offsets.push_back(bo * args.k * args.n);
    args.c_offsets.push_back(i * args.m * args.n);
    for (int d = static_cast<int>(batch.size()) - 1; d >= 0; --d) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace kiln
