#include "backends/opencl/dialect_opencl.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backends/opencl/prelude_opencl.h"
#include "backends/source/emitter.h"

namespace kiln::opencl {

namespace {

bool is_signed_int(Dtype d) { return d == int8 || d == int32 || d == int64; }

std::string float_literal(double v, Dtype d) {
  bool f64 = d == float64;
  if (std::isnan(v)) return f64 ? "((double)NAN)" : "NAN";
  if (std::isinf(v))
    return std::string(v < 0 ? "-" : "") + (f64 ? "((double)INFINITY)" : "INFINITY");
  char buf[64];
  std::snprintf(buf, sizeof buf, f64 ? "%a" : "%af",
                f64 ? v : static_cast<double>(static_cast<float>(v)));
  return std::string("(") + buf + ")";
}

std::string int_literal(int64_t v, const std::string& type) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "((%s)0x%llxUL)", type.c_str(),
                static_cast<unsigned long long>(v));
  return buf;
}

std::string hex(uint64_t x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(x));
  return buf;
}

std::string replace_x(std::string e, const std::string& x) {
  for (size_t p = e.find('X'); p != std::string::npos; p = e.find('X', p + x.size()))
    e.replace(p, 1, x);
  return e;
}

// The OpenCL C type a value of dtype d lives in inside a kernel.
const char* cl_type(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return "uchar";
    case Dtype::Kind::Int8: return "char";
    case Dtype::Kind::UInt8: return "uchar";
    case Dtype::Kind::Int32: return "int";
    case Dtype::Kind::UInt32: return "uint";
    case Dtype::Kind::Int64: return "long";
    case Dtype::Kind::UInt64: return "ulong";
    case Dtype::Kind::Float64: return "double";
    default: return "float";  // float32, float16, bfloat16 (storage types computed in float32)
  }
}

}  // namespace

std::string OpenclDialect::value_type(Dtype d) const { return cl_type(d); }

std::string OpenclDialect::unsigned_type(Dtype d) const {
  switch (d.kind) {
    case Dtype::Kind::Int8:
    case Dtype::Kind::UInt8:
    case Dtype::Kind::Bool: return "uchar";
    case Dtype::Kind::Int32:
    case Dtype::Kind::UInt32: return "uint";
    default: return "ulong";
  }
}

std::string OpenclDialect::storage_type(Dtype d) const {
  return d.is_half() ? "ushort" : cl_type(d);
}

std::string OpenclDialect::dim(const Dim& d) {
  return d.is_runtime() ? "p" + std::to_string(d.param) : "(" + std::to_string(d.value) + "L)";
}

std::string OpenclDialect::address(const IndexMap& m) { return "(" + Dialect::address(m) + ")"; }

std::string OpenclDialect::define(Dtype d, const std::string& name, const std::string& e) {
  return "const " + (lanes_ ? vtype() : value_type(d)) + " " + name + " = " + e + ";";
}

std::string OpenclDialect::constant(int i) {
  const Value& c = kernel().body[i];
  if (c.param >= 0) {
    if (!c.dtype.is_float()) return "(" + value_type(c.dtype) + ")p" + std::to_string(c.param);
    if (c.dtype == float64) return "as_double(p" + std::to_string(c.param) + ")";
    return "c" + std::to_string(i);
  }
  Scalar s = c.constant.cast(c.dtype);
  return c.dtype.is_float() ? float_literal(s.f, c.dtype) : int_literal(s.i, value_type(c.dtype));
}

std::string OpenclDialect::load(int b) {
  const KernelBuffer& buf = kernel().buffers[b];
  const std::string B = "b" + std::to_string(b);
  if (lanes_ && buf.map.strides.back() == Dim::constant(0))
    return "(" + vtype() + ")(" + B + "[" + address(buf.map) + "])";
  if (lanes_ == 16) return "vload16(0, " + B + " + " + address(buf.map) + ")";
  if (lanes_ == 4)  // aligned (map_lanes): one 16-byte access, where vload4 may be four
    return "*(__global const float4*)(" + B + " + " + address(buf.map) + ")";
  return element(b, address(buf.map));
}

// The row a Gather's index picks: wrapped once, then clamped into [0, extent-1] (kernel_ir.h).
// Kernels with a Gather never take the float16 form (vector_values), so this is scalar.
std::string OpenclDialect::gather(const Value& v) {
  std::string a = name(v.a), e = dim(v.extent);
  std::string row =
      "clamp((" + a + " < 0L ? " + a + " + " + e + " : " + a + "), 0L, " + e + " - 1L)";
  return element(v.buffer, "(" + address(kernel().buffers[v.buffer].map) + " + " + row + " * " +
                               dim(v.step) + ")");
}

// Element `at` of buffer b as a value (half and bool storage converted).
std::string OpenclDialect::element(int b, const std::string& at) {
  const KernelBuffer& buf = kernel().buffers[b];
  std::string x = "b" + std::to_string(b) + "[" + at + "]";
  if (buf.dtype == float16) return "kiln_h2f(" + x + ")";
  if (buf.dtype == bfloat16) return "kiln_bf2f(" + x + ")";
  if (buf.dtype.is_bool()) return "(uchar)(" + x + " != 0)";
  return x;
}

std::string OpenclDialect::store(const Store& s, const std::string& ind) {
  const KernelBuffer& buf = kernel().buffers[s.buffer];
  std::string x = name(s.value);
  if (buf.dtype == float16)
    x = "kiln_f2h((float)" + x + ")";
  else if (buf.dtype == bfloat16)
    x = "kiln_f2bf((float)" + x + ")";
  else if (buf.dtype.is_bool())
    x = "(uchar)(" + x + " != 0)";
  else
    x = "(" + storage_type(buf.dtype) + ")" + x;
  return ind + "b" + std::to_string(s.buffer) + "[" + address(buf.map) + "] = " + x + ";\n";
}

std::string OpenclDialect::index(const Value& v) { return address(v.map); }

// A float32 function of float `a` computed in double (correctly rounded results, as the
// reference) when the device has fp64.
std::string OpenclDialect::via_double(const std::string& expr_of_d, const std::string& a,
                                      Dtype d) const {
  if (d == float64) return expr_of_d.empty() ? a : replace_x(expr_of_d, a);
  if (!caps_.fp64) return "";
  return "(float)(" + replace_x(expr_of_d, "(double)" + a) + ")";
}

std::string OpenclDialect::unary(const Value& val) {
  Dtype d = val.dtype;
  std::string a = name(val.a), T = value_type(d);
  if (val.unary == UnaryOp::LogicalNot) return "(" + T + ")(" + a + " == 0)";
  if (!d.is_float()) {
    std::string U = unsigned_type(d);
    switch (val.unary) {
      case UnaryOp::Negative: return "(" + T + ")(0 - (" + U + ")" + a + ")";
      case UnaryOp::BitwiseInvert:
        return d.is_bool() ? "(uchar)(" + a + " == 0)" : "(" + T + ")(~" + a + ")";
      case UnaryOp::Abs:
        if (!is_signed_int(d)) return a;
        return "(" + a + " < 0 ? (" + T + ")(0 - (" + U + ")" + a + ") : " + a + ")";
      default: return a;  // floor/ceil of an integer
    }
  }
  if (std::string e = float_unary(val.unary, a); !e.empty()) return e;
  std::string one = d == float64 ? "1.0" : "1.0f";
  switch (val.unary) {
    case UnaryOp::Abs: return "fabs(" + a + ")";
    case UnaryOp::Exp: return "exp(" + a + ")";
    case UnaryOp::Log: return "log(" + a + ")";
    case UnaryOp::Rsqrt: {
      std::string e = via_double("1.0 / sqrt(X)", a, d);
      return e.empty() ? "(1.0f / sqrt(" + a + "))" : e;
    }
    case UnaryOp::Sin: return "sin(" + a + ")";
    case UnaryOp::Cos: return "cos(" + a + ")";
    case UnaryOp::Tanh: return "tanh(" + a + ")";
    case UnaryOp::Erf:
      return (d == float64 ? "erf("
              : lanes_     ? "kiln_erf" + std::to_string(lanes_) + "("
                           : std::string("kiln_erf(")) +
             a + ")";
    case UnaryOp::Sigmoid: return "(" + one + " / (" + one + " + exp(-" + a + ")))";
    default: break;
  }
  return a;
}

std::string OpenclDialect::binary(const Value& val) {
  Dtype d = dtype_of(val.a);
  std::string a = name(val.a), b = name(val.b);
  // Comparisons give a bool, which OpenCL C holds in a uchar.
  if (std::string e = compare(val, a, b); !e.empty()) return "(uchar)" + e;
  switch (val.binary) {
    case BinaryOp::LogicalAnd: return "(uchar)(" + a + " != 0 && " + b + " != 0)";
    case BinaryOp::LogicalOr: return "(uchar)(" + a + " != 0 || " + b + " != 0)";
    default: break;
  }
  if (!d.is_float()) {
    std::string e = integer_binary(val, a, b);
    // A bool shifted left may leave 0 or 1: bools stay 0 or 1.
    return val.dtype.is_bool() && is_bitwise(val.binary) ? "(uchar)(" + e + " != 0)" : e;
  }
  if (std::string e = float_arith(val.binary, a, b); !e.empty()) return e;
  if (val.binary == BinaryOp::FloorDivide || val.binary == BinaryOp::Remainder) {
    // In double where the device has it, rounded once (scalar_ops.h).
    bool rem = val.binary == BinaryOp::Remainder;
    std::string e = rem ? "(X - Y * floor(X / Y))" : "floor(X / Y)";
    auto with = [&](const std::string& x, const std::string& y) {
      std::string r = replace_x(e, x);
      for (size_t at; (at = r.find('Y')) != std::string::npos;) r.replace(at, 1, y);
      return r;
    };
    if (d == float64) return with(a, b);
    if (caps_.fp64) return "(float)" + with("(double)" + a, "(double)" + b);
    return with(a, b);
  }
  if (val.binary == BinaryOp::Power) {
    if (d == float64) return "pow(" + a + ", " + b + ")";
    if (caps_.fp64) return "(float)pow((double)" + a + ", (double)" + b + ")";
    return "pow(" + a + ", " + b + ")";
  }
  return a;
}

namespace {

// scalar::int_floor_divide / int_remainder over OpenCL C integers of type T: the divisor is
// made 1 where it is 0 or -1 (INT_MIN / -1 traps), and those cases are chosen afterwards.
std::string floor_div_rem(bool rem, bool is_signed, const std::string& T, const std::string& U,
                          const std::string& a, const std::string& b) {
  if (!is_signed) {
    std::string safe = "(" + b + " == 0 ? (" + T + ")1 : " + b + ")";
    return "(" + b + " == 0 ? (" + T + ")0 : (" + T + ")(" + a + (rem ? " % " : " / ") + safe +
           "))";
  }
  std::string safe = "(" + b + " == 0 || " + b + " == -1 ? (" + T + ")1 : " + b + ")";
  std::string q = "(" + a + " / " + safe + ")", m = "(" + a + " % " + safe + ")";
  std::string off = "(" + m + " != 0 && (" + m + " < 0) != (" + b + " < 0))";
  if (rem)
    return "(" + b + " == 0 || " + b + " == -1 ? (" + T + ")0 : (" + T + ")(" + off + " ? " + m +
           " + " + b + " : " + m + "))";
  return "(" + b + " == 0 ? (" + T + ")0 : " + b + " == -1 ? (" + T + ")(0 - (" + U + ")" + a +
         ") : (" + T + ")(" + off + " ? " + q + " - 1 : " + q + "))";
}

// scalar::int_shift: the count read as unsigned, counts of the width or more shift all out.
std::string int_shift(bool left, bool is_signed, int width, const std::string& T,
                      const std::string& U, const std::string& a, const std::string& b) {
  std::string out = "((ulong)(" + U + ")" + b + " >= " + std::to_string(width) + "UL)";
  std::string fill =
      is_signed && !left ? "(" + a + " < 0 ? (" + T + ")-1 : (" + T + ")0)" : "(" + T + ")0";
  std::string shifted = left ? "(" + T + ")((" + U + ")" + a + " << (" + U + ")" + b + ")"
                             : "(" + T + ")(" + a + " >> " + b + ")";
  return "(" + out + " ? " + fill + " : " + shifted + ")";
}

}  // namespace

// Integer arithmetic wraps: computed in the unsigned type, converted back.
std::string OpenclDialect::integer_binary(const Value& val, const std::string& a,
                                          const std::string& b) {
  Dtype d = dtype_of(val.a);
  std::string T = value_type(val.dtype), U = unsigned_type(d);
  auto wrap = [&](const char* op) {
    return "(" + T + ")((" + U + ")" + a + " " + op + " (" + U + ")" + b + ")";
  };
  switch (val.binary) {
    case BinaryOp::Add: return wrap("+");
    case BinaryOp::Subtract: return wrap("-");
    case BinaryOp::Multiply: return wrap("*");
    case BinaryOp::Divide:
      if (!is_signed_int(d))
        return "(" + b + " == 0 ? (" + T + ")0 : (" + T + ")(" + a + " / " + b + "))";
      return "(" + b + " == 0 ? (" + T + ")0 : " + b + " == -1 ? (" + T + ")(0 - (" + U + ")" + a +
             ") : (" + T + ")(" + a + " / " + b + "))";
    case BinaryOp::Power:
      return "(" + T + ")kiln_ipow((long)" + a + ", (long)" + b + ", " +
             (is_signed_int(d) ? "1" : "0") + ")";
    case BinaryOp::Maximum: return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
    case BinaryOp::Minimum: return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
    case BinaryOp::FloorDivide:
    case BinaryOp::Remainder:
      return floor_div_rem(val.binary == BinaryOp::Remainder, is_signed_int(d), T, U, a, b);
    case BinaryOp::BitwiseAnd: return "(" + T + ")(" + a + " & " + b + ")";
    case BinaryOp::BitwiseOr: return "(" + T + ")(" + a + " | " + b + ")";
    case BinaryOp::BitwiseXor: return "(" + T + ")(" + a + " ^ " + b + ")";
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift:
      return int_shift(val.binary == BinaryOp::LeftShift, is_signed_int(d),
                       static_cast<int>(d.size() * 8), T, U, a, b);
    default: break;
  }
  return a;
}

std::string OpenclDialect::cast(const Value& val) {
  Dtype from = dtype_of(val.a), to = val.dtype;
  std::string a = name(val.a), T = value_type(to);
  if (to.is_bool()) return "(uchar)(" + a + " != 0)";  // NaN != 0 holds: NaN is true
  if (to.is_float()) {
    std::string f32;  // the value as float32 (the reference narrows through float32)
    if (from.is_float() || !(from == int64 || from == uint64) || !caps_.fp64)
      f32 = "(float)" + a;
    else
      f32 = "(float)(double)" + a;  // 64-bit ints round through double, as the reference
    if (to == float64) return "(double)" + a;
    if (to == float16) return "kiln_rh(" + f32 + ")";
    if (to == bfloat16) return "kiln_rbf(" + f32 + ")";
    return f32;
  }
  // OpenCL defines NaN -> 0 for saturating conversions, but NVIDIA's driver (580) gives the
  // type's minimum (or 2^63 for ulong): NaN is chosen explicitly.
  if (from.is_float())
    return "(isnan(" + a + ") ? (" + T + ")0 : convert_" + T + "_sat_rtz(" + a + "))";
  return "(" + T + ")" + a;
}

std::string OpenclDialect::random(const Value& val) {
  std::string key = val.b >= 0       ? "(ulong)" + name(val.b)
                    : val.param >= 0 ? "(ulong)p" + std::to_string(val.param)
                                     : "0x" + hex(val.key) + "UL";
  std::string c = "(ulong)" + name(val.a);
  if (val.dist == RandomDist::Bits) return "kiln_bits(" + key + ", " + c + ")";
  auto unit = [&](const std::string& counter, Dtype d) -> std::string {
    std::string bits = "kiln_bits(" + key + ", " + counter + ")";
    if (d == float64) return "((double)(" + bits + " >> 11) * 0x1.0p-53)";
    int p = d == float16 ? 11 : d == bfloat16 ? 8 : 24;
    return "((float)(" + bits + " >> " + std::to_string(64 - p) + ") * 0x1.0p-" +
           std::to_string(p) + "f)";
  };
  if (val.dist == RandomDist::Uniform) return unit(c, val.dtype);
  Dtype ud = val.dtype == float64 ? float64 : float32;
  std::string u1 = unit("2UL * " + c, ud), u2 = unit("2UL * " + c + " + 1UL", ud);
  if (val.dtype == float64 || caps_.fp64) {
    std::string e = "(sqrt(-2.0 * log(1.0 - (double)" + u1 +
                    ")) * cos(6.283185307179586 * (double)" + u2 + "))";
    return val.dtype == float64 ? e : "(float)" + e;
  }
  return "(sqrt(-2.0f * log(1.0f - " + u1 + ")) * cos(6.2831853f * " + u2 + "))";
}

const source::Builtins& OpenclDialect::words() const {
  static const source::Builtins w{"__kernel void ",
                                  "__global ",
                                  "__local ",
                                  "inline ",
                                  "long",
                                  "get_global_id(0)",
                                  "get_global_size(0)",
                                  "get_local_id(0)",
                                  "get_local_size(0)",
                                  "get_group_id(0)",
                                  "get_num_groups(0)",
                                  "barrier(CLK_LOCAL_MEM_FENCE)",
                                  "min"};
  return w;
}

std::string OpenclDialect::preamble() {
  std::string s = "#pragma OPENCL FP_CONTRACT OFF\n";
  if (caps_.fp64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  s += opencl_prelude();
  const std::vector<Value>& body = kernel().body;
  bool erf = std::any_of(body.begin(), body.end(), [](const Value& v) {
    return v.kind == ValueKind::Unary && v.unary == UnaryOp::Erf;
  });
  if (erf && map_lanes() == 4) s += opencl_erf4();  // only where used: others stay as they were
  return s;
}

// The float16 form: float32 values whose loads are contiguous (stride 1) or constant (stride
// 0, a broadcast) along the last axis, with operations OpenCL C defines on vectors. A CPU
// device's loops then go 16 lanes at a time in explicit float16 (PoCL's vectoriser stops at
// 256-bit vectors on AVX-512 hosts, where explicit 512-bit types are used as such); the scalar
// loop takes the rest.
bool OpenclDialect::vector_values(int end) const {
  const Kernel& k = kernel();
  for (int i = 0; i < end; ++i) {
    const Value& val = k.body[i];
    if (val.dtype != float32) return false;
    switch (val.kind) {
      case ValueKind::Load: {
        const IndexMap& m = k.buffers[val.buffer].map;
        if (k.buffers[val.buffer].dtype != float32 ||
            m.strides.size() != static_cast<size_t>(k.ndim()) ||
            !(m.strides.back() == Dim::constant(1) || m.strides.back() == Dim::constant(0)))
          return false;
        break;
      }
      case ValueKind::Constant: break;
      case ValueKind::Unary:
        // Not sin/cos: PoCL's 16-lane versions lose accuracy on large arguments (sin(x) off
        // by 7e-3 where the scalar one is exact to an ulp); not rsqrt (computed in double).
        if (val.unary == UnaryOp::Rsqrt || val.unary == UnaryOp::LogicalNot ||
            val.unary == UnaryOp::Sin || val.unary == UnaryOp::Cos)
          return false;
        break;
      case ValueKind::Binary:
        if (val.binary != BinaryOp::Add && val.binary != BinaryOp::Subtract &&
            val.binary != BinaryOp::Multiply && val.binary != BinaryOp::Divide &&
            val.binary != BinaryOp::Maximum && val.binary != BinaryOp::Minimum)
          return false;
        break;
      default: return false;
    }
  }
  return true;
}

// An element-wise kernel in the float16 form whose stores are contiguous along the last axis.
bool OpenclDialect::vector_form() const {
  const Kernel& k = kernel();
  if (k.reduce || k.ndim() == 0) return false;
  for (const Store& st : k.stores) {
    const KernelBuffer& b = k.buffers[st.buffer];
    if (b.dtype != float32 || b.map.strides.size() != static_cast<size_t>(k.ndim()) ||
        !(b.map.strides.back() == Dim::constant(1)))
      return false;
  }
  return vector_values(static_cast<int>(k.body.size()));
}

void OpenclDialect::vector_constants(source::Emitter& em, const std::string& ind, bool shadows,
                                     int lanes) const {
  const Kernel& k = kernel();
  const std::string T = "float" + std::to_string(lanes);
  for (int i = 0; i < static_cast<int>(k.body.size()); ++i) {
    if (k.body[i].kind != ValueKind::Constant) continue;
    if (shadows)
      em.out() << ind << "const " << T << " " << source::Emitter::v(i) << " = w" << i << ";\n";
    else
      em.out() << ind << "const " << T << " w" << i << " = (" << T << ")(" << source::Emitter::v(i)
               << ");\n";
  }
}

// The 16-lane loop over a segment: constants become vectors (shadowing the scalars inside the
// loop), then loads, values and stores in float16.
void OpenclDialect::vector_run(source::Emitter& em, const std::string& ind) {
  if (!caps_.cpu || !vector_form()) return;
  const Kernel& k_ = kernel();
  const std::string il = "i" + std::to_string(k_.ndim() - 1);
  vector_constants(em, ind, false, 16);
  em.out() << ind << "for (; g + 16 <= stop; g += 16, " << il << " += 16) {\n";
  vector_constants(em, ind + "  ", true, 16);
  lanes_ = 16;
  em.values(0, static_cast<int>(k_.body.size()), ind + "  ");
  for (const Store& st : k_.stores)
    em.out() << ind << "  vstore16(" << name(st.value) << ", 0, b" << st.buffer << " + "
             << address(k_.buffers[st.buffer].map) << ");\n";
  lanes_ = 0;
  em.out() << ind << "}\n";
}

// Folds 16 positions at a time: each lane keeps its own state (a sum in double16 where sums
// accumulate in double; for max and min NaN wins, as kiln_comb), and the lanes are folded into
// the item's state in order at the end. Argmax and products keep the scalar loops.
void OpenclDialect::vector_fold(source::Emitter& em, Dtype acc, const std::string& q0,
                                const std::string& hi, const std::string& ind) {
  const Kernel& k = kernel();
  if (!caps_.cpu || !k.reduce || k.kept_axes() != k.ndim() - 1) return;
  const ReduceOp op = k.reduce->op;
  const int at = k.reduce->value, x = k.body[at].a;
  if (op != ReduceOp::Sum && op != ReduceOp::Max && op != ReduceOp::Min) return;
  if (k.body[x].dtype != float32 || (acc != float32 && acc != float64) || !vector_values(at))
    return;
  const std::string A = acc == float64 ? "double" : "float",
                    il = "i" + std::to_string(k.ndim() - 1);
  auto lanes = [&](const std::string& in, const std::string& target) {
    em.out() << in << "const " << words().index << " " << il << " = " << q0 << ";\n";
    vector_constants(em, in, true, 16);
    lanes_ = 16;
    em.values(0, at, in);
    lanes_ = 0;
    std::string v = source::Emitter::v(x);
    em.out() << in << target << (acc == float64 ? "convert_double16(" + v + ")" : v) << ";\n";
  };
  em.out() << ind << "if (" << q0 << " + 16 <= " << hi << ") {\n";
  vector_constants(em, ind + "  ", false, 16);
  em.out() << ind << "  " << A << "16 va;\n" << ind << "  {\n";
  lanes(ind + "    ", "va = ");
  em.out() << ind << "  }\n";
  em.out() << ind << "  for (" << q0 << " += 16; " << q0 << " + 16 <= " << hi << "; " << q0
           << " += 16) {\n";
  lanes(ind + "    ", "const " + A + "16 vb = ");
  if (op == ReduceOp::Sum)
    em.out() << ind << "    va = va + vb;\n";
  else
    em.out() << ind << "    va = select(va, vb, (isnan(vb) | (vb "
             << (op == ReduceOp::Max ? ">" : "<") << " va)) & ~isnan(va));\n";
  em.out() << ind << "  }\n";
  em.out() << ind << "  " << A << " lane[16];\n" << ind << "  vstore16(va, 0, lane);\n";
  em.out() << ind << "  for (int u = 0; u < 16; ++u) kiln_comb(&acc, &pos, &has, lane[u], 0, 1);\n";
  em.out() << ind << "}\n";
}

// A GPU's element-wise kernel takes four points per work-item through float4 accesses where
// it is 1-D (canonical: contiguous arrays merge to one axis), in the float16 form's ops, and
// every buffer is walked with stride 1 from an offset that keeps it 16-byte aligned (a cl_mem
// starts at CL_DEVICE_MEM_BASE_ADDR_ALIGN, at least 128 bytes in the full profile), or read
// as a broadcast (stride 0). One float per item reached 79% of an H100's copy bandwidth for
// x + 1 and 69% for gelu (bench_bandwidth, 1 GiB; docs/performance.md).
int OpenclDialect::map_lanes() {
  const Kernel& k = kernel();
  if (caps_.cpu || k.ndim() != 1 || !vector_form()) return 0;
  for (const KernelBuffer& b : k.buffers) {
    const Dim& st = b.map.strides[0];
    if (st == Dim::constant(0) && !b.output) continue;
    if (!(st == Dim::constant(1)) || b.map.offset.is_runtime() || b.map.offset.value % 4 != 0)
      return 0;
  }
  return 4;
}

void OpenclDialect::vector_map(source::Emitter& em, const std::string& ind) {
  const Kernel& k = kernel();
  vector_constants(em, ind, false, 4);
  vector_constants(em, ind, true, 4);
  lanes_ = 4;
  em.values(0, static_cast<int>(k.body.size()), ind);
  for (const Store& st : k.stores)
    em.out() << ind << "*(__global float4*)(b" << st.buffer << " + "
             << address(k.buffers[st.buffer].map) << ") = " << name(st.value) << ";\n";
  lanes_ = 0;
}

}  // namespace kiln::opencl
