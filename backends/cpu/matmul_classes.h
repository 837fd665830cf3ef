// Which library runs a float matmul on the cpu backend, chosen by measuring this host (tune.h):
// each problem falls into a shape class whose representative problem (every size rounded to a
// power of two, then shrunk until it is quick to run, on as many threads as the caller may use)
// is timed once per host on every library that can run it: one thread's share of its tiles, on
// one thread, in CPU time (tune.h). KILN_MATMUL=onednn|openblas-gemm|
// openblas-gemv forces a library for debugging (kiln::Error where it cannot run a class); auto or
// unset measures. Integer dtypes have one implementation, the loop, and are not measured.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/tune.h"

namespace kiln::cpu {

struct MatmulClass {
  Dtype dtype = float32;  // float32 (float16 and bfloat16 run as float32) or float64
  int64_t batches = 1, m = 1, k = 1, n = 1;  // the representative problem: powers of two
  int threads = 1;

  std::string key() const;  // "matmul/f32/b1/256x1024x1024/t2"
  // "square", "skinny", "small", "batched", "matrix-vector", "vector-matrix" or "dot".
  std::string kind() const;
};

// Representatives stay under these (2^28 multiply-adds: ~1 ms at 500 GFLOP/s, ~10 ms at 50;
// 2^22 elements: 16 MiB of float32 per operand), so measuring a class stays short.
constexpr int kMaxWorkLog2 = 28, kMaxOperandLog2 = 22;

// The class of a float problem run on `threads` threads: each size (and the batch count) rounded
// to the nearest power of two, then the largest halved while the representative is over the
// limits above. A size of 1 stays 1 (matrix-vector shapes keep their own class).
MatmulClass matmul_class(const MatmulArgs& a, int threads);
std::optional<MatmulClass> parse_matmul_key(const std::string& key);

// The libraries that can run the class: OpenBLAS gemm always, gemv for matrix-vector shapes,
// oneDNN for float32 when built in.
std::vector<MatmulLibrary> matmul_candidates(const MatmulClass& c);

// "onednn", "openblas-gemm", "openblas-gemv", "loop": the ids the table and KILN_MATMUL use.
const char* library_id(MatmulLibrary lib);
MatmulLibrary library_from_id(const std::string& id);

// The process's matmul table (family "matmul", host: CPU model, OpenBLAS and its kernels,
// oneDNN, Kiln's version).
Tuner& matmul_tuner();

// Measures the class now on its representative problem and records the winner (`kiln tune`).
TuneResult tune_matmul_class(const MatmulClass& c);

// The classes `kiln tune` measures: bench_matmul's shapes (square, skinny, small, batched,
// matrix-vector; float32 and float64) on every thread, and each class already in the table;
// those with more than one candidate (float64 has only OpenBLAS gemm off matrix-vector shapes).
std::vector<MatmulClass> tune_classes();

}  // namespace kiln::cpu
