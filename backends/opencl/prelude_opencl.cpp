#include "backends/opencl/prelude_opencl.h"

#include <string>

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

}  // namespace

const char* opencl_prelude() { return kPrelude; }

// kiln_erf16 with float4 lanes, written from its text (one fit, two widths).
const std::string& opencl_erf4() {
  static const std::string text = [] {
    std::string all = kPrelude;
    size_t from = all.find("inline float16 kiln_erf16("), to = all.find("inline long kiln_ipow(");
    std::string f = all.substr(from, to - from);
    for (size_t at; (at = f.find("float16")) != std::string::npos;) f.replace(at, 7, "float4");
    for (size_t at; (at = f.find("kiln_erf16")) != std::string::npos;)
      f.replace(at, 10, "kiln_erf4");
    return f;
  }();
  return text;
}

}  // namespace kiln::opencl
