#include "backends/vulkan/gather_shader.h"

#include <sstream>

#include "graph/error.h"

namespace kiln::vulkan {

namespace {

// One word per step; with packed elements, `mine` marks the bytes this word's elements fill
// (all of them but in the output's last word, whose other bytes stay as they are).
const char* kMain = R"(void main() {
  uint lanes = gl_NumWorkGroups.x * gl_NumWorkGroups.y * LANES;
  uint w = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * LANES +
           gl_LocalInvocationID.x;
  for (; w < pc.words; w += lanes) {
#if !PACKED
    dst.d[w] = src.d[source_of(w)];
#else
    uint word = 0u, mine = 0u;
    for (uint e = 0u; e < E; ++e) {
      uint g = w * E + e;
      if (g < pc.total) {
        uint p = source_of(g);
        word |= ((src.d[p / E] >> ((p % E) * BITS)) & MASK) << (e * BITS);
        mine |= MASK << (e * BITS);
      }
    }
    if (mine != 0xffffffffu) word |= dst.d[w] & ~mine;
    dst.d[w] = word;
#endif
  }
}
)";

}  // namespace

std::string indexed_position_glsl(const char* name, const char* indices) {
  return std::string("uint ") + name + R"((uint g) {
  uint row = g / pc.inner, k = g - row * pc.inner;
  uint ob = row / pc.m, j = row - ob * pc.m;
  uvec2 w = )" +
         indices +
         R"(.d[pc.shared_index != 0u ? j : g];
  uint i;
  if (int(w.y) >= 0)
    i = w.y != 0u || w.x >= pc.n ? pc.n - 1u : w.x;  // past the end: the last
  else
    i = w.y == 0xffffffffu && w.x >= 0u - pc.n ? w.x + pc.n : 0u;  // from the end, or the first
  return (ob * pc.n + i) * pc.inner + k;
}
)";
}

std::string gather_glsl(size_t element_bytes, bool by_address) {
  if (element_bytes != 1 && element_bytes != 2 && element_bytes != 4 && element_bytes != 8)
    throw_error("vulkan: gather of ", element_bytes,
                "-byte elements is not supported (valid: 1, 2, 4, 8)");
  int64_t e = gather_elements_per_word(element_bytes);
  const char* word = element_bytes == 8 ? "uvec2" : "uint";
  std::ostringstream os;
  os << "#version 450\n";
  if (by_address)
    os << "#extension GL_EXT_buffer_reference : require\n"
       << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
  os << "#define W " << word << "\n#define PACKED " << (e > 1) << "\n#define E " << e
     << "u\n#define BITS " << 32 / e << "u\n#define MASK "
     << (e == 4   ? "0xffu"
         : e == 2 ? "0xffffu"
                  : "0xffffffffu")
     << "\n#define LANES " << kGatherLanes << "u\n"
     << "layout(local_size_x = " << kGatherLanes << ") in;\n"
     << "layout(push_constant) uniform Push { uint outer, n, inner, m, total, words, "
        "shared_index, pad; uvec2 a_address, i_address, o_address; } pc;\n";
  if (by_address) {
    os << "layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer RA "
          "{ W d[]; };\n"
       << "layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer RI "
          "{ uvec2 d[]; };\n"
       << "layout(buffer_reference, std430, buffer_reference_align = 16) buffer RO { W d[]; };\n"
       << "#define src RA(pc.a_address)\n#define ix RI(pc.i_address)\n"
       << "#define dst RO(pc.o_address)\n";
  } else {
    os << "layout(std430, set = 0, binding = 0) readonly buffer A { W d[]; } src;\n"
       << "layout(std430, set = 0, binding = 1) readonly buffer I { uvec2 d[]; } ix;\n"
       << "layout(std430, set = 0, binding = 2) buffer O { W d[]; } dst;\n";
  }
  os << indexed_position_glsl("source_of", "ix") << kMain;
  return os.str();
}

}  // namespace kiln::vulkan
