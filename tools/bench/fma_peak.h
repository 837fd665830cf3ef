// The float32/float64 FMA peak of this machine, measured: a register-blocked loop of independent
// vector multiply-adds on the widest vectors the CPU has, on as many threads as asked. The one
// routine `kiln bench` (its compute bound) and benchmarks/bench_matmul.cpp (% of peak) use.
#pragma once

namespace kiln::bench {

struct FmaKernel {
  double (*fn)(long iters);  // runs 12 independent FMA chains `iters` times; returns their sum
  int lanes;                 // elements per vector
  const char* isa;           // "AVX-512", "AVX2" or "SSE2" (no FMA: a multiply and an add)
};

// The kernel for the widest vectors this CPU supports (checked at run time).
FmaKernel fma_kernel(bool f64);

// GFLOP/s of `threads` threads each running fma_kernel(f64) for a few milliseconds; the fastest
// of `trials` (on a shared machine other tenants take cores for milliseconds at a time, and the
// fastest trial is one they left alone). A trial cannot run faster than the cores can, so the
// fastest is the least disturbed, never an overestimate.
double fma_gflops(bool f64, int threads, int trials = 40);

// GHz a core ran at: a chain of dependent 64-bit imuls (3 cycles each on current x86).
double clock_ghz(int trials = 40);

}  // namespace kiln::bench
