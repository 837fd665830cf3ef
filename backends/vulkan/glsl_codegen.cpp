#include "backends/vulkan/glsl_codegen.h"

#include <algorithm>
#include <sstream>

#include "backends/source/emitter.h"
#include "backends/source/shader_layout.h"
#include "backends/vulkan/dialect_glsl.h"
#include "backends/vulkan/float_controls.h"
#include "backends/vulkan/glsl_prelude.h"

namespace kiln::vulkan {

namespace {

constexpr int kLocalSize = 64;

// A shader: the shared compute-shader layout in the GLSL dialect, after the declarations only
// Vulkan has (extensions, push constants or a params buffer, storage-buffer bindings or buffer
// references) and the GLSL prelude.
class Writer {
 public:
  Writer(const Kernel& k, const ShaderFeatures& f) : k_(k), f_(f), d_(f) {}

  Shader run() {
    Shader sh;
    const int local = k_.reduce ? kLocalSize : f_.map_local_size;
    sh.local_size = local;
    sh.per_group = k_.reduce.has_value();
    sh.nparams = k_.num_params();
    d_.nparams = sh.nparams;
    bool runs = f_.subgroup_runs && f_.subgroup_size > 0 && local % f_.subgroup_size == 0;
    source::ShaderBody body = source::shader_body(k_, d_, {local, f_.subgroups, f_.float64, runs});
    if (d_.vector_step() > 0) sh.points_per_invocation = d_.vector_step();
    if (body.uses_subgroup_ids) sh.max_groups = kRunGroups;
    std::ostringstream os;
    os << "#version 450\n";
    if (f_.int64) os << "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
    if (body.uses_subgroup_ids) os << "#extension GL_KHR_shader_subgroup_basic : require\n";
    if (body.uses_subgroups)
      os << "#extension GL_KHR_shader_subgroup_arithmetic : require\n"
         << "#extension GL_KHR_shader_subgroup_shuffle : require\n";
    if (f_.by_address)
      os << "#extension GL_EXT_buffer_reference : require\n"
         << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
    emit_float_controls(os, {f_.keep_nan32, f_.keep_denorm32, f_.keep_nan64 && f_.float64,
                             f_.keep_denorm64 && f_.float64});
    os << "layout(local_size_x = " << local << ") in;\n";
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
    if (!d_.texel.empty()) sh.texel.assign(static_cast<size_t>(sh.bindings), false);
    for (int b = 0; b < nbuf; ++b) {
      if (d_.texel.count(b)) {
        sh.texel[static_cast<size_t>(b)] = true;
        os << "layout(set = 0, binding = " << b << ") uniform usamplerBuffer b" << b << ";\n";
        continue;
      }
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
    os << body.text;
    sh.glsl = os.str();
    sh.float_slots = d_.float_slots;
    return sh;
  }

 private:
  const Kernel& k_;
  const ShaderFeatures& f_;

  GlslDialect d_;
};

}  // namespace

Shader generate_glsl(const Kernel& k, const ShaderFeatures& f) {
  source::record_for_corpus(k);
  return Writer(k, f).run();
}

}  // namespace kiln::vulkan
