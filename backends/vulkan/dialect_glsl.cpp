#include "backends/vulkan/dialect_glsl.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "graph/error.h"

namespace kiln::vulkan {

namespace {

std::string hex_u32(uint32_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%" PRIx32 "u", v);
  return b;
}

std::string hex_u64(uint64_t v) {
  char b[40];
  std::snprintf(b, sizeof b, "0x%" PRIx64 "ul", v);
  return b;
}

}  // namespace

// The GLSL type a value of dtype d is computed in (16-bit floats compute in float32, the 8-bit
// integers in 32 bits, wrapped after every op).
const char* GlslDialect::ctype(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool: return "bool";
    case Dtype::Kind::Int8:
    case Dtype::Kind::Int32: return "int";
    case Dtype::Kind::UInt8:
    case Dtype::Kind::UInt32: return "uint";
    case Dtype::Kind::Int64: return "int64_t";
    case Dtype::Kind::UInt64: return "uint64_t";
    case Dtype::Kind::Float64: return "double";
    default: return "float";
  }
}

void GlslDialect::lacks(const char* feature, const std::string& why) {
  throw_error("vulkan: kernel ", kernel().name, " needs the device feature ", feature, " (", why,
              ") which ", f_.device,
              " does not offer; valid on this device: float32, float16, bfloat16, int32, "
              "uint32, int8, uint8 and bool without 64-bit values");
}

void GlslDialect::check_features() {
  auto need = [&](Dtype d) {
    if (d == float64 && !f_.float64) lacks("shaderFloat64", "float64 values");
    if ((d == int64 || d == uint64) && !f_.int64) lacks("shaderInt64", "64-bit integer values");
  };
  for (const KernelBuffer& b : kernel().buffers) need(b.dtype);
  for (const Value& v : kernel().body) {
    need(v.dtype);
    if (v.kind == ValueKind::Random && !f_.int64)
      lacks("shaderInt64", "counter-based random bits are 64-bit");
  }
  if (kernel().reduce && kernel().reduce->op == ReduceOp::Argmax && !f_.int64)
    lacks("shaderInt64", "argmax positions are int64");
}

std::string GlslDialect::dim(const Dim& d) {
  if (d.is_runtime()) return "k_param(" + std::to_string(d.param) + ")";
  if (d.value > INT32_MAX || d.value < INT32_MIN)
    throw_error("vulkan: kernel ", kernel().name, " has an extent, stride or offset of ", d.value,
                ", beyond the backend's 32-bit addressing (at most ", INT32_MAX, ")");
  return "IDX(" + std::to_string(d.value) + ")";
}

const char* GlslDialect::vec_type(Dtype d) const {
  if (width == 8) return "u64vec4";
  return d == float32 ? "vec4" : d == int32 ? "ivec4" : "uvec4";
}

std::string GlslDialect::from_bits(Dtype d, const std::string& bits) {
  if (d == float32) return "uintBitsToFloat(" + bits + ")";
  if (d == int32) return "int(" + bits + ")";
  return bits;
}

std::string GlslDialect::to_bits(Dtype d, const std::string& x) {
  if (d == float32) return "floatBitsToUint(" + x + ")";
  if (d == int32) return "uint(" + x + ")";
  return x;
}

std::string GlslDialect::truth(Dtype d, const std::string& x) {
  if (d.is_bool()) return x;
  if (d.is_float()) return "(" + x + " != " + ctype(d) + "(0))";
  return "(" + x + " != " + ctype(d) + "(0))";
}

std::string GlslDialect::wrap(Dtype d, const std::string& x) const {
  if (d == int8) return "bitfieldExtract(" + x + ", 0, 8)";
  if (d == uint8) return "((" + x + ") & 0xffu)";
  return x;
}

std::string GlslDialect::literal(Dtype d, const Scalar& s) {
  if (d == float64) {
    uint64_t bits;
    std::memcpy(&bits, &s.f, 8);
    return "packDouble2x32(uvec2(" + hex_u32(static_cast<uint32_t>(bits)) + ", " +
           hex_u32(static_cast<uint32_t>(bits >> 32)) + "))";
  }
  if (d.is_float()) {
    float fv = static_cast<float>(s.f);
    uint32_t bits;
    std::memcpy(&bits, &fv, 4);
    return "uintBitsToFloat(" + hex_u32(bits) + ")";
  }
  if (d.is_bool()) return s.i ? "true" : "false";
  if (d == int64) return "int64_t(" + hex_u64(static_cast<uint64_t>(s.i)) + ")";
  if (d == uint64) return hex_u64(static_cast<uint64_t>(s.i));
  if (d.is_unsigned()) return hex_u32(static_cast<uint32_t>(s.i));
  return "int(" + hex_u32(static_cast<uint32_t>(s.i)) + ")";
}

std::string GlslDialect::param_value(Dtype d, int p) {
  std::string w = "prm.w[" + std::to_string(p) + "]";
  if (d == float64) return "packDouble2x32(" + w + ")";
  if (d.is_float()) {
    int slot = nparams + static_cast<int>(float_slots.size());
    float_slots.push_back({p, slot});
    return "uintBitsToFloat(prm.w[" + std::to_string(slot) + "].x)";
  }
  if (d.is_bool()) return "((" + w + ".x | " + w + ".y) != 0u)";
  if (d == int64) return "((int64_t(" + w + ".y) << 32) | int64_t(" + w + ".x))";
  if (d == uint64) return "((uint64_t(" + w + ".y) << 32) | uint64_t(" + w + ".x))";
  if (d.is_unsigned()) return w + ".x";
  return "int(" + w + ".x)";
}

std::string GlslDialect::load(int b) {
  Dtype d = kernel().buffers[b].dtype;
  std::string a = "(" + address(kernel().buffers[b].map) + ")";
  std::string arr = "b" + std::to_string(b) + ".d";
  if (texel.count(b)) {
    if (lane >= 0)
      return from_bits(d, texel_name(b, lane / 4) + "[" + std::to_string(lane % 4) + "]");
    return from_bits(
        d, "texelFetch(b" + std::to_string(b) + ", int(" + a + " >> 2))[uint(" + a + " & IDX(3))]");
  }
  if (vec.count(b)) {
    std::string L = "L" + std::to_string(b);
    if (width == 8) {
      if (lane >= 0)
        return from_bits(d, "uint(" + L + "[" + std::to_string(lane / 2) + "]" +
                                (lane % 2 ? " >> 32" : "") + ")");
      return from_bits(d, "uint(" + arr + "[uint(" + a + " >> 3)][uint((" + a +
                              " >> 1) & IDX(3))] >> (uint(" + a + " & IDX(1)) * 32u))");
    }
    if (lane >= 0) return L + "[" + std::to_string(lane) + "]";
    return arr + "[uint(" + a + " >> 2)][uint(" + a + " & IDX(3))]";
  }
  return scalar_element(b, a);
}

// The row a Gather's index picks, wrapped once and clamped into [0, extent-1] in int64
// (kernel_ir.h), then the element that row's offset reaches. A gathered buffer is never read as
// vectors (find_vector_buffers), so this is the scalar access.
std::string GlslDialect::gather(const Value& v) {
  std::string a = name(v.a), e = "int64_t(" + dim(v.extent) + ")";
  std::string row =
      "IDX(clamp((" + a + " < 0l ? " + a + " + " + e + " : " + a + "), 0l, " + e + " - 1l))";
  return scalar_element(v.buffer, "(" + address(kernel().buffers[v.buffer].map) + " + " + row +
                                      " * " + dim(v.step) + ")");
}

std::string GlslDialect::scalar_element(int b, const std::string& a) {
  Dtype d = kernel().buffers[b].dtype;
  std::string arr = "b" + std::to_string(b) + ".d";
  int bits = packed_bits(d);
  if (!bits) return arr + "[uint(" + a + ")]";
  std::string word =
      bits == 8 ? "(" + arr + "[uint(" + a + " >> 2)] >> (uint(" + a + " & IDX(3)) * 8u))"
                : "(" + arr + "[uint(" + a + " >> 1)] >> (uint(" + a + " & IDX(1)) * 16u))";
  switch (d.kind) {
    case Dtype::Kind::Int8: return "bitfieldExtract(int(" + word + "), 0, 8)";
    case Dtype::Kind::UInt8: return "(" + word + " & 0xffu)";
    case Dtype::Kind::Bool: return "((" + word + " & 0xffu) != 0u)";
    case Dtype::Kind::Float16: return "k_h2f(" + word + " & 0xffffu)";
    default: return "k_bf2f(" + word + " & 0xffffu)";  // bfloat16
  }
}

std::string GlslDialect::store(const Store& s, const std::string& ind) {
  Dtype d = kernel().buffers[s.buffer].dtype;
  std::string a = "(" + address(kernel().buffers[s.buffer].map) + ")";
  std::string arr = "b" + std::to_string(s.buffer) + ".d";
  std::string x = name(s.value);
  std::string out = ind + "O" + std::to_string(s.buffer) + "[" + std::to_string(lane) + "] = ";
  if (vec.count(s.buffer) && width == 8) {
    if (lane >= 0) return out + to_bits(d, x) + ";\n";
    // The tail: this invocation owns every element of the words it touches.
    std::string w = arr + "[uint(" + a + " >> 3)][uint((" + a + " >> 1) & IDX(3))]";
    return ind + "{ uint sh = uint(" + a + " & IDX(1)) * 32u;\n" + ind + "  " + w + " = (" + w +
           " & ~(0xfffffffful << sh)) | (uint64_t(" + to_bits(d, x) + ") << sh); }\n";
  }
  if (vec.count(s.buffer)) {
    if (lane >= 0) return out + x + ";\n";
    return ind + arr + "[uint(" + a + " >> 2)][uint(" + a + " & IDX(3))] = " + x + ";\n";
  }
  int bits = packed_bits(d);
  if (!bits) return ind + arr + "[uint(" + a + ")] = " + x + ";\n";
  std::string val;
  switch (d.kind) {
    case Dtype::Kind::Int8: val = "(uint(" + x + ") & 0xffu)"; break;
    case Dtype::Kind::UInt8: val = "(" + x + " & 0xffu)"; break;
    case Dtype::Kind::Bool: val = "(" + x + " ? 1u : 0u)"; break;
    case Dtype::Kind::Float16: val = "k_f2h(" + x + ")"; break;
    default: val = "k_f2bf(" + x + ")"; break;
  }
  // Neighbouring elements of the word belong to other invocations: atomics on the word.
  std::string word = bits == 8 ? "uint(" + a + " >> 2)" : "uint(" + a + " >> 1)";
  std::string shift =
      bits == 8 ? "(uint(" + a + " & IDX(3)) * 8u)" : "(uint(" + a + " & IDX(1)) * 16u)";
  std::string mask = bits == 8 ? "0xffu" : "0xffffu";
  return ind + "{ uint w = " + word + "; uint sh = " + shift + ";\n" + ind + "  atomicAnd(" + arr +
         "[w], ~(" + mask + " << sh));\n" + ind + "  atomicOr(" + arr + "[w], " + val +
         " << sh); }\n";
}

std::string GlslDialect::convert(Dtype from, Dtype to, const std::string& x) {
  if (from == to) return x;
  if (to.is_float()) {
    std::string f;
    if (from.is_bool())
      f = std::string("(") + x + " ? " + ctype(to) + "(1) : " + ctype(to) + "(0))";
    else if (to == float64)
      f = (from.is_float() ? "k_f2d(" : "double(") + x + ")";  // k_f2d: denormals kept
    else if ((from == int64 || from == uint64) && f_.float64)
      f = "float(double(" + x + "))";  // as the reference: through double
    else
      f = "float(" + x + ")";
    if (to == float16) return "k_rh(" + f + ")";
    if (to == bfloat16) return "k_rbf(" + f + ")";
    return f;
  }
  if (to.is_bool()) {
    if (from.is_float()) return "(" + x + " != " + ctype(from) + "(0) || isnan(" + x + "))";
    return truth(from, x);
  }
  if (from.is_bool())
    return std::string("(") + x + " ? " + ctype(to) + "(1) : " + ctype(to) + "(0))";
  if (from.is_float()) {
    // Truncate toward zero, saturate, NaN -> 0 (graph/element.h).
    const char* F = ctype(from);
    std::string lo, hi, tmin, tmax;
    switch (to.kind) {
      case Dtype::Kind::Int8: lo = "-128", hi = "128", tmin = "-128", tmax = "127"; break;
      case Dtype::Kind::UInt8: lo = "0", hi = "256", tmin = "0u", tmax = "255u"; break;
      case Dtype::Kind::Int32:
        lo = "-2147483648", hi = "2147483648", tmin = "int(0x80000000u)", tmax = "0x7fffffff";
        break;
      case Dtype::Kind::UInt32:
        lo = "0", hi = "4294967296", tmin = "0u", tmax = "0xffffffffu";
        break;
      case Dtype::Kind::Int64:
        lo = "-9223372036854775808", hi = "9223372036854775808",
        tmin = "int64_t(0x8000000000000000ul)", tmax = "int64_t(0x7ffffffffffffffful)";
        break;
      default:
        lo = "0", hi = "18446744073709551616", tmin = "0ul", tmax = "0xfffffffffffffffful";
        break;
    }
    std::string suffix = from == float64 ? ".0lf" : ".0";
    return "(isnan(" + x + ") ? " + ctype(to) + "(0) : " + x + " <= " + F + "(" + lo + suffix +
           ") ? " + tmin + " : " + x + " >= " + F + "(" + hi + suffix + ") ? " + tmax + " : " +
           ctype(to) + "(" + x + "))";
  }
  // integer -> integer: convert (GLSL truncates or extends by the source's signedness), wrap.
  return wrap(to, std::string(ctype(to)) + "(" + x + ")");
}

std::string GlslDialect::unary(const Value& val) {
  Dtype d = val.dtype;
  Dtype in = kernel().body[val.a].dtype;
  std::string a = name(val.a);
  if (val.unary == UnaryOp::LogicalNot) {
    std::string t = "!" + truth(in, a);
    if (d.is_bool()) return t;
    return std::string("(") + t + " ? " + ctype(d) + "(1) : " + ctype(d) + "(0))";
  }
  if (d.is_float()) {
    bool dbl = d == float64;
    auto fn = [&](const char* f32, const char* f64) {
      return std::string(dbl ? f64 : f32) + "(" + a + ")";
    };
    if (val.unary == UnaryOp::Sqrt && !dbl && f_.divide_in_double)
      return "float(sqrt(k_f2d(" + a + ")))";  // ShaderFeatures::divide_in_double
    if (std::string e = float_unary(val.unary, a); !e.empty()) return e;
    switch (val.unary) {
      case UnaryOp::Abs: return "abs(" + a + ")";
      case UnaryOp::Exp: return fn("exp", "k_exp_d");
      case UnaryOp::Log: return fn("log", "k_log_d");
      case UnaryOp::Rsqrt:  // correctly rounded where doubles exist (as the reference)
        if (dbl) return "(1.0lf / sqrt(" + a + "))";
        if (f_.float64) return "float(1.0lf / sqrt(k_f2d(" + a + ")))";
        return "(1.0 / sqrt(" + a + "))";
      case UnaryOp::Sin: return fn("sin", "k_sin_d");
      case UnaryOp::Cos: return fn("cos", "k_cos_d");
      case UnaryOp::Tanh: return fn("k_tanh_f", "k_tanh_d");
      case UnaryOp::Erf: return fn("k_erf_f", "k_erf_d");
      case UnaryOp::Sigmoid:
        return dbl ? "k_sigmoid_d(" + a + ")" : "(1.0 / (1.0 + exp(-" + a + ")))";
      default: break;
    }
  }
  if (val.unary == UnaryOp::BitwiseInvert)
    return d.is_bool() ? "(!" + a + ")" : wrap(d, "(~" + a + ")");
  if (d.is_bool()) return a;
  switch (val.unary) {
    case UnaryOp::Negative: return wrap(d, "(-" + a + ")");
    case UnaryOp::Abs:
      if (d.is_unsigned()) return a;
      return wrap(d, "(" + a + " < " + ctype(d) + "(0) ? -" + a + " : " + a + ")");
    default: return a;  // floor/ceil of an integer
  }
}

bool GlslDialect::is_const_two(int i) const {
  const Value& c = kernel().body[i];
  return c.kind == ValueKind::Constant && c.param < 0 &&
         (c.dtype.is_float() ? c.constant.f == 2.0 : c.constant.i == 2);
}

std::string GlslDialect::binary(const Value& val) {
  Dtype d = kernel().body[val.a].dtype;
  std::string a = name(val.a), b = name(val.b);
  const char* T = ctype(d);
  if (val.binary == BinaryOp::Equal || val.binary == BinaryOp::NotEqual) return compare(val, a, b);
  switch (val.binary) {
    case BinaryOp::LogicalAnd: return "(" + truth(d, a) + " && " + truth(d, b) + ")";
    case BinaryOp::LogicalOr: return "(" + truth(d, a) + " || " + truth(d, b) + ")";
    default: break;
  }
  if (d.is_bool()) {  // compare/combine bools as 0/1
    a = "int(" + a + ")", b = "int(" + b + ")";
    switch (val.binary) {
      case BinaryOp::Less: return "(" + a + " < " + b + ")";
      case BinaryOp::LessEqual: return "(" + a + " <= " + b + ")";
      case BinaryOp::Greater: return "(" + a + " > " + b + ")";
      case BinaryOp::GreaterEqual: return "(" + a + " >= " + b + ")";
      case BinaryOp::Maximum:
      case BinaryOp::Add:
      case BinaryOp::Power: return "(max(" + a + ", " + b + ") != 0)";
      case BinaryOp::Minimum:
      case BinaryOp::Multiply:
      case BinaryOp::BitwiseAnd: return "(min(" + a + ", " + b + ") != 0)";
      case BinaryOp::BitwiseOr: return "(max(" + a + ", " + b + ") != 0)";
      case BinaryOp::LeftShift: return "(" + a + " != 0)";  // 0 or 1 shifted within 8 bits
      case BinaryOp::RightShift: return "((" + a + " >> " + b + ") != 0)";
      default: return "((" + a + " - " + b + ") != 0)";
    }
  }
  if (std::string e = compare(val, a, b); !e.empty()) return e;
  if (d.is_float()) {
    if (val.binary == BinaryOp::Divide && d != float64 && f_.divide_in_double) {
      std::string dbl = "float(k_f2d(" + a + ") / k_f2d(" + b + "))";  // divide_in_double
      if (kernel().body[val.b].kind != ValueKind::Constant) return dbl;
      // A scalar divisor (the same at every point, so the branch does not diverge) that is a
      // power of two whose reciprocal is a normal float: a times that reciprocal, exact and
      // built from the bits, is a / b rounded once, without the double division (a gelu's
      // `/ 2` cost an H100 about a tenth of its bandwidth). Other divisors stay in double.
      std::string bits = "floatBitsToUint(" + b + ")", e = "((" + bits + " >> 23) & 0xffu)";
      return "(((" + bits + " & 0x7fffffu) == 0u && " + e + " - 1u < 253u) ? " + a +
             " * uintBitsToFloat((" + bits + " & 0x80000000u) | ((254u - " + e +
             ") << 23)) : " + dbl + ")";
    }
    if (std::string e = float_arith(val.binary, a, b); !e.empty()) return e;
    if (val.binary == BinaryOp::Power) {
      if (is_const_two(val.b)) return "(" + a + " * " + a + ")";
      return std::string(d == float64 ? "k_pow_d(" : "k_pow_f(") + a + ", " + b + ")";
    }
    if (val.binary == BinaryOp::FloorDivide || val.binary == BinaryOp::Remainder) {
      // In double where the device has it, rounded once (scalar_ops.h).
      bool wide = d != float64 && f_.float64;
      std::string x = wide ? "k_f2d(" + a + ")" : a, y = wide ? "k_f2d(" + b + ")" : b;
      std::string q = "floor(" + x + " / " + y + ")";
      std::string r =
          val.binary == BinaryOp::FloorDivide ? q : "(" + x + " - " + y + " * " + q + ")";
      return wide ? "float(" + r + ")" : r;
    }
  }
  std::string r;
  switch (val.binary) {
    case BinaryOp::Add: r = "(" + a + " + " + b + ")"; break;
    case BinaryOp::Subtract: r = "(" + a + " - " + b + ")"; break;
    case BinaryOp::Multiply: r = "(" + a + " * " + b + ")"; break;
    case BinaryOp::Divide:
      if (d.is_unsigned())
        r = "(" + b + " == " + T + "(0) ? " + T + "(0) : " + a + " / " + b + ")";
      else
        r = "(" + b + " == " + T + "(0) ? " + T + "(0) : " + b + " == " + T + "(-1) ? -" + a +
            " : " + a + " / " + b + ")";
      break;
    case BinaryOp::Power: r = "k_ipow(" + a + ", " + b + ")"; break;
    case BinaryOp::Maximum: r = "(" + b + " < " + a + " ? " + a + " : " + b + ")"; break;
    case BinaryOp::Minimum: r = "(" + a + " < " + b + " ? " + a + " : " + b + ")"; break;
    case BinaryOp::FloorDivide:
    case BinaryOp::Remainder: r = floor_div_rem(val.binary == BinaryOp::Remainder, d, a, b); break;
    case BinaryOp::BitwiseAnd: r = "(" + a + " & " + b + ")"; break;
    case BinaryOp::BitwiseOr: r = "(" + a + " | " + b + ")"; break;
    case BinaryOp::BitwiseXor: r = "(" + a + " ^ " + b + ")"; break;
    case BinaryOp::LeftShift:
    case BinaryOp::RightShift: {
      // scalar::int_shift: the count as unsigned (8-bit values are held sign- or zero-extended,
      // so a negative count is huge here too); counts of the width or more shift all out.
      bool wide = d.size() == 8;
      std::string out = "(" + std::string(wide ? "uint64_t(" : "uint(") + b +
                        ") >= " + std::to_string(d.size() * 8) + (wide ? "ul)" : "u)");
      std::string fill = std::string(T) + "(0)";
      if (val.binary == BinaryOp::RightShift && !d.is_unsigned())
        fill = "(" + a + " < " + T + "(0) ? " + T + "(-1) : " + T + "(0))";
      std::string op = val.binary == BinaryOp::LeftShift ? " << " : " >> ";
      r = "(" + out + " ? " + fill + " : " + a + op + b + ")";
      break;
    }
    default: r = a; break;
  }
  return wrap(d, r);
}

// scalar::int_floor_divide / int_remainder: the divisor is made 1 where it is 0 or -1 (a
// flattened branch must not divide by them), and those cases are chosen afterwards.
std::string GlslDialect::floor_div_rem(bool rem, Dtype d, const std::string& a,
                                       const std::string& b) const {
  std::string T = ctype(d), Z = T + "(0)", one = T + "(1)";
  if (d.is_unsigned()) {
    std::string safe = "(" + b + " == " + Z + " ? " + one + " : " + b + ")";
    return "(" + b + " == " + Z + " ? " + Z + " : " + a + (rem ? " % " : " / ") + safe + ")";
  }
  std::string m1 = T + "(-1)";
  std::string safe =
      "((" + b + " == " + Z + " || " + b + " == " + m1 + ") ? " + one + " : " + b + ")";
  // Truncated quotient and its remainder (GLSL's % leaves negative operands undefined).
  std::string q = "(" + a + " / " + safe + ")", m = "(" + a + " - " + q + " * " + safe + ")";
  std::string off =
      "(" + m + " != " + Z + " && ((" + m + " < " + Z + ") != (" + b + " < " + Z + ")))";
  if (rem)
    return "((" + b + " == " + Z + " || " + b + " == " + m1 + ") ? " + Z + " : " + off + " ? " + m +
           " + " + b + " : " + m + ")";
  return "(" + b + " == " + Z + " ? " + Z + " : " + b + " == " + m1 + " ? -" + a + " : " + off +
         " ? " + q + " - " + one + " : " + q + ")";
}

std::string GlslDialect::random(const Value& val) {
  std::string key = val.b >= 0       ? "uint64_t(" + name(val.b) + ")"
                    : val.param >= 0 ? "uint64_t(" + param_value(int64, val.param) + ")"
                                     : hex_u64(val.key);
  std::string c = "uint64_t(" + name(val.a) + ")";
  if (val.dist == RandomDist::Bits) return "k_bits(" + key + ", " + c + ")";
  Dtype d = val.dtype;
  int p = d == float64 ? 53 : d == float16 ? 11 : d == bfloat16 ? 8 : 24;
  auto unit_d = [&](const std::string& bits, int digits) {
    return "(double(" + bits + " >> " + std::to_string(64 - digits) + ") * " +
           (digits == 53 ? "1.1102230246251565e-16lf" : "5.9604644775390625e-8lf") + ")";
  };
  if (val.dist == RandomDist::Uniform) {
    if (d == float64) return unit_d("k_bits(" + key + ", " + c + ")", 53);
    return "k_unit_f(k_bits(" + key + ", " + c + "), " + std::to_string(p) + ")";
  }
  std::string b1 = "k_bits(" + key + ", 2ul * " + c + ")";
  std::string b2 = "k_bits(" + key + ", 2ul * " + c + " + 1ul)";
  if (f_.float64) {  // as the reference: uniforms exact, Box-Muller in double
    int digits = d == float64 ? 53 : 24;
    std::string r = "(sqrt(-2.0lf * k_log_d(1.0lf - " + unit_d(b1, digits) + ")) * k_cos_d(" +
                    "6.283185307179586476925286766559lf * " + unit_d(b2, digits) + "))";
    return d == float64 ? r : "float(" + r + ")";
  }
  return "(sqrt(-2.0 * log(1.0 - k_unit_f(" + b1 + ", 24))) * cos(6.2831853 * k_unit_f(" + b2 +
         ", 24)))";
}

// precise: the driver may not rewrite x - x as 0 or x * 0 as 0 (wrong for inf and NaN), nor
// contract a * b + c into an fma (Kiln rounds each op, scalar_ops.h).
std::string GlslDialect::define(Dtype d, const std::string& name, const std::string& e) {
  return (d.is_float() ? "precise " : "") + Dialect::define(d, name, e);
}

std::string GlslDialect::constant(int i) {
  const Value& val = kernel().body[i];
  return val.param >= 0 ? param_value(val.dtype, val.param) : literal(val.dtype, val.constant);
}

std::string GlslDialect::index(const Value& val) {
  if (!f_.int64) lacks("shaderInt64", "index values are int64");
  return std::string(ctype(val.dtype)) + "(" + address(val.map) + ")";
}

std::string GlslDialect::select(const Value& val) {
  return "(" + truth(dtype_of(val.a), name(val.a)) + " ? " + name(val.b) + " : " + name(val.c) +
         ")";
}

std::string GlslDialect::cast(const Value& val) {
  return convert(dtype_of(val.a), val.dtype, name(val.a));
}

// The vector index of step q in buffer b.
std::string GlslDialect::vector_index(int b) const {
  return "uint(" + std::to_string(kernel().buffers[b].map.offset.value / width) + " + q)";
}

std::string GlslDialect::texel_name(int b, int t) {
  return "T" + std::to_string(b) + "_" + std::to_string(t);
}

std::string GlslDialect::vector_begin() {
  std::ostringstream os;
  std::set<int> loaded;
  for (const Value& val : kernel().body)
    if (val.kind == ValueKind::Load && vec.count(val.buffer)) loaded.insert(val.buffer);
  for (int b : loaded) {
    if (!texel.count(b)) {
      os << "  " << vec_type(kernel().buffers[b].dtype) << " L" << b << " = b" << b << ".d["
         << vector_index(b) << "];\n";
      continue;
    }
    int per = width / 4;  // texels per step
    for (int t = 0; t < per; ++t)
      os << "  uvec4 " << texel_name(b, t) << " = texelFetch(b" << b << ", int(uint("
         << kernel().buffers[b].map.offset.value / 4 << ") + uint(q) * " << per << "u + " << t
         << "u));\n";
  }
  for (const Store& st : kernel().stores) {
    if (width == 8)
      os << "  uint O" << st.buffer << "[8];\n";
    else
      os << "  " << vec_type(kernel().buffers[st.buffer].dtype) << " O" << st.buffer << ";\n";
  }
  return os.str();
}

std::string GlslDialect::vector_end() {
  std::ostringstream os;
  for (const Store& st : kernel().stores) {
    std::string O = "O" + std::to_string(st.buffer);
    os << "  b" << st.buffer << ".d[" << vector_index(st.buffer) << "] = ";
    if (width == 8) {
      os << "u64vec4(";
      for (int j = 0; j < 4; ++j)
        os << (j ? ", " : "") << "(uint64_t(" << O << "[" << 2 * j + 1 << "]) << 32) | uint64_t("
           << O << "[" << 2 * j << "])";
      os << ");\n";
    } else {
      os << O << ";\n";
    }
  }
  return os.str();
}

// Element-wise 1-D kernels whose every buffer is walked with stride 1 (4-byte dtypes, offsets
// a multiple of the step) or 0 (inputs) read and write those buffers as vectors: each
// invocation does 4 points per step through vec4 accesses (the usual vectorised access on
// GPUs), or 8 through u64vec4 ones with ShaderFeatures::wide_access (lavapipe runs every
// storage-buffer access as a loop over its SIMD lanes, one iteration per lane and component,
// so fewer, wider components pay there).
void GlslDialect::find_vector_buffers() {
  width = f_.wide_access && f_.int64 ? 8 : 4;
  if (kernel().reduce || kernel().ndim() != 1 || !f_.vector_access) return;
  for (const Value& v : kernel().body)
    if (v.kind == ValueKind::Gather) return;  // rows at computed addresses: scalar access
  std::set<int> vec, tex;
  for (int b = 0; b < static_cast<int>(kernel().buffers.size()); ++b) {
    const KernelBuffer& kb = kernel().buffers[b];
    const Dim& st = kb.map.strides[0];
    if (st.is_runtime()) return;
    if (st.value == 1) {
      if (kb.dtype.size() != 4 || kb.dtype.is_bool() || kb.map.offset.is_runtime() ||
          kb.map.offset.value % width != 0)
        return;
      vec.insert(b);
      if (f_.texel_loads && !f_.by_address && !kb.output) tex.insert(b);
    } else if (st.value != 0 || kb.output) {
      return;
    }
  }
  this->vec = vec;
  texel = tex;
}

void GlslDialect::prepare() {
  check_features();
  find_vector_buffers();
}

const source::ShaderWords& GlslDialect::words() const {
  static const source::ShaderWords w{"void main() {",
                                     "IDX",
                                     "gl_LocalInvocationID.x",
                                     "gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z",
                                     "k_group()",
                                     "shared ",
                                     "barrier()",
                                     "gl_SubgroupInvocationID",
                                     "gl_SubgroupID",
                                     "gl_NumSubgroups",
                                     "gl_SubgroupSize",
                                     "subgroupAdd",
                                     "subgroupMul",
                                     "subgroupOr",
                                     "subgroupAnd",
                                     "subgroupShuffleXor"};
  return w;
}

}  // namespace kiln::vulkan
