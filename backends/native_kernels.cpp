// Every kernel here has the domain (outer, X, inner, R): X is the output's position along the
// axis, R the position it reduces over. Values that select one element (gathers, the sort's
// placement) are moved through a carrier dtype the reductions handle everywhere: int32 for
// bool/int8/uint8, float32 for float16/bfloat16; floats select with max (fill -inf, so -0 and
// NaN come through as they are), integers with sum (fill 0).
#include "backends/native_kernels.h"

#include <cmath>

#include "backends/native.h"
#include "graph/error.h"

namespace kiln {

namespace {

Dtype carrier(Dtype d) {
  if (d == bool_ || d == int8 || d == uint8) return int32;
  if (d.is_half()) return float32;
  return d;
}

Scalar scalar_of(Dtype d, double f, int64_t i) {
  Scalar s;
  s.dtype = d;
  s.f = f;
  s.i = i;
  return s;
}

class Builder {
 public:
  Builder(std::string name, std::vector<int64_t> domain, int naxes) {
    k_.name = std::move(name);
    for (int64_t e : domain) k_.domain.push_back(Dim::constant(e));
    if (naxes) {
      k_.reduce = Reduction{};
      k_.reduce->naxes = naxes;
    }
  }
  // A buffer read or written at sum(point * strides).
  int buffer(Dtype d, bool output, const std::vector<int64_t>& strides) {
    KernelBuffer b;
    b.dtype = d;
    b.output = output;
    for (int64_t s : strides) b.map.strides.push_back(Dim::constant(s));
    b.map.offset = Dim::constant(0);
    k_.buffers.push_back(b);
    return static_cast<int>(k_.buffers.size()) - 1;
  }
  int load(int buf) {
    Value v;
    v.kind = ValueKind::Load;
    v.dtype = k_.buffers[buf].dtype;
    v.buffer = buf;
    return add(v);
  }
  int constant(Scalar s) {
    Value v;
    v.kind = ValueKind::Constant;
    v.dtype = s.dtype;
    v.constant = s;
    return add(v);
  }
  int i64(int64_t x) { return constant(scalar_of(int64, 0, x)); }
  // The value of dtype d standing for the number f (floats) or i (integers and bool).
  int of(Dtype d, double f, int64_t i) { return constant(scalar_of(d, f, i)); }
  int index(const std::vector<int64_t>& strides) {
    Value v;
    v.kind = ValueKind::Index;
    v.dtype = int64;
    for (int64_t s : strides) v.map.strides.push_back(Dim::constant(s));
    v.map.offset = Dim::constant(0);
    return add(v);
  }
  int unary(UnaryOp op, int a) {
    Value v;
    v.kind = ValueKind::Unary;
    v.unary = op;
    v.a = a;
    v.dtype = dtype(a);
    return add(v);
  }
  int binary(BinaryOp op, int a, int b) {
    Value v;
    v.kind = ValueKind::Binary;
    v.binary = op;
    v.a = a, v.b = b;
    v.dtype = is_comparison(op) || is_logical(op) ? bool_ : dtype(a);
    return add(v);
  }
  int select(int c, int a, int b) {
    Value v;
    v.kind = ValueKind::Select;
    v.a = c, v.b = a, v.c = b;
    v.dtype = dtype(a);
    return add(v);
  }
  int cast(int a, Dtype d) {
    if (dtype(a) == d) return a;
    Value v;
    v.kind = ValueKind::Cast;
    v.a = a;
    v.dtype = d;
    return add(v);
  }
  int reduce(ReduceOp op, int a) {
    Value v;
    v.kind = ValueKind::Reduce;
    v.a = a;
    v.dtype = dtype(a);
    k_.reduce->op = op;
    k_.reduce->value = add(v);
    return k_.reduce->value;
  }
  void store(int buf, int value) { k_.stores.push_back({buf, value}); }
  Dtype dtype(int v) const { return k_.body[v].dtype; }
  Kernel done() {
    k_.validate();
    return std::move(k_);
  }

 private:
  int add(const Value& v) {
    k_.body.push_back(v);
    return static_cast<int>(k_.body.size()) - 1;
  }
  Kernel k_;
};

// The index rule: negative from the end, then clamped to [0, n - 1].
int clamp_index(Builder& b, int i, int64_t n) {
  int wrapped =
      b.select(b.binary(BinaryOp::Less, i, b.i64(0)), b.binary(BinaryOp::Add, i, b.i64(n)), i);
  return b.binary(BinaryOp::Minimum, b.binary(BinaryOp::Maximum, wrapped, b.i64(0)), b.i64(n - 1));
}

// Picks the one value of the reduced axis where `hit` holds (carrier dtype; see the top).
int pick(Builder& b, int hit, int value) {
  Dtype c = b.dtype(value);
  if (c.is_float()) return b.reduce(ReduceOp::Max, b.select(hit, value, b.of(c, -INFINITY, 0)));
  return b.reduce(ReduceOp::Sum, b.select(hit, value, b.of(c, 0, 0)));
}

int is_nan(Builder& b, int x) { return b.binary(BinaryOp::NotEqual, x, x); }

// The strides of an (outer, n, inner) array seen from the domain: at the kept position X, or
// at the reduced position R.
std::vector<int64_t> at_x(const NativeArgs& a, int64_t extent) {
  return {extent * a.inner, a.inner, 1, 0};
}
std::vector<int64_t> at_r(const NativeArgs& a, int64_t extent) {
  return {extent * a.inner, 0, 1, a.inner};
}

NativeKernels gather(const NativeArgs& a) {
  Dtype c = carrier(a.dtype);
  Builder b("native_gather", {a.outer, a.m, a.inner, a.n}, 1);
  int src = b.buffer(a.dtype, false, at_r(a, a.n));
  int idx =
      b.buffer(int64, false, a.shared_index ? std::vector<int64_t>{0, 1, 0, 0} : at_x(a, a.m));
  int out = b.buffer(a.dtype, true, at_x(a, a.m));
  int i = clamp_index(b, b.load(idx), a.n);
  int hit = b.binary(BinaryOp::Equal, b.index({0, 0, 0, 1}), i);
  int r = pick(b, hit, b.cast(b.load(src), c));
  b.store(out, b.cast(r, a.dtype));
  return {{b.done()}, {{0, 1, 2}}, {}};
}

NativeKernels scatter_add(const NativeArgs& a) {
  if (a.m == 0) return {{}, {}, {}, true};
  Dtype c = carrier(a.dtype);
  Builder b("native_scatter_add", {a.outer, a.n, a.inner, a.m}, 1);
  int base = b.buffer(a.dtype, false, at_x(a, a.n));
  int idx =
      b.buffer(int64, false, a.shared_index ? std::vector<int64_t>{0, 0, 0, 1} : at_r(a, a.m));
  int upd = b.buffer(a.dtype, false, at_r(a, a.m));
  int out = b.buffer(a.dtype, true, at_x(a, a.n));
  int i = clamp_index(b, b.load(idx), a.n);
  int hit = b.binary(BinaryOp::Equal, b.index({0, 1, 0, 0}), i);
  int u = b.cast(b.load(upd), c);
  int sum = b.reduce(ReduceOp::Sum, b.select(hit, u, b.of(c, 0, 0)));
  int r = b.binary(BinaryOp::Add, b.cast(b.load(base), c), sum);
  b.store(out, b.cast(r, a.dtype));
  return {{b.done()}, {{0, 1, 2, 3}}, {}};
}

// Whether position R is in the window of position X (the places a scan combines at X).
int in_window(Builder& b, const NativeArgs& a) {
  int x = b.index({0, 1, 0, 0}), r = b.index({0, 0, 0, 1});
  BinaryOp op = a.reverse ? (a.inclusive ? BinaryOp::GreaterEqual : BinaryOp::Greater)
                          : (a.inclusive ? BinaryOp::LessEqual : BinaryOp::Less);
  return b.binary(op, r, x);
}

NativeKernels scan(const NativeArgs& a) {
  Dtype c = carrier(a.dtype);
  std::vector<int64_t> domain{a.outer, a.n, a.inner, a.n};
  if (a.scan != ScanOp::LogAddExp) {
    Builder b("native_" + std::string(op_name(a.scan)), domain, 1);
    int in = b.buffer(a.dtype, false, at_r(a, a.n));
    int out = b.buffer(a.dtype, true, at_x(a, a.n));
    scalar::Val id = scalar::scan_identity(a.scan, a.dtype);
    int fill = b.cast(b.of(a.dtype, id.f, id.i), c);
    int x = b.select(in_window(b, a), b.cast(b.load(in), c), fill);
    ReduceOp op = a.scan == ScanOp::Sum    ? ReduceOp::Sum
                  : a.scan == ScanOp::Prod ? ReduceOp::Prod
                  : a.scan == ScanOp::Max  ? ReduceOp::Max
                                           : ReduceOp::Min;
    b.store(out, b.cast(b.reduce(op, x), a.dtype));
    return {{b.done()}, {{0, 1}}, {}};
  }
  // log(sum exp(x)) over the window as m + log(sum exp(x - m)), m the window's max; an
  // infinite (or empty: -inf) max is the answer itself.
  Builder mb("native_logcumsumexp_max", domain, 1);
  int in = mb.buffer(a.dtype, false, at_r(a, a.n));
  int mout = mb.buffer(c, true, at_x(a, a.n));
  int x = mb.select(in_window(mb, a), mb.cast(mb.load(in), c), mb.of(c, -INFINITY, 0));
  mb.store(mout, mb.reduce(ReduceOp::Max, x));

  Builder sb("native_logcumsumexp", domain, 1);
  int in2 = sb.buffer(a.dtype, false, at_r(a, a.n));
  int mx = sb.buffer(c, false, at_x(a, a.n));
  int out = sb.buffer(a.dtype, true, at_x(a, a.n));
  int m = sb.load(mx);
  int e = sb.unary(UnaryOp::Exp, sb.binary(BinaryOp::Subtract, sb.cast(sb.load(in2), c), m));
  int sum = sb.reduce(ReduceOp::Sum, sb.select(in_window(sb, a), e, sb.of(c, 0, 0)));
  int m2 = sb.load(mx);
  int inf = sb.binary(BinaryOp::Equal, sb.unary(UnaryOp::Abs, m2), sb.of(c, INFINITY, 0));
  int r = sb.binary(BinaryOp::Add, m2, sb.unary(UnaryOp::Log, sum));
  sb.store(out, sb.cast(sb.select(inf, m2, r), a.dtype));
  size_t bytes = static_cast<size_t>(a.outer * a.n * a.inner) * c.size();
  return {{mb.done(), sb.done()}, {{0, -1}, {0, -1, 1}}, {bytes}};
}

// Rank of each element (how many sort before it, ties by position), then each rank's element.
NativeKernels sort(const NativeArgs& a) {
  Dtype c = carrier(a.dtype);
  std::vector<int64_t> domain{a.outer, a.n, a.inner, a.n};
  Builder rb("native_rank", domain, 1);
  int xi_buf = rb.buffer(a.dtype, false, at_x(a, a.n));
  int xj_buf = rb.buffer(a.dtype, false, at_r(a, a.n));
  int rank = rb.buffer(int64, true, at_x(a, a.n));
  int xi = rb.cast(rb.load(xi_buf), c), xj = rb.cast(rb.load(xj_buf), c);
  int before = rb.binary(a.descending ? BinaryOp::Greater : BinaryOp::Less, xj, xi);
  int tie = rb.binary(BinaryOp::Equal, xj, xi);
  if (c.is_float()) {
    int ni = is_nan(rb, xi), nj = is_nan(rb, xj);
    before = rb.binary(BinaryOp::LogicalOr, before,
                       rb.binary(BinaryOp::LogicalAnd, ni, rb.unary(UnaryOp::LogicalNot, nj)));
    tie = rb.binary(BinaryOp::LogicalOr, tie, rb.binary(BinaryOp::LogicalAnd, ni, nj));
  }
  int earlier = rb.binary(BinaryOp::Less, rb.index({0, 0, 0, 1}), rb.index({0, 1, 0, 0}));
  before = rb.binary(BinaryOp::LogicalOr, before, rb.binary(BinaryOp::LogicalAnd, tie, earlier));
  rb.store(rank, rb.reduce(ReduceOp::Sum, rb.cast(before, int64)));

  Builder pb(a.op == Op::Sort ? "native_sort" : "native_argsort", domain, 1);
  int ranks = pb.buffer(int64, false, at_r(a, a.n));
  int hit = pb.binary(BinaryOp::Equal, pb.load(ranks), pb.index({0, 1, 0, 0}));
  size_t bytes = static_cast<size_t>(a.outer * a.n * a.inner) * 8;
  if (a.op == Op::Argsort) {
    int out = pb.buffer(int64, true, at_x(a, a.n));
    pb.store(out, pick(pb, hit, pb.index({0, 0, 0, 1})));
    return {{rb.done(), pb.done()}, {{0, 0, -1}, {-1, 1}}, {bytes}};
  }
  int x = pb.buffer(a.dtype, false, at_r(a, a.n));
  int out = pb.buffer(a.dtype, true, at_x(a, a.n));
  pb.store(out, pb.cast(pick(pb, hit, pb.cast(pb.load(x), c)), a.dtype));
  return {{rb.done(), pb.done()}, {{0, 0, -1}, {-1, 0, 1}}, {bytes}};
}

struct Keep {
  std::vector<std::shared_ptr<Buffer>> temps;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
};

}  // namespace

NativeKernels native_kernels(const NativeArgs& a) {
  switch (a.op) {
    case Op::Sort:
    case Op::Argsort: return sort(a);
    case Op::Scan: return scan(a);
    case Op::Gather: return gather(a);
    case Op::ScatterAdd: return scatter_add(a);
    default: throw_error("internal: ", op_name(a.op), " is not a native primitive");
  }
}

EventPtr enqueue_native_as_kernels(Backend& backend, int device, Queue& queue,
                                   const NativeArgs& a) {
  std::vector<size_t> bytes;
  for (Buffer* b : a.buffers) bytes.push_back(b ? b->bytes() : 0);
  check_native_args(a, bytes);
  if (a.out_elements() == 0) return nullptr;
  NativeKernels nk = native_kernels(a);
  if (nk.copy) return queue.enqueue_copy(*a.buffers[0], *a.buffers.back(), bytes.back());
  auto keep = std::make_shared<Keep>();
  for (size_t t : nk.temp_bytes) keep->temps.push_back(backend.allocate(device, t));
  EventPtr last;
  for (size_t s = 0; s < nk.kernels.size(); ++s) {
    keep->kernels.push_back(backend.compile(device, nk.kernels[s]));
    KernelArgs args;
    for (int b : nk.bindings[s])
      args.buffers.push_back(b >= 0 ? a.buffers[b] : keep->temps[-1 - b].get());
    last = queue.enqueue_kernel(*keep->kernels.back(), args);
  }
  if (last) last->on_complete([keep](std::exception_ptr) {});
  return last;
}

}  // namespace kiln
