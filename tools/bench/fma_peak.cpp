#include "tools/bench/fma_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

namespace kiln::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Twelve independent chains hide the FMA latency (4 cycles x 2 pipes needs >= 8 in flight);
// named variables rather than an array keep them in registers (an array indexed in a loop can
// live in memory, and then each FMA waits for a store and a load).
#define KILN_FMA12(FMA)                                                                 \
  for (long i = 0; i < iters; ++i) {                                                    \
    a0 = FMA(a0, x, y), a1 = FMA(a1, x, y), a2 = FMA(a2, x, y), a3 = FMA(a3, x, y);     \
    a4 = FMA(a4, x, y), a5 = FMA(a5, x, y), a6 = FMA(a6, x, y), a7 = FMA(a7, x, y);     \
    a8 = FMA(a8, x, y), a9 = FMA(a9, x, y), a10 = FMA(a10, x, y), a11 = FMA(a11, x, y); \
  }

#define KILN_FMA_BODY(V, SET, FMA, ADD, SUM)                                                   \
  V a0 = SET(1), a1 = SET(2), a2 = SET(3), a3 = SET(4), a4 = SET(5), a5 = SET(6), a6 = SET(7); \
  V a7 = SET(8), a8 = SET(9), a9 = SET(10), a10 = SET(11), a11 = SET(12);                      \
  V x = SET(0.9999), y = SET(1e-7);                                                            \
  KILN_FMA12(FMA)                                                                              \
  V s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                     \
  s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)));                                                 \
  return SUM(s);

#define KILN_FIRST_LANE(v) static_cast<double>((v)[0])

// GCC 12 calls the deliberately undefined vector inside its own _mm512_reduce_add_* (from
// _mm256_undefined_pd) uninitialised once inlined here (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"), noinline)) double fma512_f32(long iters) {
  KILN_FMA_BODY(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_reduce_add_ps)
}
__attribute__((target("avx512f"), noinline)) double fma512_f64(long iters) {
  KILN_FMA_BODY(__m512d, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd, _mm512_reduce_add_pd)
}
#pragma GCC diagnostic pop
__attribute__((target("avx2,fma"), noinline)) double fma256_f32(long iters) {
  KILN_FMA_BODY(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, KILN_FIRST_LANE)
}
__attribute__((target("avx2,fma"), noinline)) double fma256_f64(long iters) {
  KILN_FMA_BODY(__m256d, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd, KILN_FIRST_LANE)
}
// x86-64 without FMA: a multiply and an add (still two flops per lane).
#define KILN_MULADD_PS(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define KILN_MULADD_PD(a, b, c) _mm_add_pd(_mm_mul_pd(a, b), c)
__attribute__((noinline)) double sse_f32(long iters) {
  KILN_FMA_BODY(__m128, _mm_set1_ps, KILN_MULADD_PS, _mm_add_ps, KILN_FIRST_LANE)
}
__attribute__((noinline)) double sse_f64(long iters) {
  KILN_FMA_BODY(__m128d, _mm_set1_pd, KILN_MULADD_PD, _mm_add_pd, KILN_FIRST_LANE)
}

}  // namespace

FmaKernel fma_kernel(bool f64) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return f64 ? FmaKernel{fma512_f64, 8, "AVX-512"} : FmaKernel{fma512_f32, 16, "AVX-512"};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return f64 ? FmaKernel{fma256_f64, 4, "AVX2"} : FmaKernel{fma256_f32, 8, "AVX2"};
  return f64 ? FmaKernel{sse_f64, 2, "SSE2"} : FmaKernel{sse_f32, 4, "SSE2"};
}

double fma_gflops(bool f64, int threads, int trials) {
  // ~2 ms per trial at a few GHz: short enough that many trials run undisturbed, long enough
  // (millions of cycles) that starting the threads is a small part of it.
  const long iters = 500'000;
  FmaKernel k = fma_kernel(f64);
  threads = std::max(1, threads);
  double best = 1e30;
  for (int r = 0; r < std::max(1, trials); ++r) {
    std::vector<std::thread> pool;
    auto t0 = Clock::now();
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        volatile double sink = k.fn(iters);
        (void)sink;
      });
    for (auto& t : pool) t.join();
    best = std::min(best, seconds_since(t0));
  }
  return 12.0 * 2 * k.lanes * double(iters) * threads / best / 1e9;
}

double clock_ghz(int trials) {
  const long n = 2'000'000;
  double best = 1e30;
  for (int r = 0; r < std::max(1, trials); ++r) {
    long x = 3, left = n;
    auto t0 = Clock::now();
    asm volatile(
        "1:\n imul %0, %0\n imul %0, %0\n imul %0, %0\n imul %0, %0\n sub $4, %1\n jnz 1b\n"
        : "+r"(x), "+r"(left));
    best = std::min(best, seconds_since(t0));
  }
  return 3.0 * n / best / 1e9;
}

}  // namespace kiln::bench
