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
)CL";

// kiln_erf over N lanes (floatN, kiln_erfN: opencl_erf4 and the prelude's 16 lanes write N).
const char* kErfLanes = R"CL(inline floatN kiln_erfN(floatN x) {
  floatN c = select(x, (floatN)(4.0f), x > (floatN)(4.0f));
  c = select(c, (floatN)(-4.0f), c < (floatN)(-4.0f));
  floatN z = c * c;
  floatN p = fma(z, (floatN)(2.0015095640223045e-6f), (floatN)(0.00028283157593563815f));
  p = fma(p, z, (floatN)(0.0038033077684824308f));
  p = fma(p, z, (floatN)(0.052852256547350698f));
  p = fma(p, z, (floatN)(0.19167024685191649f));
  p = fma(p, z, (floatN)(1.1283791590578851f));
  floatN q = fma(z, (floatN)(3.7483294648092395e-5f), (floatN)(0.0011663487838495679f));
  q = fma(q, z, (floatN)(0.015045922524155666f));
  q = fma(q, z, (floatN)(0.11457382724376274f));
  q = fma(q, z, (floatN)(0.50319622937315642f));
  q = fma(q, z, (floatN)(1.0f));
  return c * (p / q);
}
)CL";

const char* kTail = R"CL(inline long kiln_ipow(long base, long e, int is_signed) {
  if (is_signed && e < 0) return base == 1 ? 1 : base == -1 ? ((e & 1) ? -1 : 1) : 0;
  ulong r = 1UL, b = (ulong)base, ue = (ulong)e;
  while (ue) { if (ue & 1UL) r *= b; b *= b; ue >>= 1; }
  return (long)r;
}
)CL";

// kErfLanes over `lanes` lanes.
std::string erf_lanes(int lanes) {
  std::string f = kErfLanes, n = std::to_string(lanes);
  for (size_t at; (at = f.find("floatN")) != std::string::npos;) f.replace(at, 6, "float" + n);
  for (size_t at; (at = f.find("kiln_erfN")) != std::string::npos;)
    f.replace(at, 9, "kiln_erf" + n);
  return f;
}

}  // namespace

const std::string& opencl_prelude() {
  static const std::string text =
      std::string(kPrelude) +
      "// kiln_erf over 16 lanes, for the vector form of element-wise kernels on CPU devices.\n" +
      erf_lanes(16) + kTail;
  return text;
}

const std::string& opencl_erf4() {
  static const std::string text = erf_lanes(4);
  return text;
}

}  // namespace kiln::opencl
