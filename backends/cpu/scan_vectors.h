// Running sums of contiguous float32/float64 rows in vector registers, for the cpu backend's
// scans (native_ops.cpp): an AVX-512 form and an AVX2 form, used as the host allows. Output k
// is the running value (carry plus every earlier vector's total) plus the prefix within k's
// vector: a reordering of the sequential sum, which the scans' tests bound.
#pragma once

#include <cstdint>

namespace kiln::cpu {

enum class ScanIsa { None, Avx2, Avx512 };

// The widest form this host runs (AVX-512 needs F and BW).
ScanIsa host_scan_isa();

// Inclusive running sums of x[0, n) into out, starting from `carry`; returns the last (carry
// when n is 0). `isa` must be one the host runs, and not None.
float sum_scan(const float* x, float* out, int64_t n, float carry, ScanIsa isa);
double sum_scan(const double* x, double* out, int64_t n, double carry, ScanIsa isa);

// The total of x[0, n) from partial sums in vectors: two of eight floats (four doubles) with
// AVX2, four of sixteen (eight) with AVX-512. `isa` as for sum_scan.
float sum_total(const float* x, int64_t n, ScanIsa isa);
double sum_total(const double* x, int64_t n, ScanIsa isa);

}  // namespace kiln::cpu
