#include "backends/kernel_text.h"

#include "graph/error.h"

namespace kiln {

namespace {

template <typename Enum>
Enum enum_named(TextReader& r, const std::string& name, int count, const char* what) {
  for (int i = 0; i < count; ++i)
    if (name == op_name(static_cast<Enum>(i))) return static_cast<Enum>(i);
  r.fail(std::string("a ") + what + " name");
}

constexpr int kUnaryOps = kNumUnaryOps;
constexpr int kBinaryOps = kNumBinaryOps;
constexpr int kReduceOps = static_cast<int>(ReduceOp::Argmax) + 1;

Dim read_dim(TextReader& r) {
  if (r.accept("p")) {
    int64_t p = r.integer();
    if (p < 0 || p > (1 << 20)) r.fail("a launch parameter index below 2^20");
    return Dim::runtime(static_cast<int32_t>(p));
  }
  return Dim::constant(r.integer());
}

IndexMap read_map(TextReader& r) {
  IndexMap m;
  r.expect("[");
  if (!r.accept("]")) {
    do m.strides.push_back(read_dim(r));
    while (r.accept(","));
    r.expect("]");
  }
  r.expect("+");
  m.offset = read_dim(r);
  return m;
}

int read_ref(TextReader& r, const char* prefix) {
  r.expect(prefix);
  int64_t v = r.integer();
  if (v < 0 || v > (1 << 24)) r.fail(std::string("a ") + prefix + " index");
  return static_cast<int>(v);
}

Dtype read_dtype(TextReader& r) {
  std::string name = r.word();
  try {
    return dtype_from_name(name);
  } catch (const Error&) {
    r.fail("a dtype name (float32, int64, bool, ...)");
  }
}

Value read_value(TextReader& r) {
  Value v;
  v.dtype = read_dtype(r);
  r.expect(" = ");
  std::string op = r.word();
  r.accept(" ");
  if (op == "load") {
    v.kind = ValueKind::Load, v.buffer = read_ref(r, "b");
  } else if (op == "const") {
    v.kind = ValueKind::Constant;
    if (r.accept("p")) {
      v.param = static_cast<int32_t>(r.integer());
      if (v.param < 0) r.fail("a launch parameter index");
    } else if (v.dtype.is_bool()) {
      v.constant = Scalar::of(r.accept("true") ? 1.0 : (r.expect("false"), 0.0)).cast(v.dtype);
    } else if (v.dtype.is_float()) {
      v.constant = Scalar::of(r.number()).cast(v.dtype);
    } else {
      v.constant.dtype = v.dtype;
      v.constant.i = v.dtype == uint64 ? static_cast<int64_t>(r.unsigned_integer()) : r.integer();
      v.constant.f = static_cast<double>(v.constant.i);
    }
  } else if (op == "gather") {
    v.kind = ValueKind::Gather, v.buffer = read_ref(r, "b");
    r.expect(" "), v.a = read_ref(r, "v");
    r.expect(" step "), v.step = read_dim(r);
    r.expect(" extent "), v.extent = read_dim(r);
  } else if (op == "index") {
    v.kind = ValueKind::Index, v.map = read_map(r);
  } else if (op == "select") {
    v.kind = ValueKind::Select, v.a = read_ref(r, "v");
    r.expect(" "), v.b = read_ref(r, "v");
    r.expect(" "), v.c = read_ref(r, "v");
  } else if (op == "cast") {
    v.kind = ValueKind::Cast, v.a = read_ref(r, "v");
  } else if (op == "reduce") {
    v.kind = ValueKind::Reduce, v.a = read_ref(r, "v");
  } else if (op == "uniform" || op == "normal" || op == "bits") {
    v.kind = ValueKind::Random;
    v.dist = op == "uniform"  ? RandomDist::Uniform
             : op == "normal" ? RandomDist::Normal
                              : RandomDist::Bits;
    r.expect("key ");
    if (r.accept("v"))
      v.b = read_ref(r, "");
    else if (r.accept("p"))
      v.param = static_cast<int32_t>(r.integer());
    else
      v.key = r.unsigned_integer();
    r.expect(" "), v.a = read_ref(r, "v");
  } else {
    bool binary = false;
    for (int i = 0; i < kBinaryOps; ++i) binary = binary || op == op_name(static_cast<BinaryOp>(i));
    if (binary) {
      v.kind = ValueKind::Binary, v.binary = enum_named<BinaryOp>(r, op, kBinaryOps, "binary op");
      v.a = read_ref(r, "v");
      r.expect(" "), v.b = read_ref(r, "v");
    } else {
      v.kind = ValueKind::Unary, v.unary = enum_named<UnaryOp>(r, op, kUnaryOps, "value op");
      v.a = read_ref(r, "v");
    }
  }
  r.expect_end_of_line();
  return v;
}

// "OP over last N" after " reduce ".
Reduction read_reduction(TextReader& r, size_t rank) {
  Reduction red;
  red.op = enum_named<ReduceOp>(r, r.word(), kReduceOps, "reduction");
  r.expect(" over last ");
  int64_t n = r.integer();
  if (n < 0 || n > static_cast<int64_t>(rank)) r.fail("at most the domain's rank");
  red.naxes = static_cast<int>(n);
  return red;
}

// The values and stores of a kernel or of one pass of a row kernel.
void read_pass(TextReader& r, std::vector<Value>& body, std::optional<Reduction>& reduce,
               std::vector<Store>& stores) {
  for (size_t i = 0; r.accept("  v"); ++i) {
    if (r.integer() != static_cast<int64_t>(i)) r.fail("values numbered in order");
    r.expect(": ");
    body.push_back(read_value(r));
    if (body.back().kind == ValueKind::Reduce && reduce) reduce->value = static_cast<int>(i);
    r.next_line();
  }
  while (r.accept("  store ")) {
    Store s;
    s.buffer = read_ref(r, "b");
    r.expect(" <- ");
    s.value = read_ref(r, "v");
    r.expect_end_of_line();
    stores.push_back(s);
    r.next_line();
  }
}

}  // namespace

Kernel read_kernel(TextReader& r) {
  Kernel k;
  r.expect("kernel ");
  k.name = r.word();
  r.expect(" domain(");
  if (!r.accept(")")) {
    do k.domain.push_back(read_dim(r));
    while (r.accept(","));
    r.expect(")");
  }
  if (r.accept(" reduce ")) k.reduce = read_reduction(r, k.domain.size());
  size_t npasses = 0;
  if (r.accept(" rows ")) {
    int64_t n = r.integer();
    if (n < 1 || n > 64) r.fail("a row kernel of 1 to 64 passes");
    npasses = static_cast<size_t>(n);
  }
  r.expect_end_of_line();
  r.next_line();
  for (size_t i = 0; r.accept("  b"); ++i) {
    if (r.integer() != static_cast<int64_t>(i)) r.fail("buffers numbered in order");
    KernelBuffer b;
    r.expect(": ");
    b.output = r.accept("out ");
    if (!b.output) r.expect("in ");
    b.dtype = read_dtype(r);
    r.expect(" ");
    b.map = read_map(r);
    r.expect_end_of_line();
    k.buffers.push_back(b);
    r.next_line();
  }
  read_pass(r, k.body, k.reduce, k.stores);
  for (size_t p = 0; p < npasses; ++p) {
    Pass pass;
    r.expect("  pass");
    if (r.accept(" reduce ")) pass.reduce = read_reduction(r, k.domain.size());
    r.expect_end_of_line();
    r.next_line();
    read_pass(r, pass.body, pass.reduce, pass.stores);
    k.passes.push_back(std::move(pass));
  }
  try {
    k.validate();
  } catch (const Error& e) {
    throw Error("kernel " + k.name + " ending before line " + std::to_string(r.line_number()) +
                " is not valid Kernel IR: " + e.what());
  }
  return k;
}

}  // namespace kiln
