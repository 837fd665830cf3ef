#include "backends/vulkan/glsl_codegen.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "backends/vulkan/glsl_prelude.h"
#include "graph/error.h"

namespace kiln::vulkan {

namespace {

constexpr int kLocalSize = 64;

// The GLSL type a value of dtype d is computed in (16-bit floats compute in float32, the 8-bit
// integers in 32 bits, wrapped after every op).
const char* ctype(Dtype d) {
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

// Bytes and 16-bit types are stored packed in uint words: loads shift, stores use atomics on
// the word (neighbouring elements belong to other invocations), so no 8/16-bit storage feature
// is needed.
int packed_bits(Dtype d) { return d.size() < 4 ? static_cast<int>(d.size()) * 8 : 0; }

const char* storage_type(Dtype d) { return packed_bits(d) ? "uint" : ctype(d); }

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

class Emitter {
 public:
  Emitter(const Kernel& k, const ShaderFeatures& f) : k_(k), f_(f) {}

  Shader run() {
    check_features();
    Shader sh;
    sh.local_size = kLocalSize;
    sh.per_group = k_.reduce.has_value();
    sh.nparams = k_.num_params();
    nparams_ = sh.nparams;
    find_vector_buffers();
    if (!vec_.empty()) sh.points_per_invocation = width_;
    std::ostringstream body;
    if (k_.reduce)
      emit_reduction(body);
    else
      emit_elementwise(body);
    std::ostringstream os;
    os << "#version 450\n";
    if (f_.int64) os << "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
    if (uses_subgroups_)
      os << "#extension GL_KHR_shader_subgroup_arithmetic : require\n"
         << "#extension GL_KHR_shader_subgroup_shuffle : require\n";
    if (f_.by_address)
      os << "#extension GL_EXT_buffer_reference : require\n"
         << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
    os << "layout(local_size_x = " << kLocalSize << ") in;\n";
    // 32-bit addressing: the host checks at launch that every extent product and buffer fits
    // (storage buffers are at most maxStorageBufferRange bytes); 64-bit index arithmetic costs
    // ~4x on lavapipe and more on GPUs.
    os << "#define IDX int\n";
    int nbuf = static_cast<int>(k_.buffers.size());
    int words = nparams_ + static_cast<int>(float_slots_.size()) + (f_.by_address ? nbuf : 0);
    // Push constants when they fit: the launch then binds nothing that changes per launch, so
    // its descriptor set can be cached (a params buffer would differ at every launch).
    if (static_cast<uint32_t>(std::max(words, 1)) * 8 <= f_.push_bytes) {
      sh.push_words = std::max(words, 1);
      os << "layout(push_constant, std430) uniform Params { uvec2 w[" << sh.push_words
         << "]; } prm;\n";
      sh.bindings = f_.by_address ? 0 : nbuf;
    } else {
      os << "layout(std430, set = 0, binding = " << (f_.by_address ? 0 : nbuf)
         << ") readonly buffer Params { uvec2 w[]; } prm;\n";
      sh.bindings = f_.by_address ? 1 : nbuf + 1;
    }
    if (f_.by_address) sh.address_slot = nparams_ + static_cast<int>(float_slots_.size());
    for (int b = 0; b < nbuf; ++b) {
      std::string elem =
          vec_.count(b) ? vec_type(k_.buffers[b].dtype) : storage_type(k_.buffers[b].dtype);
      if (f_.by_address)  // bN names the reference, so the body reads bN.d[i] either way
        os << "layout(buffer_reference, std430, buffer_reference_align = 16) buffer R" << b << " { "
           << elem << " d[]; };\n#define b" << b << " R" << b << "(prm.w[" << sh.address_slot + b
           << "])\n";
      else
        os << "layout(std430, set = 0, binding = " << b << ") buffer B" << b << " { " << elem
           << " d[]; } b" << b << ";\n";
    }
    os << glsl_prelude(f_.float64, f_.int64);
    os << "IDX k_param(int p) { return int(prm.w[p].x); }\n";
    os << "IDX k_group() { return (IDX(gl_WorkGroupID.z) * IDX(gl_NumWorkGroups.y) + "
          "IDX(gl_WorkGroupID.y)) * IDX(gl_NumWorkGroups.x) + IDX(gl_WorkGroupID.x); }\n";
    os << body.str();
    sh.glsl = os.str();
    sh.float_slots = float_slots_;
    return sh;
  }

 private:
  [[noreturn]] void lacks(const char* feature, const std::string& why) {
    throw_error("vulkan: kernel ", k_.name, " needs the device feature ", feature, " (", why,
                ") which ", f_.device,
                " does not offer; valid on this device: float32, float16, bfloat16, int32, "
                "uint32, int8, uint8 and bool without 64-bit values");
  }

  void check_features() {
    auto need = [&](Dtype d) {
      if (d == float64 && !f_.float64) lacks("shaderFloat64", "float64 values");
      if ((d == int64 || d == uint64) && !f_.int64) lacks("shaderInt64", "64-bit integer values");
    };
    for (const KernelBuffer& b : k_.buffers) need(b.dtype);
    for (const Value& v : k_.body) {
      need(v.dtype);
      if (v.kind == ValueKind::Random && !f_.int64)
        lacks("shaderInt64", "counter-based random bits are 64-bit");
    }
    if (k_.reduce && k_.reduce->op == ReduceOp::Argmax && !f_.int64)
      lacks("shaderInt64", "argmax positions are int64");
  }

  std::string dim(const Dim& d) {
    if (d.is_runtime()) return "k_param(" + std::to_string(d.param) + ")";
    if (d.value > INT32_MAX || d.value < INT32_MIN)
      throw_error("vulkan: kernel ", k_.name, " has an extent, stride or offset of ", d.value,
                  ", beyond the backend's 32-bit addressing (at most ", INT32_MAX, ")");
    return "IDX(" + std::to_string(d.value) + ")";
  }

  std::string address(const IndexMap& m) {
    std::string s = dim(m.offset);
    for (size_t i = 0; i < m.strides.size(); ++i)
      if (!(m.strides[i] == Dim::constant(0)))
        s += " + i" + std::to_string(i) + " * " + dim(m.strides[i]);
    return s;
  }

  // Sets the coordinates of axes [from, to) from the linear index `lin` (row-major).
  void decompose(std::ostream& os, int from, int to, const std::string& lin) {
    os << "  { IDX rem = " << lin << ";\n";
    for (int a = to - 1; a > from; --a) {
      std::string e = dim(k_.domain[a]);
      os << "    i" << a << " = rem % " << e << "; rem /= " << e << ";\n";
    }
    if (to > from) os << "    i" << from << " = rem;\n";  // below its extent: no division
    os << "  }\n";
  }

  std::string product(int from, int to) {
    std::string s = "IDX(1)";
    for (int a = from; a < to; ++a) s += " * " + dim(k_.domain[a]);
    return s;
  }

  std::string v(int i) { return "v" + std::to_string(i); }

  const char* vec_type(Dtype d) const {
    if (width_ == 8) return "u64vec4";
    return d == float32 ? "vec4" : d == int32 ? "ivec4" : "uvec4";
  }

  // With 8-point steps a u64vec4 holds 8 elements as 32-bit halves: their value from bits...
  static std::string from_bits(Dtype d, const std::string& bits) {
    if (d == float32) return "uintBitsToFloat(" + bits + ")";
    if (d == int32) return "int(" + bits + ")";
    return bits;
  }
  // ...and their bits from a value.
  static std::string to_bits(Dtype d, const std::string& x) {
    if (d == float32) return "floatBitsToUint(" + x + ")";
    if (d == int32) return "uint(" + x + ")";
    return x;
  }

  // Element-wise 1-D kernels whose every buffer is walked with stride 1 (4-byte dtypes, offsets
  // a multiple of the step) or 0 (inputs) read and write those buffers as vectors: each
  // invocation does 4 points per step through vec4 accesses (the usual vectorised access on
  // GPUs), or 8 through u64vec4 ones with ShaderFeatures::wide_access (lavapipe runs every
  // storage-buffer access as a loop over its SIMD lanes, one iteration per lane and component,
  // so fewer, wider components pay there).
  void find_vector_buffers() {
    width_ = f_.wide_access && f_.int64 ? 8 : 4;
    if (k_.reduce || k_.ndim() != 1) return;
    std::set<int> vec;
    for (int b = 0; b < static_cast<int>(k_.buffers.size()); ++b) {
      const KernelBuffer& kb = k_.buffers[b];
      const Dim& st = kb.map.strides[0];
      if (st.is_runtime()) return;
      if (st.value == 1) {
        if (kb.dtype.size() != 4 || kb.dtype.is_bool() || kb.map.offset.is_runtime() ||
            kb.map.offset.value % width_ != 0)
          return;
        vec.insert(b);
      } else if (st.value != 0 || kb.output) {
        return;
      }
    }
    vec_ = vec;
  }

  static std::string truth(Dtype d, const std::string& x) {
    if (d.is_bool()) return x;
    if (d.is_float()) return "(" + x + " != " + ctype(d) + "(0))";
    return "(" + x + " != " + ctype(d) + "(0))";
  }

  static std::string wrap(Dtype d, const std::string& x) {
    if (d == int8) return "bitfieldExtract(" + x + ", 0, 8)";
    if (d == uint8) return "((" + x + ") & 0xffu)";
    return x;
  }

  std::string literal(Dtype d, const Scalar& s) {
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

  std::string param_value(Dtype d, int p) {
    std::string w = "prm.w[" + std::to_string(p) + "]";
    if (d == float64) return "packDouble2x32(" + w + ")";
    if (d.is_float()) {
      int slot = nparams_ + static_cast<int>(float_slots_.size());
      float_slots_.push_back({p, slot});
      return "uintBitsToFloat(prm.w[" + std::to_string(slot) + "].x)";
    }
    if (d.is_bool()) return "((" + w + ".x | " + w + ".y) != 0u)";
    if (d == int64) return "((int64_t(" + w + ".y) << 32) | int64_t(" + w + ".x))";
    if (d == uint64) return "((uint64_t(" + w + ".y) << 32) | uint64_t(" + w + ".x))";
    if (d.is_unsigned()) return w + ".x";
    return "int(" + w + ".x)";
  }

  std::string load(int b) {
    Dtype d = k_.buffers[b].dtype;
    std::string a = "(" + address(k_.buffers[b].map) + ")";
    std::string arr = "b" + std::to_string(b) + ".d";
    if (vec_.count(b)) {
      std::string L = "L" + std::to_string(b);
      if (width_ == 8) {
        if (lane_ >= 0)
          return from_bits(d, "uint(" + L + "[" + std::to_string(lane_ / 2) + "]" +
                                  (lane_ % 2 ? " >> 32" : "") + ")");
        return from_bits(d, "uint(" + arr + "[uint(" + a + " >> 3)][uint((" + a +
                                " >> 1) & IDX(3))] >> (uint(" + a + " & IDX(1)) * 32u))");
      }
      if (lane_ >= 0) return L + "[" + std::to_string(lane_) + "]";
      return arr + "[uint(" + a + " >> 2)][uint(" + a + " & IDX(3))]";
    }
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

  void store(std::ostream& os, const Store& s) {
    Dtype d = k_.buffers[s.buffer].dtype;
    std::string a = "(" + address(k_.buffers[s.buffer].map) + ")";
    std::string arr = "b" + std::to_string(s.buffer) + ".d";
    std::string x = v(s.value);
    if (vec_.count(s.buffer) && width_ == 8) {
      if (lane_ >= 0) {
        os << "  O" << s.buffer << "[" << lane_ << "] = " << to_bits(d, x) << ";\n";
      } else {  // the tail: this invocation owns every element of the words it touches
        std::string w = arr + "[uint(" + a + " >> 3)][uint((" + a + " >> 1) & IDX(3))]";
        os << "  { uint sh = uint(" << a << " & IDX(1)) * 32u;\n"
           << "    " << w << " = (" << w << " & ~(0xfffffffful << sh)) | (uint64_t("
           << to_bits(d, x) << ") << sh); }\n";
      }
      return;
    }
    if (vec_.count(s.buffer)) {
      if (lane_ >= 0)
        os << "  O" << s.buffer << "[" << lane_ << "] = " << x << ";\n";
      else
        os << "  " << arr << "[uint(" << a << " >> 2)][uint(" << a << " & IDX(3))] = " << x
           << ";\n";
      return;
    }
    int bits = packed_bits(d);
    if (!bits) {
      os << "  " << arr << "[uint(" << a << ")] = " << x << ";\n";
      return;
    }
    std::string val;
    switch (d.kind) {
      case Dtype::Kind::Int8: val = "(uint(" + x + ") & 0xffu)"; break;
      case Dtype::Kind::UInt8: val = "(" + x + " & 0xffu)"; break;
      case Dtype::Kind::Bool: val = "(" + x + " ? 1u : 0u)"; break;
      case Dtype::Kind::Float16: val = "k_f2h(" + x + ")"; break;
      default: val = "k_f2bf(" + x + ")"; break;
    }
    std::string word = bits == 8 ? "uint(" + a + " >> 2)" : "uint(" + a + " >> 1)";
    std::string shift =
        bits == 8 ? "(uint(" + a + " & IDX(3)) * 8u)" : "(uint(" + a + " & IDX(1)) * 16u)";
    std::string mask = bits == 8 ? "0xffu" : "0xffffu";
    os << "  { uint w = " << word << "; uint sh = " << shift << ";\n"
       << "    atomicAnd(" << arr << "[w], ~(" << mask << " << sh));\n"
       << "    atomicOr(" << arr << "[w], " << val << " << sh); }\n";
  }

  std::string cast(Dtype from, Dtype to, const std::string& x) {
    if (from == to) return x;
    if (to.is_float()) {
      std::string f;
      if (from.is_bool())
        f = std::string("(") + x + " ? " + ctype(to) + "(1) : " + ctype(to) + "(0))";
      else if (to == float64)
        f = "double(" + x + ")";
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

  std::string unary(const Value& val) {
    Dtype d = val.dtype;
    Dtype in = k_.body[val.a].dtype;
    std::string a = v(val.a);
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
      switch (val.unary) {
        case UnaryOp::Negative: return "(-" + a + ")";
        case UnaryOp::Abs: return "abs(" + a + ")";
        case UnaryOp::Exp: return fn("exp", "k_exp_d");
        case UnaryOp::Log: return fn("log", "k_log_d");
        case UnaryOp::Sqrt: return "sqrt(" + a + ")";
        case UnaryOp::Rsqrt:  // correctly rounded where doubles exist (as the reference)
          if (dbl) return "(1.0lf / sqrt(" + a + "))";
          if (f_.float64) return "float(1.0lf / sqrt(double(" + a + ")))";
          return "(1.0 / sqrt(" + a + "))";
        case UnaryOp::Sin: return fn("sin", "k_sin_d");
        case UnaryOp::Cos: return fn("cos", "k_cos_d");
        case UnaryOp::Tanh: return fn("k_tanh_f", "k_tanh_d");
        case UnaryOp::Erf: return fn("k_erf_f", "k_erf_d");
        case UnaryOp::Sigmoid:
          return dbl ? "k_sigmoid_d(" + a + ")" : "(1.0 / (1.0 + exp(-" + a + ")))";
        case UnaryOp::Floor: return "floor(" + a + ")";
        case UnaryOp::Ceil: return "ceil(" + a + ")";
        default: break;
      }
    }
    if (d.is_bool()) return a;
    switch (val.unary) {
      case UnaryOp::Negative: return wrap(d, "(-" + a + ")");
      case UnaryOp::Abs:
        if (d.is_unsigned()) return a;
        return wrap(d, "(" + a + " < " + ctype(d) + "(0) ? -" + a + " : " + a + ")");
      default: return a;  // floor/ceil of an integer
    }
  }

  bool is_const_two(int i) const {
    const Value& c = k_.body[i];
    return c.kind == ValueKind::Constant && c.param < 0 &&
           (c.dtype.is_float() ? c.constant.f == 2.0 : c.constant.i == 2);
  }

  std::string binary(const Value& val) {
    Dtype d = k_.body[val.a].dtype;
    std::string a = v(val.a), b = v(val.b);
    const char* T = ctype(d);
    switch (val.binary) {
      case BinaryOp::Equal: return "(" + a + " == " + b + ")";
      case BinaryOp::NotEqual: return "(" + a + " != " + b + ")";
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
        case BinaryOp::Multiply: return "(min(" + a + ", " + b + ") != 0)";
        default: return "((" + a + " - " + b + ") != 0)";
      }
    }
    switch (val.binary) {
      case BinaryOp::Less: return "(" + a + " < " + b + ")";
      case BinaryOp::LessEqual: return "(" + a + " <= " + b + ")";
      case BinaryOp::Greater: return "(" + a + " > " + b + ")";
      case BinaryOp::GreaterEqual: return "(" + a + " >= " + b + ")";
      default: break;
    }
    if (d.is_float()) {
      switch (val.binary) {
        case BinaryOp::Add: return "(" + a + " + " + b + ")";
        case BinaryOp::Subtract: return "(" + a + " - " + b + ")";
        case BinaryOp::Multiply: return "(" + a + " * " + b + ")";
        case BinaryOp::Divide: return "(" + a + " / " + b + ")";
        case BinaryOp::Power:
          if (is_const_two(val.b)) return "(" + a + " * " + a + ")";
          return std::string(d == float64 ? "k_pow_d(" : "k_pow_f(") + a + ", " + b + ")";
        case BinaryOp::Maximum:
          return "((isnan(" + a + ") || " + a + " > " + b + ") ? " + a + " : " + b + ")";
        case BinaryOp::Minimum:
          return "((isnan(" + a + ") || " + a + " < " + b + ") ? " + a + " : " + b + ")";
        default: break;
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
      default: r = a; break;
    }
    return wrap(d, r);
  }

  std::string random(const Value& val) {
    std::string key =
        val.param >= 0 ? "uint64_t(" + param_value(int64, val.param) + ")" : hex_u64(val.key);
    std::string c = "uint64_t(" + v(val.a) + ")";
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

  void emit_value(std::ostream& os, int i) {
    const Value& val = k_.body[i];
    std::string e;
    switch (val.kind) {
      case ValueKind::Load: e = load(val.buffer); break;
      case ValueKind::Constant: return;  // emitted at the top (used by prologue and epilogue)
      case ValueKind::Index:
        if (!f_.int64) lacks("shaderInt64", "index values are int64");
        e = std::string(ctype(val.dtype)) + "(" + address(val.map) + ")";
        break;
      case ValueKind::Unary: e = unary(val); break;
      case ValueKind::Binary: e = binary(val); break;
      case ValueKind::Select:
        e = "(" + truth(k_.body[val.a].dtype, v(val.a)) + " ? " + v(val.b) + " : " + v(val.c) + ")";
        break;
      case ValueKind::Cast: e = cast(k_.body[val.a].dtype, val.dtype, v(val.a)); break;
      case ValueKind::Random: e = random(val); break;
      case ValueKind::Reduce: return;
    }
    // precise: the driver may not rewrite x - x as 0 or x * 0 as 0 (wrong for inf and NaN), nor
    // contract a * b + c into an fma (Kiln rounds each op, scalar_ops.h).
    const char* exact = val.dtype.is_float() ? "precise " : "";
    os << "  " << exact << ctype(val.dtype) << " " << v(i) << " = " << e << ";\n";
  }

  void emit_constants(std::ostream& os) {
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) {
      const Value& val = k_.body[i];
      if (val.kind != ValueKind::Constant) continue;
      std::string e =
          val.param >= 0 ? param_value(val.dtype, val.param) : literal(val.dtype, val.constant);
      os << "  " << ctype(val.dtype) << " " << v(i) << " = " << e << ";\n";
    }
  }

  void declare_coords(std::ostream& os) {
    os << "  IDX";
    for (int a = 0; a < k_.ndim(); ++a) os << (a ? ", " : " ") << "i" << a << " = IDX(0)";
    if (k_.ndim() == 0) os << " i_none = IDX(0)";
    os << ";\n";
  }

  void emit_elementwise(std::ostream& os) {
    if (!vec_.empty()) return emit_elementwise_vec4(os);
    // A grid-stride loop: the host may launch fewer groups than points (on a CPU device each
    // workgroup costs a task switch, so it launches a few per core).
    os << "void main() {\n"
       << "  IDX npoints = " << product(0, k_.ndim()) << ";\n"
       << "  IDX stride = IDX(gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z) * IDX("
       << kLocalSize << ");\n";
    declare_coords(os);
    emit_constants(os);
    os << "  for (IDX gid = k_group() * IDX(" << kLocalSize
       << ") + IDX(gl_LocalInvocationID.x); gid < npoints; gid += stride) {\n";
    decompose(os, 0, k_.ndim(), "gid");
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) emit_value(os, i);
    for (const Store& s : k_.stores) store(os, s);
    os << "  }\n}\n";
  }

  void emit_elementwise_vec4(std::ostream& os) {
    const std::string W = std::to_string(width_);
    os << "void main() {\n"
       << "  IDX npoints = " << dim(k_.domain[0]) << ";\n"
       << "  IDX stride = IDX(gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z) * IDX("
       << kLocalSize << ");\n";
    declare_coords(os);
    emit_constants(os);
    os << "  for (IDX q = k_group() * IDX(" << kLocalSize
       << ") + IDX(gl_LocalInvocationID.x); q * IDX(" << W << ") < npoints; q += stride) {\n"
       << "  IDX base = q * IDX(" << W << ");\n"
       << "  if (base + IDX(" << W << ") <= npoints) {\n";
    std::set<int> loaded;
    for (const Value& val : k_.body)
      if (val.kind == ValueKind::Load && vec_.count(val.buffer)) loaded.insert(val.buffer);
    auto step = [&](int b) {  // the vector index of step q in buffer b
      return "uint(" + std::to_string(k_.buffers[b].map.offset.value / width_) + " + q)";
    };
    for (int b : loaded)
      os << "  " << vec_type(k_.buffers[b].dtype) << " L" << b << " = b" << b << ".d[" << step(b)
         << "];\n";
    for (const Store& st : k_.stores) {
      if (width_ == 8)
        os << "  uint O" << st.buffer << "[8];\n";
      else
        os << "  " << vec_type(k_.buffers[st.buffer].dtype) << " O" << st.buffer << ";\n";
    }
    for (lane_ = 0; lane_ < width_; ++lane_) {
      os << "  {\n  i0 = base + IDX(" << lane_ << ");\n";
      for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) emit_value(os, i);
      for (const Store& st : k_.stores) store(os, st);
      os << "  }\n";
    }
    lane_ = -1;
    for (const Store& st : k_.stores) {
      std::string O = "O" + std::to_string(st.buffer);
      os << "  b" << st.buffer << ".d[" << step(st.buffer) << "] = ";
      if (width_ == 8) {
        os << "u64vec4(";
        for (int j = 0; j < 4; ++j)
          os << (j ? ", " : "") << "(uint64_t(" << O << "[" << 2 * j + 1 << "]) << 32) | uint64_t("
             << O << "[" << 2 * j << "])";
        os << ");\n";
      } else {
        os << O << ";\n";
      }
    }
    os << "  } else {\n"
       << "  for (i0 = base; i0 < npoints; ++i0) {\n";
    for (int i = 0; i < static_cast<int>(k_.body.size()); ++i) emit_value(os, i);
    for (const Store& st : k_.stores) store(os, st);
    os << "  }\n  }\n  }\n}\n";
  }

  // acc = acc (op) xv for sums and products (bool: or/and; 8-bit integers wrapped).
  void combine_into(std::ostream& o, ReduceOp op, Dtype acc_d, const std::string& acc,
                    const std::string& xv) {
    if (op == ReduceOp::Sum) {
      if (acc_d.is_bool())
        o << acc << " = " << acc << " || " << xv << ";\n";
      else
        o << acc << " = " << wrap(acc_d, acc + " + " + xv) << ";\n";
    } else {
      if (acc_d.is_bool())
        o << acc << " = " << acc << " && " << xv << ";\n";
      else
        o << acc << " = " << wrap(acc_d, acc + " * " + xv) << ";\n";
    }
  }

  // Combines acc/has/best across the subgroup (see emit_reduction).
  void subgroup_stage(std::ostream& os, ReduceOp op, Dtype acc_d) {
    if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      bool sum = op == ReduceOp::Sum;
      if (acc_d.is_bool())
        os << "  acc = " << (sum ? "subgroupOr" : "subgroupAnd") << "(uint(acc)) != 0u;\n";
      else
        os << "  acc = " << wrap(acc_d, std::string(sum ? "subgroupAdd" : "subgroupMul") + "(acc)")
           << ";\n";
      return;  // `has` only matters to max/min/argmax
    }
    std::string shuffled =
        acc_d.is_bool() ? "(subgroupShuffleXor(uint(acc), o) != 0u)" : "subgroupShuffleXor(acc, o)";
    os << "  for (uint o = 1u; o < gl_SubgroupSize; o <<= 1) {\n"
       << "    " << ctype(acc_d) << " ov = " << shuffled << ";\n"
       << "    bool oh = subgroupShuffleXor(uint(has), o) != 0u;\n"
       << "    IDX op = subgroupShuffleXor(best, o);\n"
       << "    if (oh && (!has || k_better(ov, op, acc, best))) { acc = ov; best = op; has = true; "
          "}\n"
       << "  }\n";
  }

  void emit_reduction(std::ostream& os) {
    const Reduction& red = *k_.reduce;
    const Value& rv = k_.body[red.value];
    Dtype in = k_.body[rv.a].dtype;
    ReduceOp op = red.op;
    bool minmax = op == ReduceOp::Max || op == ReduceOp::Min || op == ReduceOp::Argmax;
    // Sums and products accumulate in the result's compute type (float ones in double where the
    // device has it, as the reference does: a float32 product of 1000 values overflows where
    // the double one does not); max/min/argmax in the input's type.
    Dtype acc_d = minmax ? in : rv.dtype;
    if (!minmax && acc_d.is_float() && f_.float64) acc_d = float64;
    std::string A = ctype(acc_d);
    int kept = k_.kept_axes(), n = k_.ndim();
    os << "shared " << A << " s_v[" << kLocalSize << "];\n"
       << "shared bool s_h[" << kLocalSize << "];\n"
       << "shared IDX s_p[" << kLocalSize << "];\n";
    // better(x, px, acc, pacc): x replaces the accumulator (the reference's rule: the first
    // maximum wins, NaN counts as the maximum).
    std::string cmp = op == ReduceOp::Min ? "<" : ">";
    os << "bool k_better(" << A << " x, IDX px, " << A << " a, IDX pa) {\n";
    if (acc_d.is_float())
      os << "  if (isnan(a)) return isnan(x) && px < pa;\n"
         << "  if (isnan(x)) return true;\n";
    if (acc_d.is_bool())
      os << "  int xi = int(x), ai = int(a);\n  return xi " << cmp
         << " ai || (xi == ai && px < pa);\n";
    else
      os << "  return x " << cmp << " a || (x == a && px < pa);\n";
    os << "}\n";
    // Each workgroup reduces kept points gid, gid + groups, ... (a uniform loop: every
    // invocation of the group reaches the same barriers).
    os << "void main() {\n"
       << "  uint lid = gl_LocalInvocationID.x;\n"
       << "  IDX nkept = " << product(0, kept) << ";\n"
       << "  IDX groups = IDX(gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z);\n";
    declare_coords(os);
    emit_constants(os);
    os << "  for (IDX gid = k_group(); gid < nkept; gid += groups) {\n";
    decompose(os, 0, kept, "gid");
    std::string init = op == ReduceOp::Prod ? A + "(1)" : A + "(0)";
    if (acc_d.is_bool()) init = op == ReduceOp::Prod ? "true" : "false";
    os << "  " << A << " acc = " << init << ";\n  bool has = false;\n  IDX best = IDX(0);\n"
       << "  IDX nred = " << product(kept, n) << ";\n"
       << "  for (IDX r = IDX(lid); r < nred; r += IDX(" << kLocalSize << ")) {\n";
    decompose(os, kept, n, "r");
    for (int i = 0; i < red.value; ++i) emit_value(os, i);
    std::string x = v(rv.a);
    if (!minmax) x = std::string(A) + "(" + x + ")";
    os << "  " << A << " x = " << x << ";\n";
    auto combine = [&](std::ostream& o, const std::string& acc, const std::string& xv) {
      combine_into(o, op, acc_d, acc, xv);
    };
    if (minmax) {
      os << "  if (!has || k_better(x, r, acc, best)) { acc = x; best = r; }\n  has = true;\n";
    } else {
      os << "  ";
      combine(os, "acc", "x");
    }
    os << "  }\n";
    // Subgroup operations where the device has them (not for 64-bit integers, whose subgroup
    // forms need shaderSubgroupExtendedTypes): sums and products through subgroupAdd/Mul (bool
    // ones through Or/And), max/min/argmax through a butterfly of subgroupShuffleXor choosing
    // with k_better (a total order, so every lane ends with the same, unique best); then one
    // partial per subgroup in shared memory, combined in order by invocation 0. Otherwise a
    // shared-memory tree over all 64 invocations.
    if (f_.subgroups && acc_d != int64 && acc_d != uint64) {
      uses_subgroups_ = true;
      subgroup_stage(os, op, acc_d);
      os << "  if (gl_SubgroupInvocationID == 0u) {\n"
         << "    s_v[gl_SubgroupID] = acc; s_h[gl_SubgroupID] = has; s_p[gl_SubgroupID] = best;\n"
         << "  }\n  barrier();\n  if (lid == 0u) {\n"
         << "  for (uint s = 1u; s < gl_NumSubgroups; ++s) {\n";
      if (minmax) {
        os << "    if (s_h[s] && (!s_h[0] || k_better(s_v[s], s_p[s], s_v[0], s_p[0]))) {\n"
           << "      s_v[0] = s_v[s]; s_p[0] = s_p[s]; s_h[0] = true;\n    }\n";
      } else {
        os << "    ";
        combine(os, "s_v[0]", "s_v[s]");
      }
      os << "  }\n";
    } else {
      os << "  s_v[lid] = acc; s_h[lid] = has; s_p[lid] = best;\n  barrier();\n"
         << "  for (uint s = " << kLocalSize / 2 << "u; s > 0u; s >>= 1) {\n"
         << "    if (lid < s) {\n";
      if (minmax) {
        os << "      if (s_h[lid + s] && (!s_h[lid] || k_better(s_v[lid + s], s_p[lid + s], "
              "s_v[lid], s_p[lid]))) {\n"
           << "        s_v[lid] = s_v[lid + s]; s_p[lid] = s_p[lid + s]; s_h[lid] = true;\n"
           << "      }\n";
      } else {
        os << "      ";
        combine(os, "s_v[lid]", "s_v[lid + s]");
      }
      os << "    }\n    barrier();\n  }\n"
         << "  if (lid == 0u) {\n";
    }
    for (int a = kept; a < n; ++a) os << "  i" << a << " = IDX(0);\n";
    std::string result;
    if (op == ReduceOp::Argmax)
      result = std::string(ctype(rv.dtype)) + "(s_p[0])";
    else if (minmax)
      result = "(s_h[0] ? s_v[0] : " + init + ")";
    else
      result = "s_v[0]";
    os << "  " << ctype(rv.dtype) << " " << v(red.value) << " = " << ctype(rv.dtype) << "("
       << result << ");\n";
    for (int i = red.value + 1; i < static_cast<int>(k_.body.size()); ++i) emit_value(os, i);
    for (const Store& s : k_.stores) store(os, s);
    // The next point's partials reuse the shared arrays once every invocation is past here.
    os << "  }\n  barrier();\n  }\n}\n";
  }

  const Kernel& k_;
  const ShaderFeatures& f_;
  int nparams_ = 0;
  std::set<int> vec_;  // buffers accessed as 4-vectors
  bool uses_subgroups_ = false;
  int width_ = 4;  // points per vector step: 4 (vec4) or 8 (u64vec4)
  int lane_ = -1;  // >= 0: emitting lane lane_ of a vector step
  std::vector<FloatSlot> float_slots_;
};

}  // namespace

Shader generate_glsl(const Kernel& k, const ShaderFeatures& f) { return Emitter(k, f).run(); }

}  // namespace kiln::vulkan
