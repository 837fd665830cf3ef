// Hand-written baselines for the compile benchmark (see gelu_loop.cpp).
#pragma once

#include <cstdint>

void gelu_loop(const float* x, float* y, int64_t n);  // fused, vectorised, parallel
void copy_loop(const float* x, float* y, int64_t n);  // STREAM-style copy: the bandwidth floor
