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

// The same with sixteen floats (eight doubles) a vector where the host has AVX-512. Measured
// on an AMD Zen 5 host (docs/performance.md), where the scan is bound by its shuffles and adds:
// - Floats: two shift-and-add steps inside each 128-bit lane by vpermilps (zero-masked), which
//   issues on more pipes than a byte shift or a cross-lane permute (~13% faster in cache than
//   byte shifts); then each odd lane takes its even neighbour's last, then the upper half the
//   lower's last. Doubles: the first step inside each lane the same way, then two cross-lane
//   steps (~10% faster than three whole-vector shifts).
// - The carry is added as a fused multiply-add by 1 (bit-identical to the add: the product is
//   exact), which runs on the FMA pipes beside the adds and shuffles of the prefix (~5%).
// Tried and slower here: 16x16 transposes scanning sixteen segments down the lanes, and
// prefixes over the lanes' totals gathered four vectors at a time (fewer cross-lane shuffles,
// longer dependency chains); prefetching the input 2 KB ahead (up to ~10% faster for rows that
// stay in L3, ~10% slower for rows read from memory).
// (The zero-masked forms of the cross-lane shuffles: GCC 12 warns that the plain ones read an
// uninitialised pass-through.)
__attribute__((target("avx512f,avx512bw"))) inline __m512 prefix16(__m512 v) {
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(0xEEEE, v, _MM_SHUFFLE(2, 1, 0, 0)));
  v = _mm512_add_ps(v, _mm512_maskz_permute_ps(0xCCCC, v, _MM_SHUFFLE(1, 0, 0, 0)));
  const __m512i lane3 = _mm512_set_epi32(11, 11, 11, 11, 0, 0, 0, 0, 3, 3, 3, 3, 0, 0, 0, 0);
  v = _mm512_add_ps(v, _mm512_maskz_permutexvar_ps(0xF0F0, lane3, v));
  return _mm512_add_ps(v, _mm512_maskz_permutexvar_ps(0xFF00, _mm512_set1_epi32(7), v));
}
__attribute__((target("avx512f"))) inline __m512 last16(__m512 v) {
  return _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_set1_epi32(15), v);
}
__attribute__((target("avx512f"))) inline __m512 add_on_fma(__m512 a, __m512 b) {
  return _mm512_fmadd_ps(a, _mm512_set1_ps(1.0f), b);
}
__attribute__((target("avx512f"))) inline __m512d prefix8d(__m512d v) {
  v = _mm512_add_pd(v, _mm512_maskz_permute_pd(0xAA, v, 0x00));
  const __m512i lane1 = _mm512_set_epi64(5, 5, 0, 0, 1, 1, 0, 0);
  v = _mm512_add_pd(v, _mm512_maskz_permutexvar_pd(0xCC, lane1, v));
  return _mm512_add_pd(v, _mm512_maskz_permutexvar_pd(0xF0, _mm512_set1_epi64(3), v));
}
__attribute__((target("avx512f"))) inline __m512d last8d(__m512d v) {
  return _mm512_maskz_permutexvar_pd(0xFF, _mm512_set1_epi64(7), v);
}
__attribute__((target("avx512f"))) inline __m512d add_on_fma(__m512d a, __m512d b) {
  return _mm512_fmadd_pd(a, _mm512_set1_pd(1.0), b);
}

__attribute__((target("avx512f,avx512bw"))) float sum_scan_avx512(const float* x, float* out,
                                                                  int64_t n, float carry) {
  __m512 c = _mm512_set1_ps(carry);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m512 a = prefix16(_mm512_loadu_ps(x + i)), b = prefix16(_mm512_loadu_ps(x + i + 16));
    b = _mm512_add_ps(b, last16(a));
    __m512 s = last16(b);
    _mm512_storeu_ps(out + i, add_on_fma(a, c));
    _mm512_storeu_ps(out + i + 16, add_on_fma(b, c));
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
    _mm512_storeu_pd(out + i, add_on_fma(a, c));
    _mm512_storeu_pd(out + i + 8, add_on_fma(b, c));
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
// With AVX-512, four accumulators: two AVX2 ones leave the sum bound by the latency of their
// adds (~22 floats per ns here, under the ~30 that one core reads from L3).
__attribute__((target("avx512f"))) float total_avx512(const float* x, int64_t n) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    s0 = _mm512_add_ps(s0, _mm512_loadu_ps(x + i));
    s1 = _mm512_add_ps(s1, _mm512_loadu_ps(x + i + 16));
    s2 = _mm512_add_ps(s2, _mm512_loadu_ps(x + i + 32));
    s3 = _mm512_add_ps(s3, _mm512_loadu_ps(x + i + 48));
  }
  // (Through memory: GCC 12 warns inside _mm512_reduce_add_ps.)
  alignas(64) float l[16];
  _mm512_store_ps(l, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  for (int w = 8; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) l[k] += l[k + w];
  float r = l[0];
  for (; i < n; ++i) r += x[i];
  return r;
}
__attribute__((target("avx512f"))) double total_avx512(const double* x, int64_t n) {
  __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm512_add_pd(s0, _mm512_loadu_pd(x + i));
    s1 = _mm512_add_pd(s1, _mm512_loadu_pd(x + i + 8));
    s2 = _mm512_add_pd(s2, _mm512_loadu_pd(x + i + 16));
    s3 = _mm512_add_pd(s3, _mm512_loadu_pd(x + i + 24));
  }
  alignas(64) double l[8];
  _mm512_store_pd(l, _mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
  for (int w = 4; w >= 1; w /= 2)
    for (int k = 0; k < w; ++k) l[k] += l[k + w];
  double r = l[0];
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
float sum_total(const float* x, int64_t n, ScanIsa isa) {
  return isa == ScanIsa::Avx512 ? total_avx512(x, n) : total_avx2(x, n);
}
double sum_total(const double* x, int64_t n, ScanIsa isa) {
  return isa == ScanIsa::Avx512 ? total_avx512(x, n) : total_avx2(x, n);
}

}  // namespace kiln::cpu
