#include "backends/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

#include "backends/cpu/buffer_pool.h"
#include "backends/cpu/gemm_tiles.h"
#include "graph/error.h"
#include "graph/float16.h"

#ifdef KILN_HAVE_ONEDNN
#include "backends/cpu/onednn_matmul.h"
#endif

namespace kiln::cpu {

// Which library runs a problem is measured per host (matmul_classes.h); bench_matmul prints
// every library's speed beside the one chosen.

namespace {

bool have_onednn_built() {
#ifdef KILN_HAVE_ONEDNN
  return true;
#else
  return false;
#endif
}

const char* onednn_missing_reason() {
#ifdef KILN_HAVE_ONEDNN
  return "";
#else
  return KILN_ONEDNN_MISSING;
#endif
}

// Where element (row, col) of an operand lies: row * row_stride + col * col_stride. A stored
// transposed (MatmulArgs::trans_a/trans_b) swaps the strides.
struct Strides {
  int64_t row, col;
};
Strides operand_strides(bool transposed, int64_t rows, int64_t cols) {
  return transposed ? Strides{1, rows} : Strides{cols, 1};
}

// C = A @ B for m x k and k x n integer operands (either stored transposed), accumulated with
// wrap-around in 64 bits and narrowed like scalar::wrap (ints truncate, bool is != 0). Loop
// order i-p-j keeps the inner loop contiguous when B is stored as it is read.
template <typename T>
void int_matmul(const T* A, const T* B, T* C, int64_t m, int64_t n, int64_t k, Strides sa,
                Strides sb) {
  std::vector<uint64_t> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0);
    for (int64_t p = 0; p < k; ++p) {
      uint64_t a = static_cast<uint64_t>(static_cast<int64_t>(A[i * sa.row + p * sa.col]));
      const T* b = B + p * sb.row;
      for (int64_t j = 0; j < n; ++j)
        row[j] += a * static_cast<uint64_t>(static_cast<int64_t>(b[j * sb.col]));
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
  Strides sa = operand_strides(a.trans_a, a.m, a.k), sb = operand_strides(a.trans_b, a.k, a.n);
  for (size_t i = 0; i < a.c_offsets.size(); ++i)
    int_matmul(A + a.a_offsets[i], B + a.b_offsets[i], C + a.c_offsets[i], a.m, a.n, a.k, sa, sb);
}

void loop_matmul(const MatmulArgs& a) {
  switch (a.dtype.kind) {
    case Dtype::Kind::Int8: return int_batches<int8_t>(a);
    case Dtype::Kind::Int32: return int_batches<int32_t>(a);
    case Dtype::Kind::Int64: return int_batches<int64_t>(a);
    case Dtype::Kind::UInt8: return int_batches<uint8_t>(a);
    case Dtype::Kind::UInt32: return int_batches<uint32_t>(a);
    case Dtype::Kind::UInt64: return int_batches<uint64_t>(a);
    case Dtype::Kind::Bool: return int_batches<bool>(a);
    default: throw_error("cpu backend: the integer matmul loop got ", a.dtype);
  }
}

// One tile C[r0:r0+rows, c0:c0+cols] of one batch: the operands at the batch's offsets, the
// tile's position, the full matrix sizes, and whether A or B is stored transposed.
template <typename T>
struct Tile {
  const T* A;
  const T* B;
  T* C;
  int64_t m, n, k;
  int64_t r0, c0, rows, cols;
  bool ta, tb;
  // The tile's first row of A and first column of B, and their leading dimensions: a transposed
  // operand's rows of the tile are columns of what is stored.
  const T* a() const { return ta ? A + r0 : A + r0 * k; }
  int64_t lda() const { return ta ? m : k; }
  const T* b() const { return tb ? B + c0 * k : B + c0; }
  int64_t ldb() const { return tb ? k : n; }
  T* c() const { return C + r0 * n + c0; }
};

CBLAS_TRANSPOSE flag(bool transposed) { return transposed ? CblasTrans : CblasNoTrans; }

// Single-threaded BLAS calls on a tile, typed for float and double.
void gemm(const Tile<float>& t) {
  cblas_sgemm(CblasRowMajor, flag(t.ta), flag(t.tb), t.rows, t.cols, t.k, 1.0f, t.a(), t.lda(),
              t.b(), t.ldb(), 0.0f, t.c(), t.n);
}
void gemm(const Tile<double>& t) {
  cblas_dgemm(CblasRowMajor, flag(t.ta), flag(t.tb), t.rows, t.cols, t.k, 1.0, t.a(), t.lda(),
              t.b(), t.ldb(), 0.0, t.c(), t.n);
}
// m == 1: c = B^T a over the tile's columns of B (a is k contiguous values, transposed or not);
// n == 1: c = A b over the tile's rows of A. gemv's own transpose flag reads a stored matrix
// either way round: B as stored is k x n (read transposed) or n x k (read as is).
template <typename T, typename Gemv>
void gemv_tile(const Tile<T>& t, Gemv gemv) {
  if (t.m == 1) {
    if (t.tb)
      gemv(CblasRowMajor, CblasNoTrans, t.cols, t.k, T(1), t.b(), t.ldb(), t.A, 1, T(0), t.c(), 1);
    else
      gemv(CblasRowMajor, CblasTrans, t.k, t.cols, T(1), t.b(), t.ldb(), t.A, 1, T(0), t.c(), 1);
  } else if (t.ta) {
    gemv(CblasRowMajor, CblasTrans, t.k, t.rows, T(1), t.a(), t.lda(), t.B, 1, T(0), t.c(), 1);
  } else {
    gemv(CblasRowMajor, CblasNoTrans, t.rows, t.k, T(1), t.a(), t.lda(), t.B, 1, T(0), t.c(), 1);
  }
}
void gemv(const Tile<float>& t) { gemv_tile(t, cblas_sgemv); }
void gemv(const Tile<double>& t) { gemv_tile(t, cblas_dgemv); }

void onednn_tile(const Tile<float>& t) {
#ifdef KILN_HAVE_ONEDNN
  onednn_sgemm({t.a(), t.lda(), t.ta}, {t.b(), t.ldb(), t.tb}, t.c(), t.n, t.rows, t.cols, t.k);
#endif
}

// Every tile of every batch through `kernel`, spread over TBB (gemm_tiles.h).
template <typename T, typename Kernel>
void tiled(const MatmulArgs& a, Kernel kernel) {
  auto* A = static_cast<const T*>(a.a->host_ptr());
  auto* B = static_cast<const T*>(a.b->host_ptr());
  auto* C = static_cast<T*>(a.c->host_ptr());
  int64_t batches = static_cast<int64_t>(a.c_offsets.size());
  TileGrid grid = plan_tiles(batches, a.m, a.n, a.k, threads_allowed());
  for_each_tile(batches, a.m, a.n, grid,
                [&](int64_t b, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
                  kernel(Tile<T>{A + a.a_offsets[b], B + a.b_offsets[b], C + a.c_offsets[b], a.m,
                                 a.n, a.k, r0, c0, rows, cols, a.trans_a, a.trans_b});
                });
}

// OpenBLAS runs single-threaded: Kiln's TBB workers run the tiles (gemm_tiles.h). The setting
// is process-wide, made once before Kiln's first BLAS call.
void blas_single_threaded() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

void blas_matmul(const MatmulArgs& a, bool vector) {
  // cblas takes int dimensions.
  if (std::max({a.m, a.n, a.k}) > INT32_MAX)
    throw_error("cpu backend: OpenBLAS takes dimensions up to 2^31-1, got ", a.m, "x", a.k, " @ ",
                a.k, "x", a.n);
  if (vector && a.m != 1 && a.n != 1)
    throw_error("cpu backend: gemv takes m == 1 or n == 1, got ", a.m, "x", a.k, " @ ", a.k, "x",
                a.n);
  blas_single_threaded();
  if (a.dtype == float32) {
    if (vector) return tiled<float>(a, [](const Tile<float>& t) { gemv(t); });
    return tiled<float>(a, [](const Tile<float>& t) { gemm(t); });
  }
  if (a.dtype == float64) {
    if (vector) return tiled<double>(a, [](const Tile<double>& t) { gemv(t); });
    return tiled<double>(a, [](const Tile<double>& t) { gemm(t); });
  }
  throw_error("cpu backend: OpenBLAS matmul takes float32 or float64, got ", a.dtype);
}

void onednn_matmul(const MatmulArgs& a) {
  if (!have_onednn())
    throw_error("cpu backend: oneDNN is not built into this Kiln (", onednn_missing_reason(), ")");
  if (a.dtype != float32) throw_error("cpu backend: oneDNN matmul takes float32, got ", a.dtype);
  tiled<float>(a, [](const Tile<float>& t) { onednn_tile(t); });
}

// float16 / bfloat16: the operands widened to float32 (exact), multiplied by `lib` as float32
// (float32 accumulation), and each result rounded to the 16-bit type (scalar_ops.h). The
// template arguments are the float16.h conversions of the type.
template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void widened(MatmulLibrary lib, const MatmulArgs& a) {
  auto widen = [](const Buffer& src) {
    size_t n = src.bytes() / 2;
    auto dst = BufferPool::instance()->allocate(std::max<size_t>(n, 1) * 4, Device{"cpu", 0});
    auto* in = static_cast<const uint16_t*>(const_cast<Buffer&>(src).host_ptr());
    auto* out = static_cast<float*>(dst->host_ptr());
    for (size_t i = 0; i < n; ++i) out[i] = Widen(in[i]);
    return dst;
  };
  auto fa = widen(*a.a), fb = widen(*a.b);
  auto fc =
      BufferPool::instance()->allocate(std::max<size_t>(a.c->bytes() / 2, 1) * 4, Device{"cpu", 0});
  MatmulArgs f = a;
  f.dtype = float32;
  f.a = fa.get();
  f.b = fb.get();
  f.c = fc.get();
  matmul_with(lib, f);
  auto* from = static_cast<const float*>(fc->host_ptr());
  auto* to = static_cast<uint16_t*>(a.c->host_ptr());
  for (int64_t off : a.c_offsets)
    for (int64_t i = off; i < off + a.m * a.n; ++i) to[i] = Narrow(from[i]);
}

void half_matmul(MatmulLibrary lib, const MatmulArgs& a) {
  if (a.dtype == float16) return widened<half_bits_to_float, float_to_half_bits>(lib, a);
  return widened<bfloat16_bits_to_float, float_to_bfloat16_bits>(lib, a);
}

// Offsets and sizes must stay inside each buffer: the libraries would read or write past it
// (on TBB workers) instead of failing.
void check_fits(const char* what, const Buffer& b, const std::vector<int64_t>& offsets,
                int64_t elements, size_t element_size) {
  for (int64_t off : offsets)
    if (off < 0 || static_cast<uint64_t>(off + elements) * element_size > b.bytes())
      throw_error("cpu backend: matmul operand ", what, " at element offset ", off, " with ",
                  elements, " elements does not fit its buffer of ", b.bytes(), " bytes");
}

void check(const MatmulArgs& a) {
  for (Buffer* b : {a.a, a.b, a.c})
    if (!b || !b->host_ptr()) throw_error("cpu backend: matmul got a missing or non-host buffer");
  if (a.a_offsets.size() != a.c_offsets.size() || a.b_offsets.size() != a.c_offsets.size())
    throw_error("cpu backend: matmul offsets disagree (", a.a_offsets.size(), ", ",
                a.b_offsets.size(), ", ", a.c_offsets.size(), " batches)");
  if (a.m < 0 || a.n < 0 || a.k < 0)
    throw_error("cpu backend: matmul sizes must be >= 0, got ", a.m, "x", a.k, " @ ", a.k, "x",
                a.n);
  size_t es = a.dtype.size();
  check_fits("A", *a.a, a.a_offsets, a.m * a.k, es);
  check_fits("B", *a.b, a.b_offsets, a.k * a.n, es);
  check_fits("C", *a.c, a.c_offsets, a.m * a.n, es);
}

}  // namespace

const char* library_name(MatmulLibrary lib) {
  switch (lib) {
    case MatmulLibrary::OpenBlasGemm: return "OpenBLAS gemm";
    case MatmulLibrary::OpenBlasGemv: return "OpenBLAS gemv";
    case MatmulLibrary::OneDnn: return "oneDNN";
    case MatmulLibrary::Loop: return "loop";
  }
  return "?";
}

bool have_onednn() { return have_onednn_built(); }

void matmul(const MatmulArgs& a) {
  check(a);  // before choosing: a bad problem must not start a measurement
  matmul_with(choose_matmul_library(a), a);
}

void matmul_with(MatmulLibrary lib, const MatmulArgs& a) {
  check(a);
  if (a.m == 0 || a.n == 0) return;
  if (a.k == 0 && a.dtype.is_float()) {  // an empty sum: zeros, without trusting library edge cases
    size_t es = a.dtype.size();
    for (int64_t off : a.c_offsets)
      std::memset(static_cast<char*>(a.c->host_ptr()) + off * es, 0, a.m * a.n * es);
    return;
  }
  if (a.dtype.is_half()) return half_matmul(lib, a);
  switch (lib) {
    case MatmulLibrary::OpenBlasGemm: return blas_matmul(a, false);
    case MatmulLibrary::OpenBlasGemv: return blas_matmul(a, true);
    case MatmulLibrary::OneDnn: return onednn_matmul(a);
    case MatmulLibrary::Loop: return loop_matmul(a);
  }
}

int64_t onednn_primitives_created() {
#ifdef KILN_HAVE_ONEDNN
  return onednn_primitive_count();
#else
  return 0;
#endif
}

std::string matmul_libraries() {
  std::ostringstream s;
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21 Haswell".
  std::istringstream config(openblas_get_config());
  std::string name, version;
  config >> name >> version;
  s << "matmul: ";
#ifdef KILN_HAVE_ONEDNN
  s << onednn_version() << " (float32), ";
#endif
  s << name << " " << version << " " << openblas_get_corename() << ", tiled over TBB";
  if (!have_onednn()) s << " (oneDNN not built in: " << onednn_missing_reason() << ")";
  return s.str();
}

}  // namespace kiln::cpu
