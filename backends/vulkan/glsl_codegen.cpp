#include "backends/vulkan/glsl_codegen.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "backends/source/emitter.h"
#include "backends/vulkan/dialect_glsl.h"
#include "backends/vulkan/glsl_prelude.h"
#include "graph/error.h"

namespace kiln::vulkan {

namespace {

using source::Emitter;

constexpr int kLocalSize = 64;

// The layout of a compute shader (one main(): a grid-stride loop over points, or a workgroup per
// kept point of a reduction), written on the shared emitter with the GLSL dialect.
class Layout {
 public:
  Layout(const Kernel& k, const ShaderFeatures& f) : k_(k), f_(f), d_(f), em_(k, d_) {}

  Shader run() {
    d_.check_features();
    Shader sh;
    sh.local_size = kLocalSize;
    sh.per_group = k_.reduce.has_value();
    sh.nparams = k_.num_params();
    d_.nparams = sh.nparams;
    find_vector_buffers();
    if (!d_.vec.empty()) sh.points_per_invocation = d_.width;
    if (k_.reduce)
      emit_reduction(em_.out());
    else
      emit_elementwise(em_.out());
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
    int words = d_.nparams + static_cast<int>(d_.float_slots.size()) + (f_.by_address ? nbuf : 0);
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
    if (f_.by_address) sh.address_slot = d_.nparams + static_cast<int>(d_.float_slots.size());
    for (int b = 0; b < nbuf; ++b) {
      std::string elem = d_.vec.count(b) ? d_.vec_type(k_.buffers[b].dtype)
                                         : GlslDialect::storage_type(k_.buffers[b].dtype);
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
    os << em_.out().str();
    sh.glsl = os.str();
    sh.float_slots = d_.float_slots;
    return sh;
  }

 private:
  // Sets the coordinates of axes [from, to) from the linear index `lin` (row-major).
  void decompose(std::ostream& os, int from, int to, const std::string& lin) {
    os << "  { IDX rem = " << lin << ";\n";
    for (int a = to - 1; a > from; --a) {
      std::string e = d_.dim(k_.domain[a]);
      os << "    i" << a << " = rem % " << e << "; rem /= " << e << ";\n";
    }
    if (to > from) os << "    i" << from << " = rem;\n";  // below its extent: no division
    os << "  }\n";
  }

  std::string product(int from, int to) {
    std::string s = "IDX(1)";
    for (int a = from; a < to; ++a) s += " * " + d_.dim(k_.domain[a]);
    return s;
  }

  // Element-wise 1-D kernels whose every buffer is walked with stride 1 (4-byte dtypes, offsets
  // a multiple of the step) or 0 (inputs) read and write those buffers as vectors: each
  // invocation does 4 points per step through vec4 accesses (the usual vectorised access on
  // GPUs), or 8 through u64vec4 ones with ShaderFeatures::wide_access (lavapipe runs every
  // storage-buffer access as a loop over its SIMD lanes, one iteration per lane and component,
  // so fewer, wider components pay there).
  void find_vector_buffers() {
    d_.width = f_.wide_access && f_.int64 ? 8 : 4;
    if (k_.reduce || k_.ndim() != 1) return;
    std::set<int> vec;
    for (int b = 0; b < static_cast<int>(k_.buffers.size()); ++b) {
      const KernelBuffer& kb = k_.buffers[b];
      const Dim& st = kb.map.strides[0];
      if (st.is_runtime()) return;
      if (st.value == 1) {
        if (kb.dtype.size() != 4 || kb.dtype.is_bool() || kb.map.offset.is_runtime() ||
            kb.map.offset.value % d_.width != 0)
          return;
        vec.insert(b);
      } else if (st.value != 0 || kb.output) {
        return;
      }
    }
    d_.vec = vec;
  }

  void declare_coords(std::ostream& os) {
    os << "  IDX";
    for (int a = 0; a < k_.ndim(); ++a) os << (a ? ", " : " ") << "i" << a << " = IDX(0)";
    if (k_.ndim() == 0) os << " i_none = IDX(0)";
    os << ";\n";
  }

  void emit_elementwise(std::ostream& os) {
    if (!d_.vec.empty()) return emit_elementwise_vec4(os);
    // A grid-stride loop: the host may launch fewer groups than points (on a CPU device each
    // workgroup costs a task switch, so it launches a few per core).
    os << "void main() {\n"
       << "  IDX npoints = " << product(0, k_.ndim()) << ";\n"
       << "  IDX stride = IDX(gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z) * IDX("
       << kLocalSize << ");\n";
    declare_coords(os);
    em_.constants("  ");
    os << "  for (IDX gid = k_group() * IDX(" << kLocalSize
       << ") + IDX(gl_LocalInvocationID.x); gid < npoints; gid += stride) {\n";
    decompose(os, 0, k_.ndim(), "gid");
    em_.values(0, static_cast<int>(k_.body.size()), "  ");
    em_.stores("  ");
    os << "  }\n}\n";
  }

  void emit_elementwise_vec4(std::ostream& os) {
    const std::string W = std::to_string(d_.width);
    os << "void main() {\n"
       << "  IDX npoints = " << d_.dim(k_.domain[0]) << ";\n"
       << "  IDX stride = IDX(gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z) * IDX("
       << kLocalSize << ");\n";
    declare_coords(os);
    em_.constants("  ");
    os << "  for (IDX q = k_group() * IDX(" << kLocalSize
       << ") + IDX(gl_LocalInvocationID.x); q * IDX(" << W << ") < npoints; q += stride) {\n"
       << "  IDX base = q * IDX(" << W << ");\n"
       << "  if (base + IDX(" << W << ") <= npoints) {\n";
    std::set<int> loaded;
    for (const Value& val : k_.body)
      if (val.kind == ValueKind::Load && d_.vec.count(val.buffer)) loaded.insert(val.buffer);
    auto step = [&](int b) {  // the vector index of step q in buffer b
      return "uint(" + std::to_string(k_.buffers[b].map.offset.value / d_.width) + " + q)";
    };
    for (int b : loaded)
      os << "  " << d_.vec_type(k_.buffers[b].dtype) << " L" << b << " = b" << b << ".d[" << step(b)
         << "];\n";
    for (const Store& st : k_.stores) {
      if (d_.width == 8)
        os << "  uint O" << st.buffer << "[8];\n";
      else
        os << "  " << d_.vec_type(k_.buffers[st.buffer].dtype) << " O" << st.buffer << ";\n";
    }
    for (d_.lane = 0; d_.lane < d_.width; ++d_.lane) {
      os << "  {\n  i0 = base + IDX(" << d_.lane << ");\n";
      em_.values(0, static_cast<int>(k_.body.size()), "  ");
      em_.stores("  ");
      os << "  }\n";
    }
    d_.lane = -1;
    for (const Store& st : k_.stores) {
      std::string O = "O" + std::to_string(st.buffer);
      os << "  b" << st.buffer << ".d[" << step(st.buffer) << "] = ";
      if (d_.width == 8) {
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
    em_.values(0, static_cast<int>(k_.body.size()), "  ");
    em_.stores("  ");
    os << "  }\n  }\n  }\n}\n";
  }

  // acc = acc (op) xv for sums and products (bool: or/and; 8-bit integers wrapped).
  void combine_into(std::ostream& o, ReduceOp op, Dtype acc_d, const std::string& acc,
                    const std::string& xv) {
    if (op == ReduceOp::Sum) {
      if (acc_d.is_bool())
        o << acc << " = " << acc << " || " << xv << ";\n";
      else
        o << acc << " = " << GlslDialect::wrap(acc_d, acc + " + " + xv) << ";\n";
    } else {
      if (acc_d.is_bool())
        o << acc << " = " << acc << " && " << xv << ";\n";
      else
        o << acc << " = " << GlslDialect::wrap(acc_d, acc + " * " + xv) << ";\n";
    }
  }

  // Combines acc/has/best across the subgroup (see emit_reduction).
  void subgroup_stage(std::ostream& os, ReduceOp op, Dtype acc_d) {
    if (op == ReduceOp::Sum || op == ReduceOp::Prod) {
      bool sum = op == ReduceOp::Sum;
      if (acc_d.is_bool())
        os << "  acc = " << (sum ? "subgroupOr" : "subgroupAnd") << "(uint(acc)) != 0u;\n";
      else
        os << "  acc = "
           << GlslDialect::wrap(acc_d, std::string(sum ? "subgroupAdd" : "subgroupMul") + "(acc)")
           << ";\n";
      return;  // `has` only matters to max/min/argmax
    }
    std::string shuffled =
        acc_d.is_bool() ? "(subgroupShuffleXor(uint(acc), o) != 0u)" : "subgroupShuffleXor(acc, o)";
    os << "  for (uint o = 1u; o < gl_SubgroupSize; o <<= 1) {\n"
       << "    " << GlslDialect::ctype(acc_d) << " ov = " << shuffled << ";\n"
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
    std::string A = GlslDialect::ctype(acc_d);
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
    em_.constants("  ");
    os << "  for (IDX gid = k_group(); gid < nkept; gid += groups) {\n";
    decompose(os, 0, kept, "gid");
    std::string init = op == ReduceOp::Prod ? A + "(1)" : A + "(0)";
    if (acc_d.is_bool()) init = op == ReduceOp::Prod ? "true" : "false";
    os << "  " << A << " acc = " << init << ";\n  bool has = false;\n  IDX best = IDX(0);\n"
       << "  IDX nred = " << product(kept, n) << ";\n"
       << "  for (IDX r = IDX(lid); r < nred; r += IDX(" << kLocalSize << ")) {\n";
    decompose(os, kept, n, "r");
    em_.values(0, red.value, "  ");
    std::string x = Emitter::v(rv.a);
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
      result = std::string(GlslDialect::ctype(rv.dtype)) + "(s_p[0])";
    else if (minmax)
      result = "(s_h[0] ? s_v[0] : " + init + ")";
    else
      result = "s_v[0]";
    os << "  " << GlslDialect::ctype(rv.dtype) << " " << Emitter::v(red.value) << " = "
       << GlslDialect::ctype(rv.dtype) << "(" << result << ");\n";
    em_.values(red.value + 1, static_cast<int>(k_.body.size()), "  ");
    em_.stores("  ");
    // The next point's partials reuse the shared arrays once every invocation is past here.
    os << "  }\n  barrier();\n  }\n}\n";
  }

  const Kernel& k_;
  const ShaderFeatures& f_;
  GlslDialect d_;
  Emitter em_;
  bool uses_subgroups_ = false;
};

}  // namespace

Shader generate_glsl(const Kernel& k, const ShaderFeatures& f) {
  source::record_for_corpus(k);
  return Layout(k, f).run();
}

}  // namespace kiln::vulkan
