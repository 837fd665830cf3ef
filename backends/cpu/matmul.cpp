#include "backends/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "graph/error.h"

namespace kiln::cpu {

namespace {

// C = A @ B for m x k and k x n row-major integer operands, accumulated with wrap-around in
// 64 bits and narrowed like scalar::wrap (int32 truncates, bool is != 0). Loop order i-p-j keeps
// the inner loop contiguous.
template <typename T>
void int_matmul(const T* A, const T* B, T* C, int64_t m, int64_t n, int64_t k) {
  std::vector<uint64_t> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0);
    for (int64_t p = 0; p < k; ++p) {
      uint64_t a = static_cast<uint64_t>(static_cast<int64_t>(A[i * k + p]));
      const T* b = B + p * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += a * static_cast<uint64_t>(static_cast<int64_t>(b[j]));
    }
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_same_v<T, bool>)
        C[i * n + j] = row[j] != 0;
      else
        C[i * n + j] = static_cast<T>(row[j]);
    }
  }
}

template <typename T>
void int_batches(const MatmulArgs& a) {
  auto* A = static_cast<const T*>(a.a->host_ptr());
  auto* B = static_cast<const T*>(a.b->host_ptr());
  auto* C = static_cast<T*>(a.c->host_ptr());
  for (size_t i = 0; i < a.c_offsets.size(); ++i)
    int_matmul(A + a.a_offsets[i], B + a.b_offsets[i], C + a.c_offsets[i], a.m, a.n, a.k);
}

}  // namespace

void matmul(const MatmulArgs& a) {
  for (Buffer* b : {a.a, a.b, a.c})
    if (!b || !b->host_ptr()) throw_error("cpu backend: matmul got a missing or non-host buffer");
  if (a.a_offsets.size() != a.c_offsets.size() || a.b_offsets.size() != a.c_offsets.size())
    throw_error("cpu backend: matmul offsets disagree (", a.a_offsets.size(), ", ",
                a.b_offsets.size(), ", ", a.c_offsets.size(), " batches)");
  if (a.m == 0 || a.n == 0) return;
  // BLAS wants leading dimensions >= 1 even for empty operands; k == 0 with beta 0 zeroes C.
  if (a.k == 0 && a.dtype.is_float()) {  // an empty sum: zeros, without trusting BLAS edge cases
    size_t es = a.dtype.size();
    for (int64_t off : a.c_offsets)
      std::memset(static_cast<char*>(a.c->host_ptr()) + off * es, 0, a.m * a.n * es);
    return;
  }
  int m = static_cast<int>(a.m), n = static_cast<int>(a.n), k = static_cast<int>(a.k);
  int lda = std::max(k, 1), ldb = std::max(n, 1), ldc = std::max(n, 1);
  switch (a.dtype.kind) {
    case Dtype::Kind::Float32: {
      auto* A = static_cast<const float*>(a.a->host_ptr());
      auto* B = static_cast<const float*>(a.b->host_ptr());
      auto* C = static_cast<float*>(a.c->host_ptr());
      for (size_t i = 0; i < a.c_offsets.size(); ++i)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, A + a.a_offsets[i],
                    lda, B + a.b_offsets[i], ldb, 0.0f, C + a.c_offsets[i], ldc);
      break;
    }
    case Dtype::Kind::Float64: {
      auto* A = static_cast<const double*>(a.a->host_ptr());
      auto* B = static_cast<const double*>(a.b->host_ptr());
      auto* C = static_cast<double*>(a.c->host_ptr());
      for (size_t i = 0; i < a.c_offsets.size(); ++i)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, A + a.a_offsets[i],
                    lda, B + a.b_offsets[i], ldb, 0.0, C + a.c_offsets[i], ldc);
      break;
    }
    case Dtype::Kind::Int32:
      int_batches<int32_t>(a);
      break;
    case Dtype::Kind::Int64:
      int_batches<int64_t>(a);
      break;
    case Dtype::Kind::Bool:
      int_batches<bool>(a);
      break;
  }
}

}  // namespace kiln::cpu
