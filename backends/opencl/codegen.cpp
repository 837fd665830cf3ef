#include "backends/opencl/codegen.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "graph/error.h"

namespace kiln::opencl {

namespace {

// Helpers every program carries: the 16-bit float conversions of graph/float16.h, the random
// bits of graph/random.cpp and integer power of scalar_ops.h, in OpenCL C.
const char* kPrelude = R"CL(
inline float kiln_h2f(ushort h) {
  uint sign = ((uint)h & 0x8000u) << 16;
  uint e = ((uint)h >> 10) & 0x1fu, m = (uint)h & 0x3ffu;
  if (e == 0x1fu) return as_float(sign | 0x7f800000u | (m << 13));
  if (e == 0u) { float v = (float)m * 0x1.0p-24f; return sign ? -v : v; }
  return as_float(sign | ((e + 112u) << 23) | (m << 13));
}
inline ushort kiln_f2h(float f) {
  uint x = as_uint(f);
  uint sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return (ushort)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (ushort)(sign | 0x7c00u);
  uint h, rem, hw;
  if (a >= 0x38800000u) {
    uint r = a - 0x38000000u;
    h = r >> 13; rem = r & 0x1fffu; hw = 0x1000u;
  } else {
    uint ex = a >> 23;
    if (ex < 102u) return (ushort)sign;
    uint m = (a & 0x7fffffu) | 0x800000u, s = 126u - ex;
    h = m >> s; rem = m & ((1u << s) - 1u); hw = 1u << (s - 1u);
  }
  if (rem > hw || (rem == hw && (h & 1u))) ++h;
  return (ushort)(sign | h);
}
inline float kiln_bf2f(ushort b) { return as_float((uint)b << 16); }
inline ushort kiln_f2bf(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40u);
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float kiln_rh(float f) { return kiln_h2f(kiln_f2h(f)); }
inline float kiln_rbf(float f) { return kiln_bf2f(kiln_f2bf(f)); }
inline ulong kiln_mix(ulong z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
  return z ^ (z >> 31);
}
inline ulong kiln_bits(ulong key, ulong c) { return kiln_mix(key + (c + 1UL) * 0x9e3779b97f4a7c15UL); }
// float32 erf as x * P(x^2) / Q(x^2) on [-4, 4] (the cpu backend's rational fit, within 5 ulp):
// straight-line code that vectorises, where a driver's erf may be a scalar call per element
// (PoCL's made a fused gelu 100x slower). Compares, not fmin/fmax, so NaN passes through.
inline float kiln_erf(float x) {
  float c = x > 4.0f ? 4.0f : x;
  c = c < -4.0f ? -4.0f : c;
  float z = c * c;
  float p = fma(z, 2.0015095640223045e-6f, 0.00028283157593563815f);
  p = fma(p, z, 0.0038033077684824308f);
  p = fma(p, z, 0.052852256547350698f);
  p = fma(p, z, 0.19167024685191649f);
  p = fma(p, z, 1.1283791590578851f);
  float q = fma(z, 3.7483294648092395e-5f, 0.0011663487838495679f);
  q = fma(q, z, 0.015045922524155666f);
  q = fma(q, z, 0.11457382724376274f);
  q = fma(q, z, 0.50319622937315642f);
  q = fma(q, z, 1.0f);
  return c * (p / q);
}
// kiln_erf over 16 lanes, for the vector form of element-wise kernels on CPU devices.
inline float16 kiln_erf16(float16 x) {
  float16 c = select(x, (float16)(4.0f), x > (float16)(4.0f));
  c = select(c, (float16)(-4.0f), c < (float16)(-4.0f));
  float16 z = c * c;
  float16 p = fma(z, (float16)(2.0015095640223045e-6f), (float16)(0.00028283157593563815f));
  p = fma(p, z, (float16)(0.0038033077684824308f));
  p = fma(p, z, (float16)(0.052852256547350698f));
  p = fma(p, z, (float16)(0.19167024685191649f));
  p = fma(p, z, (float16)(1.1283791590578851f));
  float16 q = fma(z, (float16)(3.7483294648092395e-5f), (float16)(0.0011663487838495679f));
  q = fma(q, z, (float16)(0.015045922524155666f));
  q = fma(q, z, (float16)(0.11457382724376274f));
  q = fma(q, z, (float16)(0.50319622937315642f));
  q = fma(q, z, (float16)(1.0f));
  return c * (p / q);
}
inline long kiln_ipow(long base, long e, int is_signed) {
  if (is_signed && e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  ulong r = 1UL, b = (ulong)base, ue = (ulong)e;
  while (ue) { if (ue & 1UL) r *= b; b *= b; ue >>= 1; }
  return (long)r;
}
)CL";

// The OpenCL C type a value of dtype d lives in inside a kernel.
const char* value_type(Dtype d) {
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

// The unsigned type integer arithmetic wraps in.
const char* unsigned_type(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Int8:
    case Dtype::Kind::UInt8:
    case Dtype::Kind::Bool: return "uchar";
    case Dtype::Kind::Int32:
    case Dtype::Kind::UInt32: return "uint";
    default: return "ulong";
  }
}

// The element type of a buffer of dtype d.
const char* storage_type(Dtype d) { return d.is_half() ? "ushort" : value_type(d); }

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

std::string int_literal(int64_t v, Dtype d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "((%s)0x%llxUL)", value_type(d),
                static_cast<unsigned long long>(v));
  return buf;
}

class Emitter {
 public:
  Emitter(const Kernel& k, const DeviceCaps& caps) : k_(k), caps_(caps) {}

  Generated run() {
    Generated g;
    g.num_params = k_.num_params();
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) {
      const Value& v = k_.body[i];
      if (v.kind == ValueKind::Constant && v.param >= 0 && v.dtype.is_float() && v.dtype != float64)
        g.scalars.push_back({v.param, v.dtype}), scalar_values_.push_back(i);
    }
    os_ << "#pragma OPENCL FP_CONTRACT OFF\n";
    if (caps_.fp64) os_ << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
    os_ << kPrelude;
    reduce_at_ = k_.reduce ? k_.reduce->value : static_cast<int>(k_.body.size());
    if (k_.reduce) {
      g.reduction = true;
      emit_combine();
      emit_reduce();
      if (k_.kept_axes() > 0) emit_rows();
      if (k_.kept_axes() == 0) {
        g.split = true;
        emit_part();
        emit_final();
      }
      g.acc_size = acc_size();
    } else {
      emit_map();
    }
    g.source = os_.str();
    return g;
  }

 private:
  // ---- names and expressions ----------------------------------------------------------------
  static std::string v(int i) { return "v" + std::to_string(i); }

  std::string dim(const Dim& d) const {
    return d.is_runtime() ? "p" + std::to_string(d.param) : "(" + std::to_string(d.value) + "L)";
  }

  std::string address(const IndexMap& m) const {
    std::string s = dim(m.offset);
    for (size_t a = 0; a < m.strides.size(); ++a)
      if (!(m.strides[a] == Dim::constant(0)))
        s += " + i" + std::to_string(a) + " * " + dim(m.strides[a]);
    return "(" + s + ")";
  }

  std::string load(int b) const {
    const KernelBuffer& buf = k_.buffers[b];
    if (vec_) return "vload16(0, b" + std::to_string(b) + " + g)";
    std::string x = "b" + std::to_string(b) + "[" + address(buf.map) + "]";
    if (buf.dtype == float16) return "kiln_h2f(" + x + ")";
    if (buf.dtype == bfloat16) return "kiln_bf2f(" + x + ")";
    if (buf.dtype.is_bool()) return "(uchar)(" + x + " != 0)";
    return x;
  }

  std::string store(const Store& s) const {
    const KernelBuffer& buf = k_.buffers[s.buffer];
    std::string x = v(s.value);
    if (buf.dtype == float16)
      x = "kiln_f2h((float)" + x + ")";
    else if (buf.dtype == bfloat16)
      x = "kiln_f2bf((float)" + x + ")";
    else if (buf.dtype.is_bool())
      x = "(uchar)(" + x + " != 0)";
    else
      x = std::string("(") + storage_type(buf.dtype) + ")" + x;
    return "b" + std::to_string(s.buffer) + "[" + address(buf.map) + "] = " + x + ";";
  }

  std::string constant(int i) const {
    const Value& c = k_.body[i];
    if (c.param >= 0) {
      if (!c.dtype.is_float())
        return std::string("(") + value_type(c.dtype) + ")p" + std::to_string(c.param);
      if (c.dtype == float64) return "as_double(p" + std::to_string(c.param) + ")";
      return "c" + std::to_string(i);
    }
    Scalar s = c.constant.cast(c.dtype);
    return c.dtype.is_float() ? float_literal(s.f, c.dtype) : int_literal(s.i, c.dtype);
  }

  // A float32 function of float `a` computed in double (correctly rounded results, as the
  // reference) when the device has fp64.
  std::string via_double(const std::string& expr_of_d, const std::string& a, Dtype d) const {
    if (d == float64) return expr_of_d.empty() ? a : replace_x(expr_of_d, a);
    if (!caps_.fp64) return "";
    return "(float)(" + replace_x(expr_of_d, "(double)" + a) + ")";
  }
  static std::string replace_x(std::string e, const std::string& x) {
    for (size_t p = e.find('X'); p != std::string::npos; p = e.find('X', p + x.size()))
      e.replace(p, 1, x);
    return e;
  }

  std::string unary(const Value& val) const {
    Dtype d = val.dtype;
    std::string a = v(val.a), T = value_type(d);
    if (val.unary == UnaryOp::LogicalNot) return "(" + T + ")(" + a + " == 0)";
    if (!d.is_float()) {
      std::string U = unsigned_type(d);
      switch (val.unary) {
        case UnaryOp::Negative: return "(" + T + ")(0 - (" + U + ")" + a + ")";
        case UnaryOp::Abs:
          if (!is_signed_int(d)) return a;
          return "(" + a + " < 0 ? (" + T + ")(0 - (" + U + ")" + a + ") : " + a + ")";
        default: return a;  // floor/ceil of an integer
      }
    }
    std::string one = d == float64 ? "1.0" : "1.0f";
    switch (val.unary) {
      case UnaryOp::Negative: return "(-" + a + ")";
      case UnaryOp::Abs: return "fabs(" + a + ")";
      case UnaryOp::Exp: return "exp(" + a + ")";
      case UnaryOp::Log: return "log(" + a + ")";
      case UnaryOp::Sqrt: return "sqrt(" + a + ")";
      case UnaryOp::Rsqrt: {
        std::string e = via_double("1.0 / sqrt(X)", a, d);
        return e.empty() ? "(1.0f / sqrt(" + a + "))" : e;
      }
      case UnaryOp::Sin: return "sin(" + a + ")";
      case UnaryOp::Cos: return "cos(" + a + ")";
      case UnaryOp::Tanh: return "tanh(" + a + ")";
      case UnaryOp::Erf:
        return (d == float64 ? "erf(" : vec_ ? "kiln_erf16(" : "kiln_erf(") + a + ")";
      case UnaryOp::Sigmoid: return "(" + one + " / (" + one + " + exp(-" + a + ")))";
      case UnaryOp::Floor: return "floor(" + a + ")";
      case UnaryOp::Ceil: return "ceil(" + a + ")";
      case UnaryOp::LogicalNot: break;
    }
    return a;
  }

  std::string binary(const Value& val) const {
    Dtype d = k_.body[val.a].dtype;
    std::string a = v(val.a), b = v(val.b), T = value_type(val.dtype);
    auto cmp = [&](const char* op) { return "(uchar)(" + a + " " + op + " " + b + ")"; };
    switch (val.binary) {
      case BinaryOp::Equal: return cmp("==");
      case BinaryOp::NotEqual: return cmp("!=");
      case BinaryOp::Less: return cmp("<");
      case BinaryOp::LessEqual: return cmp("<=");
      case BinaryOp::Greater: return cmp(">");
      case BinaryOp::GreaterEqual: return cmp(">=");
      case BinaryOp::LogicalAnd: return "(uchar)(" + a + " != 0 && " + b + " != 0)";
      case BinaryOp::LogicalOr: return "(uchar)(" + a + " != 0 || " + b + " != 0)";
      default: break;
    }
    if (d.is_float()) {
      switch (val.binary) {
        case BinaryOp::Add: return "(" + a + " + " + b + ")";
        case BinaryOp::Subtract: return "(" + a + " - " + b + ")";
        case BinaryOp::Multiply: return "(" + a + " * " + b + ")";
        case BinaryOp::Divide: return "(" + a + " / " + b + ")";
        case BinaryOp::Power: {
          if (d == float64) return "pow(" + a + ", " + b + ")";
          if (caps_.fp64) return "(float)pow((double)" + a + ", (double)" + b + ")";
          return "pow(" + a + ", " + b + ")";
        }
        case BinaryOp::Maximum:
          return "((isnan(" + a + ") || " + a + " > " + b + ") ? " + a + " : " + b + ")";
        case BinaryOp::Minimum:
          return "((isnan(" + a + ") || " + a + " < " + b + ") ? " + a + " : " + b + ")";
        default: break;
      }
    }
    std::string U = unsigned_type(d);
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
        return "(" + b + " == 0 ? (" + T + ")0 : " + b + " == -1 ? (" + T + ")(0 - (" + U + ")" +
               a + ") : (" + T + ")(" + a + " / " + b + "))";
      case BinaryOp::Power:
        return "(" + T + ")kiln_ipow((long)" + a + ", (long)" + b + ", " +
               (is_signed_int(d) ? "1" : "0") + ")";
      case BinaryOp::Maximum: return "(" + a + " > " + b + " ? " + a + " : " + b + ")";
      case BinaryOp::Minimum: return "(" + a + " < " + b + " ? " + a + " : " + b + ")";
      default: break;
    }
    return a;
  }

  std::string cast(const Value& val) const {
    Dtype from = k_.body[val.a].dtype, to = val.dtype;
    std::string a = v(val.a), T = value_type(to);
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
    if (from.is_float()) return std::string("convert_") + T + "_sat_rtz(" + a + ")";
    return "(" + T + ")" + a;
  }

  std::string random(const Value& val) const {
    std::string key =
        val.param >= 0 ? "(ulong)p" + std::to_string(val.param) : "0x" + hex(val.key) + "UL";
    std::string c = "(ulong)" + v(val.a);
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

  static std::string hex(uint64_t x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(x));
    return buf;
  }

  std::string expr(int i) const {
    const Value& val = k_.body[i];
    switch (val.kind) {
      case ValueKind::Load: return load(val.buffer);
      case ValueKind::Constant: return constant(i);
      case ValueKind::Index: return address(val.map);
      case ValueKind::Unary: return unary(val);
      case ValueKind::Binary: return binary(val);
      case ValueKind::Select: return "(" + v(val.a) + " ? " + v(val.b) + " : " + v(val.c) + ")";
      case ValueKind::Cast: return cast(val);
      case ValueKind::Random: return random(val);
      case ValueKind::Reduce: break;
    }
    return "";
  }

  void values(int from, int to, const std::string& ind) {
    for (int i = from; i < to; ++i) {
      if (k_.body[i].kind == ValueKind::Constant || k_.body[i].kind == ValueKind::Reduce) continue;
      os_ << ind << "const " << (vec_ ? "float16" : value_type(k_.body[i].dtype)) << " " << v(i)
          << " = " << expr(i) << ";\n";
    }
  }

  void constants(const std::string& ind) {
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i)
      if (k_.body[i].kind == ValueKind::Constant)
        os_ << ind << "const " << value_type(k_.body[i].dtype) << " " << v(i) << " = "
            << constant(i) << ";\n";
  }

  void stores(const std::string& ind) {
    for (const Store& s : k_.stores) os_ << ind << store(s) << "\n";
  }

  // ---- signatures and shared pieces ---------------------------------------------------------
  void signature(const char* entry, bool locals, const std::string& extra) {
    os_ << "__kernel void " << entry << "(";
    for (size_t b = 0; b < k_.buffers.size(); ++b)
      os_ << (b ? ", " : "") << "__global " << (k_.buffers[b].output ? "" : "const ")
          << storage_type(k_.buffers[b].dtype) << "* b" << b;
    bool first = k_.buffers.empty();
    auto sep = [&] {
      if (!first) os_ << ", ";
      first = false;
    };
    for (int p = 0; p < k_.num_params(); ++p) sep(), os_ << "long p" << p;
    for (int i : scalar_values_) sep(), os_ << "float c" << i;
    if (locals) {
      sep();
      os_ << "__local " << acc_type() << "* la, __local long* lp, __local int* lh";
    }
    if (!extra.empty()) sep(), os_ << extra;
    os_ << ") {\n";
    for (int a = 0; a < k_.ndim(); ++a)
      os_ << "  const long e" << a << " = " << dim(k_.domain[a]) << ";\n";
    constants("  ");
  }

  // Declares i{from}..i{to-1} from the linear index `lin` (row-major over those axes).
  void coords(int from, int to, const std::string& lin, const std::string& ind) {
    if (from >= to) return;
    os_ << ind << "long r_ = " << lin << ";\n";
    for (int a = to - 1; a > from; --a)
      os_ << ind << "const long i" << a << " = r_ % e" << a << "; r_ /= e" << a << ";\n";
    os_ << ind << "const long i" << from << " = r_;\n";
  }

  std::string product(int from, int to) const {
    std::string s = "1L";
    for (int a = from; a < to; ++a) s += " * e" + std::to_string(a);
    return s;
  }

  // ---- element-wise -------------------------------------------------------------------------
  void emit_map() {
    signature("kiln_map", false, "");
    os_ << "  const long total = " << product(0, k_.ndim()) << ";\n";
    if (caps_.cpu) {
      // A CPU device runs a work-group's items one after another on one thread: each item
      // takes one contiguous run of the domain, a loop the driver's compiler vectorises with
      // contiguous vector loads and stores (one element per item made PoCL's gelu ~4x slower:
      // its work-item loop vectorised, but with the per-item bounds check and index
      // arithmetic in the way). The host launches a few groups per compute unit.
      os_ << "  const long items = get_global_size(0);\n";
      os_ << "  const long per = (total + items - 1) / items;\n";
      os_ << "  const long from = get_global_id(0) * per;\n";
      os_ << "  const long to = min(from + per, total);\n";
      os_ << "  long g0 = from;\n";
      if (vector_form()) emit_vector_run();
      os_ << "  for (long g = g0; g < to; ++g) {\n";
    } else {
      // One element per work-item (the launch covers the domain): neighbouring items touch
      // neighbouring elements, as GPUs want.
      os_ << "  const long g = get_global_id(0);\n";
      os_ << "  if (g < total) {\n";
    }
    coords(0, k_.ndim(), "g", "    ");
    values(0, static_cast<int>(k_.body.size()), "    ");
    stores("    ");
    os_ << "  }\n}\n";
  }

  // A float32 kernel over one contiguous axis whose every load and store is at the point
  // itself, with operations OpenCL C defines on vectors: its CPU-device run goes 16 lanes at a
  // time in explicit float16 (PoCL's vectoriser stops at 256-bit vectors on AVX-512 hosts, where
  // explicit 512-bit types are used as such), the scalar loop takes the rest.
  bool vector_form() const {
    if (k_.ndim() != 1 || k_.reduce) return false;
    auto at_point = [](const IndexMap& m) {
      return m.offset == Dim::constant(0) && m.strides.size() == 1 &&
             m.strides[0] == Dim::constant(1);
    };
    for (const KernelBuffer& b : k_.buffers)
      if (b.dtype != float32 || !at_point(b.map)) return false;
    for (const Value& val : k_.body) {
      if (val.dtype != float32) return false;
      switch (val.kind) {
        case ValueKind::Load:
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

  // The 16-lane loop: constants become vectors (shadowing the scalars inside the loop), then
  // loads, values and stores in float16.
  void emit_vector_run() {
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i)
      if (k_.body[i].kind == ValueKind::Constant)
        os_ << "  const float16 w" << i << " = (float16)(" << v(i) << ");\n";
    os_ << "  for (; g0 + 16 <= to; g0 += 16) {\n";
    os_ << "    const long g = g0;\n";
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i)
      if (k_.body[i].kind == ValueKind::Constant)
        os_ << "    const float16 " << v(i) << " = w" << i << ";\n";
    vec_ = true;
    values(0, static_cast<int>(k_.body.size()), "    ");
    for (const Store& st : k_.stores)
      os_ << "    vstore16(" << v(st.value) << ", 0, b" << st.buffer << " + g);\n";
    vec_ = false;
    os_ << "  }\n";
  }

  // ---- reductions ---------------------------------------------------------------------------
  Dtype in_dtype() const { return k_.body[k_.body[reduce_at_].a].dtype; }
  bool float_sum() const {
    ReduceOp op = k_.reduce->op;
    return in_dtype().is_float() && (op == ReduceOp::Sum || op == ReduceOp::Prod);
  }
  std::string acc_type() const {
    if (float_sum()) return in_dtype() == float64 || caps_.fp64 ? "double" : "float";
    return value_type(in_dtype());
  }
  size_t acc_size() const {
    std::string t = acc_type();
    return t == "double" || t == "long" || t == "ulong" ? 8
           : t == "float" || t == "int" || t == "uint"  ? 4
                                                        : 1;
  }
  std::string acc_init() const {
    return k_.reduce->op == ReduceOp::Prod ? "(" + acc_type() + ")1" : "(" + acc_type() + ")0";
  }

  // kiln_comb(a, b): folds state b into state a (sum, product, or the better of the two).
  void emit_combine() {
    std::string A = acc_type();
    os_ << "inline void kiln_comb(" << A << "* a, long* pa, int* ha, " << A
        << " b, long pb, int hb) {\n";
    ReduceOp op = k_.reduce->op;
    bool fl = in_dtype().is_float();
    if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      const char* o = op == ReduceOp::Sum ? "+" : "*";
      if (fl) {
        os_ << "  *a = *a " << o << " b;\n";
      } else {
        std::string U = unsigned_type(in_dtype());
        os_ << "  *a = (" << A << ")((" << U << ")*a " << o << " (" << U << ")b);\n";
      }
    } else {
      std::string better;
      const char* gt = op == ReduceOp::Min ? "<" : ">";
      if (fl) {
        better = std::string("(!isnan(*a) && (isnan(b) || b ") + gt + " *a))";
        if (op == ReduceOp::Argmax)
          better = "(" + better + " || ((b == *a || (isnan(b) && isnan(*a))) && pb < *pa))";
      } else {
        better = std::string("(b ") + gt + " *a)";
        if (op == ReduceOp::Argmax) better = "(" + better + " || (b == *a && pb < *pa))";
      }
      os_ << "  if (hb && (!*ha || " << better << ")) { *a = b; *pa = pb; }\n";
    }
    os_ << "  *ha = *ha | hb;\n}\n";
  }

  void state_init(const std::string& ind) {
    os_ << ind << acc_type() << " acc = " << acc_init() << "; long pos = 0; int has = 0;\n";
  }

  // Folds this work-item's share of positions [lo, hi): interleaved on GPUs, one contiguous run
  // each on CPU devices (DeviceCaps::cpu).
  void items(const std::string& lo, const std::string& hi, const std::string& ind) {
    if (!caps_.cpu) {
      os_ << ind << "for (long q = " << lo << " + get_local_id(0); q < " << hi
          << "; q += get_local_size(0)) {\n";
      fold_element(ind + "  ");
      os_ << ind << "}\n";
      return;
    }
    os_ << ind << "const long run = (" << hi << " - " << lo
        << " + get_local_size(0) - 1) / get_local_size(0);\n";
    os_ << ind << "const long qa = " << lo << " + get_local_id(0) * run;\n";
    os_ << ind << "const long qb = min(qa + run, (long)(" << hi << "));\n";
    fold_range("qa", "qb", ind);
  }

  // One raw element at reduced position `q`: the prologue, then fold it into the state named
  // by `acc`, `pos` and `has` (this item's own, or one of its unrolled partials).
  void fold_element(const std::string& ind, const std::string& acc = "acc",
                    const std::string& pos = "pos", const std::string& has = "has") {
    coords(k_.kept_axes(), k_.ndim(), "q", ind);
    values(0, reduce_at_, ind);
    int x = k_.body[reduce_at_].a;
    os_ << ind << "kiln_comb(&" << acc << ", &" << pos << ", &" << has << ", (" << acc_type() << ")"
        << v(x) << ", q, 1);\n";
  }

  void tree(const std::string& ind) {
    os_ << ind << "const int lid = (int)get_local_id(0);\n";
    os_ << ind << "la[lid] = acc; lp[lid] = pos; lh[lid] = has;\n";
    os_ << ind << "barrier(CLK_LOCAL_MEM_FENCE);\n";
    os_ << ind << "for (int s = (int)get_local_size(0) / 2; s > 0; s >>= 1) {\n";
    os_ << ind << "  if (lid < s) {\n";
    os_ << ind << "    " << acc_type() << " ta = la[lid]; long tp = lp[lid]; int th = lh[lid];\n";
    os_ << ind << "    kiln_comb(&ta, &tp, &th, la[lid + s], lp[lid + s], lh[lid + s]);\n";
    os_ << ind << "    la[lid] = ta; lp[lid] = tp; lh[lid] = th;\n";
    os_ << ind << "  }\n";
    os_ << ind << "  barrier(CLK_LOCAL_MEM_FENCE);\n";
    os_ << ind << "}\n";
  }

  // The reduced value (from local memory after a tree, or from this item's own state), the
  // epilogue at reduced coordinates 0, the stores.
  void finish_body(const std::string& in, bool from_locals) {
    for (int a = k_.kept_axes(); a < k_.ndim(); ++a) os_ << in << "const long i" << a << " = 0;\n";
    const Value& rv = k_.body[reduce_at_];
    std::string r = k_.reduce->op == ReduceOp::Argmax ? (from_locals ? "lp[0]" : "pos")
                                                      : (from_locals ? "la[0]" : "acc");
    os_ << in << "const " << value_type(rv.dtype) << " " << v(reduce_at_) << " = ("
        << value_type(rv.dtype) << ")" << r << ";\n";
    values(reduce_at_ + 1, static_cast<int>(k_.body.size()), in);
    stores(in);
  }

  // Work-item 0 finishes after the tree.
  void finish(const std::string& ind) {
    os_ << ind << "if (lid == 0) {\n";
    finish_body(ind + "  ", true);
    os_ << ind << "}\n";
  }

  // Folds positions [lo, hi) into this item's state. On CPU devices (not argmax) eight partial
  // states take every eighth position and are folded in order at the end: eight independent
  // chains the compiler can interleave and vectorise, where one state is a serial chain of adds
  // or compares (row softmax on PoCL: 750 -> 490 ms). Argmax keeps one state (positions).
  void fold_range(const std::string& lo, const std::string& hi, const std::string& ind) {
    os_ << ind << "long q0 = " << lo << ";\n";
    if (caps_.cpu && k_.reduce->op != ReduceOp::Argmax) {
      os_ << ind << acc_type() << " pa[8]; long pp[8]; int ph[8];\n";
      os_ << ind << "for (int u = 0; u < 8; ++u) { pa[u] = " << acc_init()
          << "; pp[u] = 0; ph[u] = 0; }\n";
      os_ << ind << "for (; q0 + 8 <= " << hi << "; q0 += 8) {\n";
      os_ << ind << "  for (int u = 0; u < 8; ++u) {\n";
      os_ << ind << "    const long q = q0 + u;\n";
      fold_element(ind + "    ", "pa[u]", "pp[u]", "ph[u]");
      os_ << ind << "  }\n" << ind << "}\n";
      os_ << ind
          << "for (int u = 0; u < 8; ++u) kiln_comb(&acc, &pos, &has, pa[u], pp[u], ph[u]);\n";
    }
    os_ << ind << "for (long q = q0; q < " << hi << "; ++q) {\n";
    fold_element(ind + "  ");
    os_ << ind << "}\n";
  }

  // One work-item per output element, no local memory or barriers: for many outputs (rows of a
  // softmax), where a work-group per output would spend its time in barriers.
  void emit_rows() {
    signature("kiln_rows", false, "");
    int kept = k_.kept_axes();
    os_ << "  const long nout = " << product(0, kept) << ";\n";
    os_ << "  const long nred = " << product(kept, k_.ndim()) << ";\n";
    os_ << "  const long o = get_global_id(0);\n";
    os_ << "  if (o < nout) {\n";
    coords(0, kept, "o", "    ");
    state_init("    ");
    fold_range("0", "nred", "    ");
    finish_body("    ", false);
    os_ << "  }\n}\n";
  }

  void emit_reduce() {
    signature("kiln_reduce", true, "");
    int kept = k_.kept_axes();
    os_ << "  const long nout = " << product(0, kept) << ";\n";
    os_ << "  const long nred = " << product(kept, k_.ndim()) << ";\n";
    os_ << "  for (long o = get_group_id(0); o < nout; o += get_num_groups(0)) {\n";
    coords(0, kept, "o", "    ");
    state_init("    ");
    items("0", "nred", "    ");
    tree("    ");
    finish("    ");
    os_ << "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n}\n";
  }

  std::string scratch_args(bool read_only) const {
    std::string c = read_only ? "const " : "";
    return "__global " + c + acc_type() + "* sa, __global " + c + "long* sp, __global " + c +
           "int* sh";
  }

  void emit_part() {
    signature("kiln_part", true, scratch_args(false));
    os_ << "  const long nred = " << product(0, k_.ndim()) << ";\n";
    os_ << "  const long ng = get_num_groups(0), g = get_group_id(0);\n";
    os_ << "  const long chunk = (nred + ng - 1) / ng;\n";
    os_ << "  const long lo = g * chunk, hi = min(lo + chunk, nred);\n";
    state_init("  ");
    items("lo", "hi", "  ");
    tree("  ");
    os_ << "  if (lid == 0) { sa[g] = la[0]; sp[g] = lp[0]; sh[g] = lh[0]; }\n}\n";
  }

  void emit_final() {
    signature("kiln_final", true, scratch_args(true) + ", long nparts");
    state_init("  ");
    os_ << "  for (long q = get_local_id(0); q < nparts; q += get_local_size(0))\n";
    os_ << "    kiln_comb(&acc, &pos, &has, sa[q], sp[q], sh[q]);\n";
    tree("  ");
    finish("  ");
    os_ << "}\n";
  }

  const Kernel& k_;
  DeviceCaps caps_;
  bool vec_ = false;  // emitting the float16 form of an element-wise body (emit_vector_run)
  std::ostringstream os_;
  std::vector<int> scalar_values_;
  int reduce_at_ = 0;
};

bool uses(const Kernel& k, bool (*pred)(Dtype)) {
  for (const KernelBuffer& b : k.buffers)
    if (pred(b.dtype)) return true;
  for (const Value& v : k.body)
    if (pred(v.dtype)) return true;
  return false;
}

}  // namespace

Generated generate(const Kernel& k, const DeviceCaps& caps, const std::string& device_name) {
  if (!caps.fp64 && uses(k, [](Dtype d) { return d == float64; }))
    throw_error("opencl: kernel ", k.name, " needs float64, but device ", device_name,
                " lacks the cl_khr_fp64 extension (valid: float32/float16/bfloat16 on this "
                "device, or a device whose `kiln devices` line says fp64 yes)");
  if (!caps.int64 && (uses(k, [](Dtype d) { return d == int64 || d == uint64; }) || k.reduce))
    throw_error("opencl: kernel ", k.name, " needs 64-bit integers, but device ", device_name,
                " lacks them (OpenCL embedded profile without cles_khr_int64)");
  return Emitter(k, caps).run();
}

}  // namespace kiln::opencl
