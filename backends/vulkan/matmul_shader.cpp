#include "backends/vulkan/matmul_shader.h"

#include <sstream>

#include "graph/error.h"

namespace kiln::vulkan {

namespace {

constexpr int kTile = 16;   // GPU form: a 16 x 16 output tile per workgroup
constexpr int kRows = 4;    // CPU form: rows per invocation
constexpr int kLanes = 64;  // CPU form: invocations per workgroup

// Declarations of A, B and C (as `a.d`, `b.d`, `c.d`) and the params words.
void declare_operands(std::ostringstream& os, const MatmulForm& f) {
  const char* elem[3] = {"T", "VT", "VT"};
  const char* name[3] = {"a", "b", "c"};
  if (f.by_address) {
    os << "layout(std430, set = 0, binding = 0) readonly buffer Params { uvec2 w[]; } prm;\n";
    for (int i = 0; i < 3; ++i)
      os << "layout(buffer_reference, std430, buffer_reference_align = 16) buffer R" << name[i]
         << " { " << elem[i] << " d[]; };\n";
    // The addresses follow the 4 sizes and 3 offset lists.
    os << "#define a Ra(prm.w[4u + 3u * uint(prm.w[3].x)])\n"
       << "#define b Rb(prm.w[5u + 3u * uint(prm.w[3].x)])\n"
       << "#define c Rc(prm.w[6u + 3u * uint(prm.w[3].x)])\n";
    return;
  }
  for (int i = 0; i < 3; ++i)
    os << "layout(std430, set = 0, binding = " << i << ") buffer " << char('A' + i) << " { "
       << elem[i] << " d[]; } " << name[i] << ";\n";
  os << "layout(std430, set = 0, binding = 3) readonly buffer Params { uvec2 w[]; } prm;\n";
}

const char* kTiledBody = R"(  uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
  IDX row = IDX(gl_WorkGroupID.y) * TILE + IDX(ly);
  IDX col = IDX(gl_WorkGroupID.x) * TILE + IDX(lx);
  T acc = T(0);
  for (IDX t0 = k0; t0 < k1; t0 += TILE) {
    IDX ka = t0 + IDX(lx), kb = t0 + IDX(ly);
    ta[ly][lx] = row < m && ka < k1 ? a.d[uint(ao + row * sai + ka * sap)] : T(0);
    tb[ly][lx] = kb < k1 && col < n ? b.d[uint(bo + kb * sbp + col * sbj)] : T(0);
    barrier();
    for (int p = 0; p < TILE; ++p) acc += ta[ly][p] * tb[p][lx];
    barrier();
  }
  if (row < m && col < n) {
    if (pc.accumulate != 0u) acc += c.d[uint(co + row * n + col)];
    c.d[uint(co + row * n + col)] = acc;
  }
}
)";

// Rows past m read row m - 1 (a valid address) and store nothing.
const char* kBlockedBody = R"(  IDX nw = n / W;  // vectors per row of B and C
  IDX cw = IDX(gl_WorkGroupID.x) * LANES + IDX(gl_LocalInvocationID.x);
  if (cw >= nw) return;
  IDX row0 = IDX(gl_WorkGroupID.y) * ROWS;
  IDX a0 = ao + min(row0, m - 1) * sai, a1 = ao + min(row0 + 1, m - 1) * sai;
  IDX a2 = ao + min(row0 + 2, m - 1) * sai, a3 = ao + min(row0 + 3, m - 1) * sai;
  VT acc0 = VT(0), acc1 = VT(0), acc2 = VT(0), acc3 = VT(0);
  IDX bp = bo / W + cw * sbj;  // sbp and sbj count vectors of B (W == 1 when B is transposed)
  bp += k0 * sbp;
  for (IDX p = k0; p < k1; ++p, bp += sbp) {
    VT bv = b.d[uint(bp)];
    acc0 += a.d[uint(a0 + p * sap)] * bv;
    acc1 += a.d[uint(a1 + p * sap)] * bv;
    acc2 += a.d[uint(a2 + p * sap)] * bv;
    acc3 += a.d[uint(a3 + p * sap)] * bv;
  }
  IDX cp = co / W + row0 * nw + cw;
  if (pc.accumulate != 0u) {  // a later part along k: add what the earlier parts stored
    acc0 += c.d[uint(cp)];
    if (row0 + 1 < m) acc1 += c.d[uint(cp + nw)];
    if (row0 + 2 < m) acc2 += c.d[uint(cp + 2 * nw)];
    if (row0 + 3 < m) acc3 += c.d[uint(cp + 3 * nw)];
  }
  c.d[uint(cp)] = acc0;
  if (row0 + 1 < m) c.d[uint(cp + nw)] = acc1;
  if (row0 + 2 < m) c.d[uint(cp + 2 * nw)] = acc2;
  if (row0 + 3 < m) c.d[uint(cp + 3 * nw)] = acc3;
}
)";

}  // namespace

MatmulShader matmul_glsl(Dtype d, const MatmulForm& f) {
  if (d != float32 && d != float64)
    throw_error("vulkan: matmul of ", d,
                " is not supported (valid: float32, and float64 on devices with shaderFloat64); "
                "cast with astype or run the matmul on cpu");
  if (f.width != 1 && f.width != 4) throw_error("vulkan: matmul width ", f.width, " (valid: 1, 4)");
  if (f.width != 1 && f.trans_b)
    throw_error("vulkan: a matmul reading B transposed takes width 1, not ", f.width);
  bool f64 = d == float64;
  MatmulShader sh;
  sh.bindings = f.by_address ? 1 : 4;
  if (!f.tiled) sh.cols_per_group = kLanes * f.width, sh.rows_per_group = kRows;
  std::ostringstream os;
  os << "#version 450\n";
  if (f.by_address)
    os << "#extension GL_EXT_buffer_reference : require\n"
       << "#extension GL_EXT_buffer_reference_uvec2 : require\n";
  // 32-bit addressing: the host checks that operands stay below 2^31 elements.
  os << "#define IDX int\n"
     << "#define T " << (f64 ? "double" : "float") << "\n"
     << "#define VT "
     << (f.tiled || f.width == 1 ? "T"
         : f64                   ? "dvec4"
                                 : "vec4")
     << "\n"
     << "#define W " << (f.tiled ? 1 : f.width) << "\n"
     << "#define TILE " << kTile << "\n#define ROWS " << kRows << "\n#define LANES " << kLanes
     << "\n"
     << (f.tiled ? "layout(local_size_x = TILE, local_size_y = TILE) in;\n"
                 : "layout(local_size_x = LANES) in;\n");
  declare_operands(os, f);
  os << "layout(push_constant) uniform Push { uint batch0; int k0; int k1; uint accumulate; } "
        "pc;\n"
     << (f.tiled ? "shared T ta[TILE][TILE];\nshared T tb[TILE][TILE];\n" : "");
  os << "IDX word(uint i) { return int(prm.w[i].x); }\n";
  os << R"(void main() {
  IDX m = word(0u), n = word(1u), k = word(2u);
  uint batches = uint(word(3u));
  uint bi = pc.batch0 + gl_WorkGroupID.z;
  if (bi >= batches) return;
  IDX ao = word(4u + bi), bo = word(4u + batches + bi), co = word(4u + 2u * batches + bi);
  IDX k0 = IDX(pc.k0), k1 = IDX(pc.k1);
)";
  // Strides of A along its rows (i) and along k (p), of B along k and its columns (j), in
  // elements of A and in vectors of B: constants of the form, so the compiler folds them.
  os << "  IDX sai = " << (f.trans_a ? "1" : "k") << ", sap = " << (f.trans_a ? "m" : "1")
     << ";\n  IDX sbp = " << (f.trans_b ? "1" : "n / W") << ", sbj = " << (f.trans_b ? "k" : "1")
     << ";\n";
  os << (f.tiled ? kTiledBody : kBlockedBody);
  sh.glsl = os.str();
  return sh;
}

}  // namespace kiln::vulkan
