#include "backends/vulkan/matmul_shader.h"

#include <sstream>

#include "graph/error.h"

namespace kiln::vulkan {

MatmulShader matmul_glsl(Dtype d, bool int64, bool tiled) {
  if (d != float32 && d != float64)
    throw_error("vulkan: matmul of ", d,
                " is not supported (valid: float32, and float64 on devices with shaderFloat64); "
                "cast with astype or run the matmul on cpu");
  const char* T = d == float64 ? "double" : "float";
  const int t = 16;
  MatmulShader sh;
  if (!tiled) sh.cols_per_group = 64, sh.rows_per_group = 1;
  std::ostringstream os;
  os << "#version 450\n";
  (void)int64;  // 32-bit addressing: buffers fit maxStorageBufferRange (checked on the host)
  os << "#define IDX int\n"
     << "#define T " << T << "\n"
     << "#define TILE " << t << "\n"
     << (tiled ? "layout(local_size_x = TILE, local_size_y = TILE) in;\n"
               : "layout(local_size_x = 64) in;\n")
     << "layout(std430, set = 0, binding = 0) readonly buffer A { T d[]; } a;\n"
     << "layout(std430, set = 0, binding = 1) readonly buffer B { T d[]; } b;\n"
     << "layout(std430, set = 0, binding = 2) writeonly buffer C { T d[]; } c;\n"
     << "layout(std430, set = 0, binding = 3) readonly buffer Params { uvec2 w[]; } prm;\n"
     << "layout(push_constant) uniform Push { uint batch0; } pc;\n"
     << (tiled ? "shared T ta[TILE][TILE];\nshared T tb[TILE][TILE];\n" : "");
  os << "IDX word(uint i) { return int(prm.w[i].x); }\n";
  os << R"(void main() {
  IDX m = word(0u), n = word(1u), k = word(2u);
  uint batches = uint(word(3u));
  uint bi = pc.batch0 + gl_WorkGroupID.z;
  if (bi >= batches) return;
  IDX ao = word(4u + bi), bo = word(4u + batches + bi), co = word(4u + 2u * batches + bi);
)";
  if (tiled)
    os << R"(  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
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
  else
    os << R"(  IDX row = IDX(gl_WorkGroupID.y);
  IDX col = IDX(gl_WorkGroupID.x) * IDX(64) + IDX(gl_LocalInvocationID.x);
  if (row >= m || col >= n) return;
  T acc = T(0);
  IDX ap = ao + row * k, bp = bo + col;
  for (IDX p = IDX(0); p < k; ++p, bp += n) acc += a.d[uint(ap + p)] * b.d[uint(bp)];
  c.d[uint(co + row * n + col)] = acc;
}
)";
  sh.glsl = os.str();
  return sh;
}

}  // namespace kiln::vulkan
