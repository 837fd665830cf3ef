#include "backends/vulkan/glsl_prelude.h"

#include <cstdio>
#include <functional>
#include <string>

namespace kiln::vulkan {

namespace {

std::string dlit(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17elf", v);
  return buf;
}

std::string flit(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9e", v);
  return buf;
}

// Horner form of sum_{j=0}^{n} c(j) * z^j, with literals printed by `lit`.
std::string horner(const std::string& z, int n, const std::function<double(int)>& c,
                   std::string (*lit)(double)) {
  std::string s = lit(c(n));
  for (int j = n - 1; j >= 0; --j) s = "(" + s + ") * " + z + " + " + lit(c(j));
  return s;
}

double inv_fact(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return 1.0 / f;
}

const char* kCommon = R"(
uint k_f2h(float f) {
  uint x = floatBitsToUint(f);
  uint sgn = (x >> 16) & 0x8000u;
  uint ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sgn | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (ax >= 0x477ff000u) return sgn | 0x7c00u;
  if (ax < 0x38800000u) return sgn | uint(roundEven(uintBitsToFloat(ax) * 16777216.0));
  uint r = ax - 0x38000000u;
  r += 0xfffu + ((r >> 13) & 1u);
  return sgn | (r >> 13);
}
float k_h2f(uint h) {
  uint sgn = (h & 0x8000u) << 16;
  uint e = (h >> 10) & 0x1fu;
  uint m = h & 0x3ffu;
  if (e == 0u) {
    float v = float(m) * 5.9604644775390625e-8;
    return sgn != 0u ? -v : v;
  }
  if (e == 31u) return uintBitsToFloat(sgn | 0x7f800000u | (m << 13));
  return uintBitsToFloat(sgn | ((e + 112u) << 23) | (m << 13));
}
uint k_f2bf(float f) {
  uint x = floatBitsToUint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
  x += 0x7fffu + ((x >> 16) & 1u);
  return x >> 16;
}
float k_bf2f(uint h) { return uintBitsToFloat(h << 16); }
float k_rh(float x) { return k_h2f(k_f2h(x)); }
float k_rbf(float x) { return k_bf2f(k_f2bf(x)); }
float k_nan_f() { return uintBitsToFloat(0x7fc00000u); }
float k_inf_f() { return uintBitsToFloat(0x7f800000u); }
int k_ipow(int b, int e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) != 0 ? -1 : 1) : 0;
  int r = 1;
  while (e != 0) { if ((e & 1) != 0) r *= b; b *= b; e >>= 1; }
  return r;
}
uint k_ipow(uint b, uint e) {
  uint r = 1u;
  while (e != 0u) { if ((e & 1u) != 0u) r *= b; b *= b; e >>= 1; }
  return r;
}
float k_erf_f(float x) {
  // x * P(x^2) / Q(x^2) on [-4, 4] (the cpu backend's rational fit, relative error 2.8e-8);
  // beyond, erf rounds to +-1. No branch and no exp: on SIMD hardware (lavapipe's 8 lanes, a
  // GPU's warp) both sides of a divergent branch run, so the earlier Taylor/erfc split paid
  // for both and an exp. The clamps are compares, so NaN passes through.
  float c = x > 4.0 ? 4.0 : x < -4.0 ? -4.0 : x;
  float z = c * c;
  float p = ((((2.0015095640223045e-6 * z + 0.00028283157593563815) * z +
               0.0038033077684824308) * z + 0.052852256547350698) * z +
             0.19167024685191649) * z + 1.1283791590578851;
  float q = ((((3.7483294648092395e-5 * z + 0.0011663487838495679) * z +
               0.015045922524155666) * z + 0.11457382724376274) * z +
             0.50319622937315642) * z + 1.0;
  return c * (p / q);
}
)";

const char* kInt64 = R"(
int64_t k_ipow(int64_t b, int64_t e) {
  if (e < 0l) return b == 1l ? 1l : b == -1l ? ((e & 1l) != 0l ? -1l : 1l) : 0l;
  int64_t r = 1l;
  while (e != 0l) { if ((e & 1l) != 0l) r *= b; b *= b; e >>= 1; }
  return r;
}
uint64_t k_ipow(uint64_t b, uint64_t e) {
  uint64_t r = 1ul;
  while (e != 0ul) { if ((e & 1ul) != 0ul) r *= b; b *= b; e >>= 1; }
  return r;
}
uint64_t k_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ul;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebul;
  return z ^ (z >> 31);
}
uint64_t k_bits(uint64_t key, uint64_t c) { return k_mix(key + (c + 1ul) * 0x9e3779b97f4a7c15ul); }
float k_unit_f(uint64_t b, int p) { return float(uint(b >> (64 - p))) * exp2(float(-p)); }
)";

std::string float32_math(bool float64) {
  std::string s;
  // expm1 by its series near 0 (where exp(x) - 1 cancels), then tanh from it.
  s += "float k_expm1_f(float x) {\n  if (abs(x) < 0.35) return x * (" +
       horner(
           "x", 8, [](int j) { return inv_fact(j + 1); }, flit) +
       ");\n  return exp(x) - 1.0;\n}\n";
  s += R"(float k_tanh_f(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  if (a > 9.0) return x < 0.0 ? -1.0 : 1.0;
  float e = k_expm1_f(2.0 * a);
  float t = e / (e + 2.0);
  return x < 0.0 ? -t : t;
}
)";
  if (float64) {
    s += "float k_pow_f(float a, float b) { return float(k_pow_d(double(a), double(b))); }\n";
  } else {
    s += R"(float k_pow_f(float a, float b) {
  if (b == 0.0 || a == 1.0) return 1.0;
  if (isnan(a) || isnan(b)) return a + b;
  bool bint = floor(b) == b;
  bool odd = bint && abs(b) < 16777216.0 && mod(b, 2.0) == 1.0;
  if (a == 0.0) return b > 0.0 ? (odd ? a : 0.0) : (odd && a < 0.0 ? -k_inf_f() : k_inf_f());
  if (isinf(a)) return b > 0.0 ? (odd ? a : k_inf_f()) : (odd ? 1.0 / a : 0.0);
  if (a < 0.0 && !bint) return k_nan_f();
  float m = abs(a);
  if (m == 1.0) return odd && a < 0.0 ? -1.0 : 1.0;
  float r = exp2(b * log2(m));
  return a < 0.0 && odd ? -r : r;
}
)";
  }
  return s;
}

std::string float64_math() {
  std::string s = R"(
double k_nan_d() { return packDouble2x32(uvec2(0u, 0x7ff80000u)); }
double k_inf_d() { return packDouble2x32(uvec2(0u, 0x7ff00000u)); }
double k_pow2_d(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }
// float -> double from the bits when x is a float32 denormal: a driver that flushes them (NVIDIA
// 580, without DenormPreserve) flushes them in the conversion too.
double k_f2d(float x) {
  uint u = floatBitsToUint(x);
  if ((u & 0x7f800000u) != 0u) return double(x);
  double m = double(u & 0x7fffffu) * 1.4012984643248171e-45lf;
  return (u & 0x80000000u) != 0u ? -m : m;
}
)";
  s += "double k_exp_d(double x) {\n"
       "  if (isnan(x)) return x;\n"
       "  if (x > 709.782712893384lf) return k_inf_d();\n"
       "  if (x < -745.2lf) return 0.0lf;\n"
       "  double k = floor(x * 1.4426950408889634lf + 0.5lf);\n"
       "  double r = (x - k * 6.93147180369123816490e-01lf) - k * 1.90821492927058770002e-10lf;\n"
       "  double p = " +
       horner("r", 13, inv_fact, dlit) +
       ";\n"
       "  int ki = int(k);\n"
       "  return p * k_pow2_d(ki / 2) * k_pow2_d(ki - ki / 2);\n}\n";
  s += "double k_expm1_d(double x) {\n  if (abs(x) < 0.3466lf) return x * (" +
       horner(
           "x", 16, [](int j) { return inv_fact(j + 1); }, dlit) +
       ");\n  return k_exp_d(x) - 1.0lf;\n}\n";
  s += "double k_log_d(double x) {\n"
       "  if (isnan(x) || x < 0.0lf) return k_nan_d();\n"
       "  if (x == 0.0lf) return -k_inf_d();\n"
       "  if (isinf(x)) return x;\n"
       "  int adj = 0;\n"
       "  if (x < 2.2250738585072014e-308lf) { x *= 18014398509481984.0lf; adj = -54; }\n"
       "  uvec2 u = unpackDouble2x32(x);\n"
       "  int e = int((u.y >> 20) & 0x7ffu) - 1023 + adj;\n"
       "  double m = packDouble2x32(uvec2(u.x, (u.y & 0x000fffffu) | 0x3ff00000u));\n"
       "  if (m > 1.4142135623730951lf) { m *= 0.5lf; e += 1; }\n"
       "  double s = (m - 1.0lf) / (m + 1.0lf);\n"
       "  double z = s * s;\n"
       "  double p = " +
       horner(
           "z", 12, [](int j) { return 1.0 / (2 * j + 1); }, dlit) +
       ";\n"
       "  return double(e) * 6.93147180369123816490e-01lf + (2.0lf * s * p + double(e) * "
       "1.90821492927058770002e-10lf);\n}\n";
  auto sin_c = [](int j) { return (j % 2 ? -1.0 : 1.0) * inv_fact(2 * j + 1); };
  auto cos_c = [](int j) { return (j % 2 ? -1.0 : 1.0) * inv_fact(2 * j); };
  s += "double k_sincos_d(double x, bool want_cos) {\n"
       "  if (isnan(x) || isinf(x)) return k_nan_d();\n"
       "  double k = floor(x * 0.63661977236758134lf + 0.5lf);\n"
       "  double r = ((x - k * 1.57079632673412561417e+00lf) - k * 6.07710050630396597660e-11lf)"
       " - k * 2.02226624879595063154e-21lf;\n"
       "  double z = r * r;\n"
       "  double sn = r * (" +
       horner("z", 10, sin_c, dlit) + ");\n  double cs = " + horner("z", 11, cos_c, dlit) +
       ";\n"
       "  int q = (int(mod(k, 4.0lf)) + (want_cos ? 1 : 0)) & 3;\n"
       "  return q == 0 ? sn : q == 1 ? cs : q == 2 ? -sn : -cs;\n}\n";
  s += R"(double k_sin_d(double x) { return k_sincos_d(x, false); }
double k_cos_d(double x) { return k_sincos_d(x, true); }
double k_tanh_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a > 22.0lf) return x < 0.0lf ? -1.0lf : 1.0lf;
  double e = k_expm1_d(2.0lf * a);
  double t = e / (e + 2.0lf);
  return x < 0.0lf ? -t : t;
}
double k_sigmoid_d(double x) { return 1.0lf / (1.0lf + k_exp_d(-x)); }
double k_erf_d(double x) {
  if (isnan(x)) return x;
  double a = abs(x);
  if (a >= 6.0lf) return x < 0.0lf ? -1.0lf : 1.0lf;
  double z = a * a, term = a, sum = a;
  for (int n = 1; n < 400; ++n) {
    term *= 2.0lf * z / double(2 * n + 1);
    sum += term;
    if (term <= sum * 1e-17lf) break;
  }
  double r = 1.1283791670955126lf * k_exp_d(-z) * sum;
  return x < 0.0lf ? -r : r;
}
double k_pow_d(double a, double b) {
  if (b == 0.0lf || a == 1.0lf) return 1.0lf;
  if (isnan(a) || isnan(b)) return a + b;
  bool bint = floor(b) == b;
  bool odd = bint && abs(b) < 9007199254740992.0lf && mod(b, 2.0lf) == 1.0lf;
  if (a == 0.0lf) return b > 0.0lf ? (odd ? a : 0.0lf) : (odd && a < 0.0lf ? -k_inf_d() : k_inf_d());
  if (isinf(a)) return b > 0.0lf ? (odd ? a : k_inf_d()) : (odd ? 1.0lf / a : 0.0lf);
  if (a < 0.0lf && !bint) return k_nan_d();
  double m = abs(a);
  if (m == 1.0lf) return odd && a < 0.0lf ? -1.0lf : 1.0lf;
  if (isinf(b)) return (m > 1.0lf) == (b > 0.0lf) ? k_inf_d() : 0.0lf;
  double r = k_exp_d(b * k_log_d(m));
  return a < 0.0lf && odd ? -r : r;
}
)";
  return s;
}

}  // namespace

std::string glsl_prelude(bool float64, bool int64) {
  std::string s = kCommon;
  if (int64) s += kInt64;
  if (float64) s += float64_math();
  s += float32_math(float64);
  return s;
}

}  // namespace kiln::vulkan
