#include "backends/vulkan/scan_shader.h"

#include <sstream>

#include "backends/native.h"
#include "backends/vulkan/float_controls.h"
#include "backends/vulkan/glsl_prelude.h"
#include "graph/error.h"

namespace kiln::vulkan {

namespace {

// The combine and identity of every op: integers wrap (SPIR-V's arithmetic is modular), floats
// keep NaN in max/min as the reference's sequential loop does (the first NaN wins; equal values:
// the later one), and logaddexp is m + log1p(exp(lo - m)) with log1p written out (GLSL has none).
const char* kOps = R"(
A combine(A a, A b, uint op) {
  if (op == 0u) return a + b;
  if (op == 1u) return a * b;
#if IS_FLOAT
  if (op == 2u) return isnan(a) || a > b ? a : b;
  if (op == 3u) return isnan(a) || a < b ? a : b;
  if (isnan(a) || isnan(b)) return a + b;
  A m = a > b ? a : b, lo = a > b ? b : a;
  if (isinf(m)) return m;
  A x = EXP(lo - m), u = A(1) + x;
  return u == A(1) ? m + x : m + LOG(u) * (x / (u - A(1)));
#else
  if (op == 2u) return a > b ? a : b;
  return a < b ? a : b;
#endif
}
A identity(uint op) {
  if (op == 0u) return A(0);
  if (op == 1u) return A(1);
  if (op == 2u) return LOWEST;
  if (op == 3u) return HIGHEST;
  return NEG_INF;
}
)";

// One workgroup per tile of a row (see scan_shader.h and backends/opencl/scan.cpp's kernel).
const char* kMain = R"(
shared A tile[LANES * RUN];
shared A sums[LANES];
void main() {
  uint g = gl_WorkGroupID.y * pc.gx + gl_WorkGroupID.x;
  if (g >= pc.groups) return;  // the whole workgroup: the 2-D grid's tail
  uint lid = gl_LocalInvocationID.x, r = g / pc.tiles, t = g - r * pc.tiles;
  uint o = r / pc.inner, q = r - o * pc.inner, first = t * LANES * RUN;
  bool reverse = (pc.flags & 1u) != 0u;
  A id = identity(OP);
  for (uint j = 0u; j < RUN; ++j) {
    uint e = j * LANES + lid, k = first + e;
    tile[e] = k < pc.n ? load_at((o * pc.n + (reverse ? pc.n - 1u - k : k)) * pc.inner + q) : id;
  }
  barrier();
  A acc = tile[lid * RUN];
  for (uint j = 1u; j < RUN; ++j) acc = combine(acc, tile[lid * RUN + j], OP);
  sums[lid] = acc;
  barrier();
  for (uint off = 1u; off < LANES; off <<= 1) {
    A v = lid >= off ? combine(sums[lid - off], sums[lid], OP) : sums[lid];
    barrier();
    sums[lid] = v;
    barrier();
  }
  if ((pc.flags & 4u) != 0u) {
    if (lid == LANES - 1u) aux_store(g, sums[LANES - 1u]);
    return;
  }
  A p = (pc.flags & 8u) != 0u ? aux_load(g) : id;
  if (lid > 0u) p = combine(p, sums[lid - 1u], OP);
  for (uint j = 0u; j < RUN; ++j) {
    uint e = lid * RUN + j;
    A x = tile[e];
    if ((pc.flags & 2u) != 0u) {
      p = combine(p, x, OP);
      tile[e] = p;
    } else {
      tile[e] = p;
      p = combine(p, x, OP);
    }
  }
  barrier();
  for (uint j = 0u; j < RUN; ++j) {
    uint e = j * LANES + lid, k = first + e;
    if (k < pc.n) store_at((o * pc.n + (reverse ? pc.n - 1u - k : k)) * pc.inner + q, tile[e]);
  }
}
)";

// The CPU device's form (lavapipe): no shared memory and no barriers; invocation g scans chunk
// g % tiles of row g / tiles sequentially (pc.tiles counts chunks here, pc.groups invocations).
const char* kChunkMain = R"(
void main() {
  uint g = (gl_WorkGroupID.y * pc.gx + gl_WorkGroupID.x) * LANES + gl_LocalInvocationID.x;
  if (g >= pc.groups) return;
  uint r = g / pc.tiles, c = g - r * pc.tiles, o = r / pc.inner, q = r - o * pc.inner;
  uint first = c * pc.chunk, end = min(pc.n, first + pc.chunk);
  bool reverse = (pc.flags & 1u) != 0u;
  A p = (pc.flags & 8u) != 0u ? aux_load(g) : identity(OP);
  if ((pc.flags & 4u) != 0u) {
    for (uint k = first; k < end; ++k)
      p = combine(p, load_at((o * pc.n + (reverse ? pc.n - 1u - k : k)) * pc.inner + q), OP);
    aux_store(g, p);
    return;
  }
  bool inclusive = (pc.flags & 2u) != 0u;
  for (uint k = first; k < end; ++k) {
    uint at = (o * pc.n + (reverse ? pc.n - 1u - k : k)) * pc.inner + q;
    A x = load_at(at), v = p;
    p = combine(p, x, OP);
    store_at(at, inclusive ? p : v);
  }
}
)";

std::string acc_type(Dtype d) {
  if (d == float64) return "double";
  if (d.is_float()) return "float";
  if (d == int64) return "int64_t";
  if (d == uint64) return "uint64_t";
  if (d == int8 || d == int32) return "int";
  return "uint";
}

// A word (uint or uvec2) as an accumulator and back, for dtypes of 4 or 8 bytes (and the
// accumulators of the others, which are 4-byte).
std::string from_word(const std::string& acc, const std::string& w) {
  if (acc == "double") return "packDouble2x32(" + w + ")";
  if (acc == "int64_t") return "int64_t(packUint2x32(" + w + "))";
  if (acc == "uint64_t") return "packUint2x32(" + w + ")";
  if (acc == "float") return "uintBitsToFloat(" + w + ")";
  if (acc == "int") return "int(" + w + ")";
  return w;
}
std::string to_word(const std::string& acc, const std::string& v) {
  if (acc == "double") return "unpackDouble2x32(" + v + ")";
  if (acc == "int64_t" || acc == "uint64_t") return "unpackUint2x32(uint64_t(" + v + "))";
  if (acc == "float") return "floatBitsToUint(" + v + ")";
  return "uint(" + v + ")";
}

std::string infinity(Dtype d, bool negative) {
  if (d == float64)
    return std::string("packDouble2x32(uvec2(0u, ") + (negative ? "0xfff00000u" : "0x7ff00000u") +
           "))";
  return std::string("uintBitsToFloat(") + (negative ? "0xff800000u" : "0x7f800000u") + ")";
}

std::string literal(Dtype d, scalar::Val v) {
  if (d.is_float()) return infinity(d, v.f < 0);
  if (d == int64) return "int64_t(" + std::to_string(static_cast<uint64_t>(v.i)) + "ul)";
  if (d == uint64) return std::to_string(static_cast<uint64_t>(v.i)) + "ul";
  if (d == int8 || d == int32) return "int(" + std::to_string(static_cast<uint32_t>(v.i)) + "u)";
  return std::to_string(static_cast<uint32_t>(v.i)) + "u";
}

// load_at / store_at of element i in src / dst, and aux_load / aux_store of accumulator i.
std::string accessors(Dtype d, bool acc_stage) {
  std::string acc = acc_type(d);
  std::string aw = scan_accumulator_bytes(d) == 8 ? "uvec2" : "uint";
  std::ostringstream os;
  os << "A aux_load(uint i) { return " << from_word(acc, "aux.d[i]") << "; }\n"
     << "void aux_store(uint i, A v) { aux.d[i] = " << to_word(acc, "v") << "; }\n";
  if (acc_stage || d.size() >= 4) {
    os << "A load_at(uint i) { return " << from_word(acc, "src.d[i]") << "; }\n"
       << "void store_at(uint i, A v) { dst.d[i] = " << to_word(acc, "v") << "; }\n";
    return os.str();
  }
  // Packed: E elements of BITS bits to a word.
  int bits = static_cast<int>(d.size()) * 8, per = 32 / bits;
  std::string sh = "((i % " + std::to_string(per) + "u) * " + std::to_string(bits) + "u)";
  std::string mask = bits == 8 ? "0xffu" : "0xffffu";
  std::string raw = "((src.d[i / " + std::to_string(per) + "u] >> " + sh + ") & " + mask + ")";
  std::string load = d == bool_      ? "uint(" + raw + " != 0u)"
                     : d == int8     ? "bitfieldExtract(int(" + raw + "), 0, 8)"
                     : d == float16  ? "k_h2f(" + raw + ")"
                     : d == bfloat16 ? "k_bf2f(" + raw + ")"
                                     : raw;
  std::string bitsv = d == bool_      ? "uint(v != 0u)"
                      : d == float16  ? "k_f2h(v)"
                      : d == bfloat16 ? "k_f2bf(v)"
                                      : "uint(v)";
  os << "A load_at(uint i) { return " << load << "; }\n"
     << "void store_at(uint i, A v) {\n"
     << "  uint w = i / " << per << "u, s = " << sh << ";\n"
     << "  atomicAnd(dst.d[w], ~(" << mask << " << s));\n"
     << "  atomicOr(dst.d[w], ((" << bitsv << ") & " << mask << ") << s);\n}\n";
  return os.str();
}

}  // namespace

std::string scan_glsl(Dtype d, uint32_t op, bool acc_stage, bool chunked, bool by_address,
                      bool has_float64, bool has_int64, const ScanFloatModes& modes) {
  if (d == float64 && !has_float64)
    throw_error("vulkan: scans of float64 need the device feature shaderFloat64");
  if ((d == int64 || d == uint64) && !has_int64)
    throw_error("vulkan: scans of ", d.name(), " need the device feature shaderInt64");
  std::string acc = acc_type(d);
  std::string sw = acc_stage || d.size() == 4 ? (scan_accumulator_bytes(d) == 8 ? "uvec2" : "uint")
                   : d.size() == 8            ? "uvec2"
                                              : "uint";
  std::string aw = scan_accumulator_bytes(d) == 8 ? "uvec2" : "uint";
  std::ostringstream os;
  os << "#version 450\n";
  if (has_int64) os << "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  if (by_address)
    os << "#extension GL_EXT_buffer_reference : require\n"
       << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
  if (d.is_float()) {  // the modes of the width the scan computes in (float64's, else 32)
    const bool wide = d == float64;
    emit_float_controls(os, {!wide && modes.keep_nan32, !wide && modes.keep_denorm32,
                             wide && modes.keep_nan64, wide && modes.keep_denorm64});
  }
  const int lanes = chunked ? kScanChunkLanes : kScanLanes;
  os << "layout(local_size_x = " << lanes << ") in;\n"
     << "layout(push_constant) uniform Push { uint n, inner, tiles, groups, pad, flags, gx, chunk; "
        "uvec2 src_address, dst_address, aux_address; } pc;\n";
  if (by_address) {
    os << "layout(buffer_reference, std430, buffer_reference_align = 16) buffer RS { " << sw
       << " d[]; };\n"
       << "layout(buffer_reference, std430, buffer_reference_align = 16) buffer RX { " << aw
       << " d[]; };\n"
       << "#define src RS(pc.src_address)\n#define dst RS(pc.dst_address)\n"
       << "#define aux RX(pc.aux_address)\n";
  } else {
    os << "layout(std430, set = 0, binding = 0) readonly buffer S { " << sw << " d[]; } src;\n"
       << "layout(std430, set = 0, binding = 1) buffer D { " << sw << " d[]; } dst;\n"
       << "layout(std430, set = 0, binding = 2) buffer X { " << aw << " d[]; } aux;\n";
  }
  os << glsl_prelude(has_float64, has_int64);
  os << "#define OP " << op << "u\n";
  os << "#define A " << acc << "\n#define IS_FLOAT " << d.is_float() << "\n#define LANES " << lanes
     << "u\n#define RUN " << kScanRun << "u\n"
     << "#define LOWEST " << literal(d, scalar::scan_identity(ScanOp::Max, d)) << "\n"
     << "#define HIGHEST " << literal(d, scalar::scan_identity(ScanOp::Min, d)) << "\n"
     << "#define NEG_INF " << (d.is_float() ? infinity(d, true) : "A(0)") << "\n"
     << "#define EXP " << (d == float64 ? "k_exp_d" : "exp") << "\n#define LOG "
     << (d == float64 ? "k_log_d" : "log") << "\n";
  os << kOps << accessors(d, acc_stage) << (chunked ? kChunkMain : kMain);
  return os.str();
}

}  // namespace kiln::vulkan
