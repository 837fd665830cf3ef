#include "backends/cpu/scan_vectors.h"

#include <immintrin.h>

namespace kiln::cpu {

namespace {

// Inclusive running sums of x[0, n) into out from `carry`, returning the last: eight floats
// (four doubles) at a time where the host has AVX2, sixteen (eight) where it has AVX-512. Each
// vector's prefix by log-step shift-and-add; the running value (carry plus every earlier
// vector's total) is one add per two vectors, the two vectors' total found beside it, off that
// chain. So output k is running + prefix within its vector: the order the tests accept.
__attribute__((target("avx2"))) inline __m256 prefix8(__m256 v) {
  v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(v), 4)));
  v = _mm256_add_ps(v, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(v), 8)));
  __m256 low = _mm256_permute_ps(v, 0xFF);  // each half's total, in every lane of that half
  return _mm256_add_ps(v, _mm256_permute2f128_ps(low, low, 0x08));  // low half's into the high
}
__attribute__((target("avx2"))) inline __m256 last8(__m256 v) {
  __m256 t = _mm256_permute_ps(v, 0xFF);
  return _mm256_permute2f128_ps(t, t, 0x11);
}
__attribute__((target("avx2"))) inline __m256d prefix4(__m256d v) {
  v = _mm256_add_pd(v, _mm256_castsi256_pd(_mm256_slli_si256(_mm256_castpd_si256(v), 8)));
  __m256d low = _mm256_permute_pd(v, 0xF);
  return _mm256_add_pd(v, _mm256_permute2f128_pd(low, low, 0x08));
}
__attribute__((target("avx2"))) inline __m256d last4(__m256d v) {
  __m256d t = _mm256_permute_pd(v, 0xF);
  return _mm256_permute2f128_pd(t, t, 0x11);
}

__attribute__((target("avx2"))) float sum_scan_avx2(const float* x, float* out, int64_t n,
                                                    float carry) {
  __m256 c = _mm256_set1_ps(carry);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 a = prefix8(_mm256_loadu_ps(x + i)), b = prefix8(_mm256_loadu_ps(x + i + 8));
    b = _mm256_add_ps(b, last8(a));
    __m256 s = last8(b);
    a = _mm256_add_ps(a, c);
    b = _mm256_add_ps(b, c);
    _mm256_storeu_ps(out + i, a);
    _mm256_storeu_ps(out + i + 8, b);
    c = _mm256_add_ps(c, s);
  }
  float acc = _mm256_cvtss_f32(c);
  for (; i < n; ++i) out[i] = acc = acc + x[i];
  return acc;
}
__attribute__((target("avx2"))) double sum_scan_avx2(const double* x, double* out, int64_t n,
                                                     double carry) {
  __m256d c = _mm256_set1_pd(carry);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256d a = prefix4(_mm256_loadu_pd(x + i)), b = prefix4(_mm256_loadu_pd(x + i + 4));
    b = _mm256_add_pd(b, last4(a));
    __m256d s = last4(b);
    a = _mm256_add_pd(a, c);
    b = _mm256_add_pd(b, c);
    _mm256_storeu_pd(out + i, a);
    _mm256_storeu_pd(out + i + 4, b);
    c = _mm256_add_pd(c, s);
  }
  double acc = _mm256_cvtsd_f64(c);
  for (; i < n; ++i) out[i] = acc = acc + x[i];
  return acc;
}

// The same with sixteen floats (eight doubles) a vector where the host has AVX-512. Floats:
// two shift-and-add steps inside each 128-bit lane, then each odd lane takes its even
// neighbour's last, then the upper half the lower's last (cheaper shuffles than four
// whole-vector shifts: ~10% here); doubles: three whole-vector shift-and-add steps. (The
// zero-masked forms of the shuffles: GCC 12 warns that the plain ones read an uninitialised
// pass-through.)
__attribute__((target("avx512f,avx512bw"))) inline __m512 prefix16(__m512 v) {
  v = _mm512_add_ps(v, _mm512_castsi512_ps(_mm512_bslli_epi128(_mm512_castps_si512(v), 4)));
  v = _mm512_add_ps(v, _mm512_castsi512_ps(_mm512_bslli_epi128(_mm512_castps_si512(v), 8)));
  const __m512i lane3 = _mm512_set_epi32(11, 11, 11, 11, 0, 0, 0, 0, 3, 3, 3, 3, 0, 0, 0, 0);
  v = _mm512_add_ps(v, _mm512_maskz_permutexvar_ps(0xF0F0, lane3, v));
  return _mm512_add_ps(v, _mm512_maskz_permutexvar_ps(0xFF00, _mm512_set1_epi32(7), v));
}
__attribute__((target("avx512f"))) inline __m512 last16(__m512 v) {
  return _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_set1_epi32(15), v);
}
__attribute__((target("avx512f"))) inline __m512d prefix8d(__m512d v) {
  __m512i z = _mm512_setzero_si512();
  v = _mm512_add_pd(
      v, _mm512_castsi512_pd(_mm512_maskz_alignr_epi64(0xFF, _mm512_castpd_si512(v), z, 7)));
  v = _mm512_add_pd(
      v, _mm512_castsi512_pd(_mm512_maskz_alignr_epi64(0xFF, _mm512_castpd_si512(v), z, 6)));
  return _mm512_add_pd(
      v, _mm512_castsi512_pd(_mm512_maskz_alignr_epi64(0xFF, _mm512_castpd_si512(v), z, 4)));
}
__attribute__((target("avx512f"))) inline __m512d last8d(__m512d v) {
  return _mm512_maskz_permutexvar_pd(0xFF, _mm512_set1_epi64(7), v);
}

__attribute__((target("avx512f,avx512bw"))) float sum_scan_avx512(const float* x, float* out,
                                                                  int64_t n, float carry) {
  __m512 c = _mm512_set1_ps(carry);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a = prefix16(_mm512_loadu_ps(x + i)), b = prefix16(_mm512_loadu_ps(x + i + 16));
    b = _mm512_add_ps(b, last16(a));
    __m512 s = last16(b);
    a = _mm512_add_ps(a, c);
    b = _mm512_add_ps(b, c);
    _mm512_storeu_ps(out + i, a);
    _mm512_storeu_ps(out + i + 16, b);
    c = _mm512_add_ps(c, s);
  }
  float acc = _mm512_cvtss_f32(c);
  for (; i < n; ++i) out[i] = acc = acc + x[i];
  return acc;
}
__attribute__((target("avx512f"))) double sum_scan_avx512(const double* x, double* out, int64_t n,
                                                          double carry) {
  __m512d c = _mm512_set1_pd(carry);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512d a = prefix8d(_mm512_loadu_pd(x + i)), b = prefix8d(_mm512_loadu_pd(x + i + 8));
    b = _mm512_add_pd(b, last8d(a));
    __m512d s = last8d(b);
    a = _mm512_add_pd(a, c);
    b = _mm512_add_pd(b, c);
    _mm512_storeu_pd(out + i, a);
    _mm512_storeu_pd(out + i + 8, b);
    c = _mm512_add_pd(c, s);
  }
  double acc = _mm512_cvtsd_f64(c);
  for (; i < n; ++i) out[i] = acc = acc + x[i];
  return acc;
}

// A chunk's total: sixteen (eight) partial sums in two vectors, added pairwise at the end.
__attribute__((target("avx2"))) float total_avx2(const float* x, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(x + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(x + i + 8));
  }
  alignas(32) float l[8];
  _mm256_store_ps(l, _mm256_add_ps(s0, s1));
  float r = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
  for (; i < n; ++i) r += x[i];
  return r;
}
__attribute__((target("avx2"))) double total_avx2(const double* x, int64_t n) {
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 = _mm256_add_pd(s0, _mm256_loadu_pd(x + i));
    s1 = _mm256_add_pd(s1, _mm256_loadu_pd(x + i + 4));
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, _mm256_add_pd(s0, s1));
  double r = (l[0] + l[1]) + (l[2] + l[3]);
  for (; i < n; ++i) r += x[i];
  return r;
}
}  // namespace

ScanIsa host_scan_isa() {
  static const ScanIsa isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
                                 ? ScanIsa::Avx512
                             : __builtin_cpu_supports("avx2") ? ScanIsa::Avx2
                                                              : ScanIsa::None;
  return isa;
}

float sum_scan(const float* x, float* out, int64_t n, float carry, ScanIsa isa) {
  return isa == ScanIsa::Avx512 ? sum_scan_avx512(x, out, n, carry)
                                : sum_scan_avx2(x, out, n, carry);
}
double sum_scan(const double* x, double* out, int64_t n, double carry, ScanIsa isa) {
  return isa == ScanIsa::Avx512 ? sum_scan_avx512(x, out, n, carry)
                                : sum_scan_avx2(x, out, n, carry);
}
float sum_total(const float* x, int64_t n) { return total_avx2(x, n); }
double sum_total(const double* x, int64_t n) { return total_avx2(x, n); }

}  // namespace kiln::cpu
