// The hand-written baseline for bench_compile: gelu fused into one loop, vectorised with glibc's
// libmvec erff (this file alone is built with -ffast-math -fopenmp-simd -march=native), split
// into chunks on oneTBB exactly as a runtime would.
#include "gelu_loop.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <cmath>
#include <cstring>

namespace {
void gelu_range(const float* __restrict x, float* __restrict y, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) y[i] = x[i] * (1.0f + std::erf(x[i] * 0.70710678118f)) * 0.5f;
}
}  // namespace

void gelu_loop(const float* x, float* y, int64_t n) {
  oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<int64_t>(0, n, 1 << 16),
                            [&](const auto& r) { gelu_range(x, y, r.begin(), r.end()); });
}

void copy_loop(const float* x, float* y, int64_t n) {
  oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<int64_t>(0, n, 1 << 16), [&](const auto& r) {
    std::memcpy(y + r.begin(), x + r.begin(), (r.end() - r.begin()) * sizeof(float));
  });
}
