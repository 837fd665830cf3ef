#include "backends/vulkan/matmul_shader.h"

#include <sstream>

#include "graph/error.h"

namespace kiln::vulkan {

std::string matmul_glsl(Dtype d, bool int64) {
  if (d != float32 && d != float64)
    throw_error("vulkan: matmul of ", d,
                " is not supported (valid: float32, and float64 on devices with shaderFloat64); "
                "cast with astype or run the matmul on cpu");
  const char* T = d == float64 ? "double" : "float";
  const int t = kMatmulTile;
  std::ostringstream os;
  os << "#version 450\n";
  if (int64) os << "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  os << "#define IDX " << (int64 ? "int64_t" : "int") << "\n"
     << "#define T " << T << "\n"
     << "#define TILE " << t << "\n"
     << "layout(local_size_x = TILE, local_size_y = TILE) in;\n"
     << "layout(std430, set = 0, binding = 0) readonly buffer A { T d[]; } a;\n"
     << "layout(std430, set = 0, binding = 1) readonly buffer B { T d[]; } b;\n"
     << "layout(std430, set = 0, binding = 2) writeonly buffer C { T d[]; } c;\n"
     << "layout(std430, set = 0, binding = 3) readonly buffer Params { uvec2 w[]; } prm;\n"
     << "layout(push_constant) uniform Push { uint batch0; } pc;\n"
     << "shared T ta[TILE][TILE];\n"
     << "shared T tb[TILE][TILE];\n";
  if (int64)
    os << "IDX word(uint i) { return (int64_t(prm.w[i].y) << 32) | int64_t(prm.w[i].x); }\n";
  else
    os << "IDX word(uint i) { return int(prm.w[i].x); }\n";
  os << R"(void main() {
  IDX m = word(0u), n = word(1u), k = word(2u);
  uint batches = uint(word(3u));
  uint bi = pc.batch0 + gl_WorkGroupID.z;
  if (bi >= batches) return;
  IDX ao = word(4u + bi), bo = word(4u + batches + bi), co = word(4u + 2u * batches + bi);
  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  IDX row = IDX(gl_WorkGroupID.y) * TILE + IDX(ly);
  IDX col = IDX(gl_WorkGroupID.x) * TILE + IDX(lx);
  T acc = T(0);
  for (IDX t0 = IDX(0); t0 < k; t0 += TILE) {
    IDX ka = t0 + IDX(lx), kb = t0 + IDX(ly);
    ta[ly][lx] = row < m && ka < k ? a.d[uint(ao + row * k + ka)] : T(0);
    tb[ly][lx] = kb < k && col < n ? b.d[uint(bo + kb * n + col)] : T(0);
    barrier();
    for (int p = 0; p < TILE; ++p) acc += ta[ly][p] * tb[p][lx];
    barrier();
  }
  if (row < m && col < n) c.d[uint(co + row * n + col)] = acc;
}
)";
  return os.str();
}

}  // namespace kiln::vulkan
