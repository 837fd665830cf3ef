// The cpu backend's matmul libraries (backends/cpu/matmul.h) against the reference backend:
// every library that can be chosen (oneDNN when built in, OpenBLAS gemm and gemv), forced on
// square, skinny, batched and broadcast-batch problems, plus the public op on the cpu device
// (1-D promotion, batch broadcasting) at sizes that reach each library; each library reading
// A, B or both stored transposed; the shape classes the choice is measured for
// (matmul_classes.h), and KILN_MATMUL forcing a library.
//
// Tolerance: operands are N(0,1) floats, so results are not exact. Any float GEMM, whatever its
// summation order or use of FMA, is within gamma_k * (|A||B|)_ij of the exact product, with
// gamma_k = k u / (1 - k u) and u = 2^-24 (float32) or 2^-53 (float64); the oracle, which
// accumulates in double and rounds once, adds at most u |want| on top.
#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/matmul_classes.h"
#include "backends/extension.h"
#include "kiln.h"

namespace kiln {
namespace {

using cpu::MatmulLibrary;

// One matmul problem with its operands, on both backends.
struct Problem {
  MatmulArgs args;  // buffers point at the cpu copies
  std::vector<double> a, b;
  std::shared_ptr<Buffer> ca, cb, cc, ra, rb, rc;
};

std::shared_ptr<Buffer> filled(Backend& be, Dtype d, const std::vector<double>& v) {
  auto buf = be.allocate(0, std::max<size_t>(1, v.size()) * d.size());
  if (d == float32) {
    std::vector<float> f(v.begin(), v.end());
    buf->write(f.data(), 0, f.size() * 4);
  } else {
    buf->write(v.data(), 0, v.size() * 8);
  }
  return buf;
}

std::vector<double> read_back(const Buffer& buf, Dtype d, size_t n) {
  std::vector<double> out(n);
  if (d == float32) {
    std::vector<float> f(n);
    buf.read(f.data(), 0, n * 4);
    std::copy(f.begin(), f.end(), out.begin());
  } else {
    buf.read(out.data(), 0, n * 8);
  }
  return out;
}

// a_batches / b_batches distinct operands; the batch offsets pick which each C batch uses.
Problem make_problem(Dtype d, int64_t m, int64_t n, int64_t k, int64_t a_batches, int64_t b_batches,
                     std::vector<int64_t> a_pick, std::vector<int64_t> b_pick, unsigned seed) {
  Problem p;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  p.a.resize(a_batches * m * k);
  p.b.resize(b_batches * k * n);
  for (double& x : p.a) x = d == float32 ? static_cast<float>(normal(rng)) : normal(rng);
  for (double& x : p.b) x = d == float32 ? static_cast<float>(normal(rng)) : normal(rng);
  MatmulArgs& a = p.args;
  a.dtype = d;
  a.m = m;
  a.n = n;
  a.k = k;
  for (size_t i = 0; i < a_pick.size(); ++i) {
    a.a_offsets.push_back(a_pick[i] * m * k);
    a.b_offsets.push_back(b_pick[i] * k * n);
    a.c_offsets.push_back(static_cast<int64_t>(i) * m * n);
  }
  Backend& cpu = backend_for(device("cpu"));
  Backend& ref = backend_for(device("reference"));
  size_t c_size = a_pick.size() * m * n;
  p.ca = filled(cpu, d, p.a);
  p.cb = filled(cpu, d, p.b);
  p.cc = filled(cpu, d, std::vector<double>(c_size, std::nan("")));
  p.ra = filled(ref, d, p.a);
  p.rb = filled(ref, d, p.b);
  p.rc = filled(ref, d, std::vector<double>(c_size, 0.0));
  a.a = p.ca.get();
  a.b = p.cb.get();
  a.c = p.cc.get();
  return p;
}

// A plain problem: `batches` independent products, or one shared operand.
Problem batched(Dtype d, int64_t m, int64_t n, int64_t k, int64_t batches, bool share_a = false,
                bool share_b = false, unsigned seed = 1) {
  std::vector<int64_t> ap, bp;
  for (int64_t i = 0; i < batches; ++i) {
    ap.push_back(share_a ? 0 : i);
    bp.push_back(share_b ? 0 : i);
  }
  return make_problem(d, m, n, k, share_a ? 1 : batches, share_b ? 1 : batches, ap, bp, seed);
}

void expect_matches_reference(MatmulLibrary lib, const Problem& p) {
  const MatmulArgs& a = p.args;
  cpu::matmul_with(lib, a);
  MatmulArgs r = a;
  r.a = p.ra.get();  // the operands as they are, whatever layout the cpu side read
  r.b = p.rb.get();
  r.c = p.rc.get();
  r.trans_a = r.trans_b = false;
  backend_for(device("reference")).create_queue(0)->enqueue_matmul(r);
  size_t n_out = a.c_offsets.size() * a.m * a.n;
  std::vector<double> got = read_back(*p.cc, a.dtype, n_out);
  std::vector<double> want = read_back(*p.rc, a.dtype, n_out);
  double u = a.dtype == float32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  double gamma = a.k * u / (1 - a.k * u);
  for (size_t bi = 0; bi < a.c_offsets.size(); ++bi)
    for (int64_t i = 0; i < a.m; ++i)
      for (int64_t j = 0; j < a.n; ++j) {
        double mag = 0;  // (|A||B|)_ij
        for (int64_t q = 0; q < a.k; ++q)
          mag += std::fabs(p.a[a.a_offsets[bi] + i * a.k + q] * p.b[a.b_offsets[bi] + q * a.n + j]);
        size_t e = a.c_offsets[bi] + i * a.n + j;
        ASSERT_NEAR(got[e], want[e], gamma * mag + u * std::fabs(want[e]))
            << cpu::library_name(lib) << " " << a.dtype << " " << a.m << "x" << a.k << "x" << a.n
            << " batch " << bi << " (" << i << ", " << j << ")";
      }
}

// The float32 libraries that can run a general (not matrix-vector) problem in this build.
std::vector<MatmulLibrary> gemm_libraries(Dtype d) {
  std::vector<MatmulLibrary> libs = {MatmulLibrary::OpenBlasGemm};
  if (d == float32 && cpu::have_onednn()) libs.push_back(MatmulLibrary::OneDnn);
  return libs;
}

TEST(CpuMatmul, SquareAndSkinnyShapesMatchReference) {
  struct Shape3 {
    int64_t m, n, k;
  };
  for (Dtype d : {float32, float64})
    for (Shape3 s : {Shape3{96, 96, 96}, Shape3{130, 70, 257}, Shape3{8, 300, 200},
                     Shape3{300, 200, 8}, Shape3{3, 5, 1000}, Shape3{2, 2, 2},
                     Shape3{333, 517, 129}})  // the last is cut into uneven tiles
      for (MatmulLibrary lib : gemm_libraries(d))
        expect_matches_reference(lib, batched(d, s.m, s.n, s.k, 1));
}

TEST(CpuMatmul, BatchesAndSharedOperandsMatchReference) {
  for (Dtype d : {float32, float64})
    for (MatmulLibrary lib : gemm_libraries(d)) {
      expect_matches_reference(lib, batched(d, 40, 50, 60, 3));               // one call
      expect_matches_reference(lib, batched(d, 40, 50, 60, 3, true, false));  // A shared
      expect_matches_reference(lib, batched(d, 40, 50, 60, 3, false, true));  // B shared
      // Broadcast batch (2, 1) x (1, 3): offsets that are not one stride, one call per batch.
      expect_matches_reference(
          lib, make_problem(d, 33, 17, 65, 2, 3, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2}, 5));
    }
}

TEST(CpuMatmul, MatrixVectorShapesMatchReference) {
  for (Dtype d : {float32, float64}) {
    std::vector<MatmulLibrary> libs = gemm_libraries(d);
    libs.push_back(MatmulLibrary::OpenBlasGemv);
    for (MatmulLibrary lib : libs) {
      expect_matches_reference(lib, batched(d, 1, 300, 500, 1));  // row vector @ matrix
      expect_matches_reference(lib, batched(d, 300, 1, 500, 1));  // matrix @ column vector
      expect_matches_reference(lib, batched(d, 1, 40, 70, 4, false, true));
      expect_matches_reference(lib, batched(d, 1, 1, 999, 2));
    }
    // Large enough to be cut into tiles (the oracle is slow: only the library the rule picks).
    expect_matches_reference(MatmulLibrary::OpenBlasGemv, batched(d, 1, 3001, 1000, 1));
    expect_matches_reference(MatmulLibrary::OpenBlasGemv, batched(d, 3001, 1, 1000, 1));
  }
}

// Each m x k (or k x n) block of `v` stored as its transpose.
std::vector<double> transposed_blocks(const std::vector<double>& v, int64_t rows, int64_t cols) {
  std::vector<double> t(v.size());
  for (size_t b = 0; b < v.size() / std::max<int64_t>(1, rows * cols); ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        t[b * rows * cols + j * rows + i] = v[b * rows * cols + i * cols + j];
  return t;
}

// `lib` reading A and/or B stored transposed (MatmulArgs::trans_a/trans_b) against the reference
// on the operands as they are (no flag): the oracle does not share the code under test. The
// reference reading the transposed storage must agree with itself bitwise (same summation).
void expect_transposed_matches_reference(MatmulLibrary lib, Problem p, bool ta, bool tb) {
  SCOPED_TRACE(std::string("transposed ") + (ta ? "a" : "") + (tb ? "b" : ""));
  const MatmulArgs plain = p.args;
  Backend& cpu = backend_for(device("cpu"));
  Backend& ref = backend_for(device("reference"));
  std::vector<double> sa = ta ? transposed_blocks(p.a, plain.m, plain.k) : p.a;
  std::vector<double> sb = tb ? transposed_blocks(p.b, plain.k, plain.n) : p.b;
  auto ta_buf = filled(cpu, plain.dtype, sa), tb_buf = filled(cpu, plain.dtype, sb);
  p.args.a = ta_buf.get();
  p.args.b = tb_buf.get();
  p.args.trans_a = ta;
  p.args.trans_b = tb;
  expect_matches_reference(lib, p);  // cpu flagged, reference plain: p.rc holds the plain result
  size_t n_out = plain.c_offsets.size() * plain.m * plain.n;
  std::vector<double> plain_ref = read_back(*p.rc, plain.dtype, n_out);
  MatmulArgs r = p.args;
  auto ra = filled(ref, plain.dtype, sa), rb = filled(ref, plain.dtype, sb);
  auto rc = filled(ref, plain.dtype, std::vector<double>(n_out, 0.0));
  r.a = ra.get();
  r.b = rb.get();
  r.c = rc.get();
  ref.create_queue(0)->enqueue_matmul(r);
  EXPECT_EQ(read_back(*rc, plain.dtype, n_out), plain_ref);
}

// Every library with A, B or both stored transposed: shapes cut into uneven tiles, batches with
// shared and broadcast operands, and both matrix-vector forms (gemv reads either layout).
TEST(CpuMatmul, TransposedOperandsMatchReference) {
  struct Shape3 {
    int64_t m, n, k;
  };
  for (Dtype d : {float32, float64})
    for (auto [ta, tb] : {std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
      for (MatmulLibrary lib : gemm_libraries(d)) {
        for (Shape3 s : {Shape3{150, 200, 131}, Shape3{130, 70, 257}, Shape3{3, 5, 1000}})
          expect_transposed_matches_reference(lib, batched(d, s.m, s.n, s.k, 1), ta, tb);
        expect_transposed_matches_reference(lib, batched(d, 40, 50, 60, 3, true, false), ta, tb);
        expect_transposed_matches_reference(
            lib, make_problem(d, 33, 17, 65, 2, 3, {0, 0, 0, 1, 1, 1}, {0, 1, 2, 0, 1, 2}, 5), ta,
            tb);
      }
      std::vector<MatmulLibrary> libs = gemm_libraries(d);
      libs.push_back(MatmulLibrary::OpenBlasGemv);
      for (MatmulLibrary lib : libs) {
        expect_transposed_matches_reference(lib, batched(d, 1, 300, 500, 1), ta, tb);
        expect_transposed_matches_reference(lib, batched(d, 300, 1, 500, 1), ta, tb);
        expect_transposed_matches_reference(lib, batched(d, 1, 40, 70, 4, false, true), ta, tb);
      }
      // Cut into tiles (the oracle is slow: gemv only).
      expect_transposed_matches_reference(MatmulLibrary::OpenBlasGemv, batched(d, 1, 3001, 300, 1),
                                          ta, tb);
      expect_transposed_matches_reference(MatmulLibrary::OpenBlasGemv, batched(d, 3001, 1, 300, 1),
                                          ta, tb);
    }
}

TEST(CpuMatmul, TilesCoverTheOutputAndStaySmallOnlyWhenWorkIs) {
  // Small work, or one thread: the whole matrix is one tile.
  cpu::TileGrid g = cpu::plan_tiles(1, 64, 64, 64, 2);
  EXPECT_EQ(g.rows, 64);
  EXPECT_EQ(g.cols, 64);
  g = cpu::plan_tiles(1, 1024, 1024, 1024, 1);
  EXPECT_EQ(g.rows, 1024);
  // The MLP's shapes on 2 threads: several tiles, vector-aligned columns, within bounds.
  for (auto [m, n, k] : {std::tuple{256, 4096, 1024}, std::tuple{256, 1024, 4096},
                         std::tuple{4096, 4096, 64}, std::tuple{1, 4096, 4096}}) {
    g = cpu::plan_tiles(1, m, n, k, 2);
    int64_t tiles = ((m + g.rows - 1) / g.rows) * ((n + g.cols - 1) / g.cols);
    EXPECT_GE(tiles, 2 * cpu::kTilesPerThread) << m << "x" << k << "x" << n;
    EXPECT_TRUE(g.cols == n || g.cols % 16 == 0) << g.cols;
    EXPECT_LE(g.rows, m);
    EXPECT_LE(g.cols, n);
  }
  // Many batches already give enough tiles.
  g = cpu::plan_tiles(64, 128, 128, 128, 2);
  EXPECT_EQ(g.rows, 128);
  EXPECT_EQ(g.cols, 128);
  // for_each_tile visits every element of every batch exactly once.
  std::vector<int> hits(3 * 37 * 301, 0);
  cpu::for_each_tile(3, 37, 301, cpu::TileGrid{16, 64},
                     [&](int64_t b, int64_t r0, int64_t c0, int64_t rows, int64_t cols) {
                       for (int64_t i = r0; i < r0 + rows; ++i)
                         for (int64_t j = c0; j < c0 + cols; ++j) hits[(b * 37 + i) * 301 + j]++;
                     });
  for (int h : hits) ASSERT_EQ(h, 1);
}

TEST(CpuMatmul, DevicesNameTheMatmulLibraries) {
  for (const DeviceInfo& d : devices())
    if (d.device.backend == "cpu") {
      EXPECT_NE(d.description.find("matmul: "), std::string::npos) << d.description;
      EXPECT_NE(d.description.find("OpenBLAS"), std::string::npos) << d.description;
      // Built with oneDNN, or saying why not.
      EXPECT_NE(d.description.find(cpu::have_onednn() ? "oneDNN 2." : "oneDNN not built in"),
                std::string::npos)
          << d.description;
    }
}

TEST(CpuMatmul, LibrariesRefuseWhatTheyCannotRun) {
  Problem d64 = batched(float64, 70, 70, 70, 1);
  EXPECT_THROW(cpu::matmul_with(MatmulLibrary::OneDnn, d64.args), Error);
  EXPECT_THROW(cpu::matmul_with(MatmulLibrary::OpenBlasGemv, d64.args), Error);  // not a vector
  // Offsets or sizes past a buffer raise instead of touching memory outside it.
  MatmulArgs past = d64.args;
  past.b_offsets = {1};
  EXPECT_THROW(cpu::matmul(past), Error);
  past = d64.args;
  past.m = 71;
  EXPECT_THROW(cpu::matmul(past), Error);
  if (!cpu::have_onednn()) {
    Problem f32 = batched(float32, 70, 70, 70, 1);
    try {
      cpu::matmul_with(MatmulLibrary::OneDnn, f32.args);
      ADD_FAILURE() << "oneDNN ran in a build without it";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not built"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuMatmul, OneDnnKeepsOnePrimitivePerShape) {
  if (!cpu::have_onednn()) GTEST_SKIP() << cpu::matmul_libraries();
  Problem p = batched(float32, 77, 88, 99, 1);
  cpu::matmul_with(MatmulLibrary::OneDnn, p.args);
  int64_t created = cpu::onednn_primitives_created();
  for (int i = 0; i < 3; ++i) cpu::matmul_with(MatmulLibrary::OneDnn, p.args);
  EXPECT_EQ(cpu::onednn_primitives_created(), created);
  Problem q = batched(float32, 77, 88, 100, 1);
  cpu::matmul_with(MatmulLibrary::OneDnn, q.args);
  EXPECT_EQ(cpu::onednn_primitives_created(), created + 1);
}

TEST(CpuMatmul, OneDnnUnderAThreadLimitAndFromManyThreads) {
  if (!cpu::have_onednn()) GTEST_SKIP() << cpu::matmul_libraries();
  {
    tbb::global_control one(tbb::global_control::max_allowed_parallelism, 1);
    expect_matches_reference(MatmulLibrary::OneDnn, batched(float32, 100, 90, 80, 2));
  }
  // Matmuls issued from several TBB threads at once (independent tasks of one plan do this).
  std::vector<Problem> ps;
  for (int i = 0; i < 6; ++i) ps.push_back(batched(float32, 64 + i, 96, 80 + 3 * i, 1));
  tbb::parallel_for(0, 6, [&](int i) { cpu::matmul_with(MatmulLibrary::OneDnn, ps[i].args); });
  for (int i = 0; i < 6; ++i) expect_matches_reference(MatmulLibrary::OneDnn, ps[i]);
}

// The public op on the cpu device (the rule picks the library) against the reference device.
template <typename T>
void expect_op_matches_reference(Dtype d, Shape as, Shape bs) {
  std::vector<T> got, av, bv;
  {
    StreamScope scope(device("cpu"));
    Array a = random::normal(as, d, random::key(3));
    Array b = random::normal(bs, d, random::key(4));
    got = matmul(a, b).template to_vector<T>();
    av = a.template to_vector<T>();
    bv = b.template to_vector<T>();
  }
  StreamScope scope(device("reference"));
  Array a = array(av, as, d), b = array(bv, bs, d);
  std::vector<T> want = matmul(a, b).template to_vector<T>();
  std::vector<T> mag = matmul(abs(a), abs(b)).template to_vector<T>();  // (|A||B|)_ij, rounded
  int64_t k = as.back();
  double u = d == float32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -53);
  double gamma = k * u / (1 - k * u);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], gamma * (1 + 2 * u) * mag[i] + u * std::fabs(want[i]))
        << d << " " << to_string(as) << " @ " << to_string(bs) << " element " << i;
}

TEST(CpuMatmul, PublicOpMatchesReferenceOnEveryPath) {
  // oneDNN-sized float32 (when built in): plain, batched, broadcast batch.
  expect_op_matches_reference<float>(float32, {70, 80}, {80, 90});
  expect_op_matches_reference<float>(float32, {3, 70, 80}, {3, 80, 90});
  expect_op_matches_reference<float>(float32, {2, 1, 70, 80}, {3, 80, 90});
  expect_op_matches_reference<float>(float32, {4, 70, 80}, {80, 90});
  // 1-D promotion: gemv either side, and a dot product.
  expect_op_matches_reference<float>(float32, {500}, {500, 300});
  expect_op_matches_reference<float>(float32, {300, 500}, {500});
  expect_op_matches_reference<float>(float32, {2, 300, 500}, {500});
  expect_op_matches_reference<float>(float32, {999}, {999});
  // Small float32 (OpenBLAS gemm) and float64 everywhere.
  expect_op_matches_reference<float>(float32, {5, 6}, {6, 7});
  expect_op_matches_reference<double>(float64, {70, 80}, {80, 90});
  expect_op_matches_reference<double>(float64, {2, 1, 30, 40}, {3, 40, 20});
  expect_op_matches_reference<double>(float64, {500}, {500, 300});
}

// float16 / bfloat16 run as float32 through the same libraries. Small integer operands make every
// float32 sum exact, so both sides round the same exact value to the 16-bit type: bitwise equal.
TEST(CpuMatmul, HalfTypesMatchReferenceOnEveryPath) {
  auto ints = [](const Shape& s, Dtype d, unsigned seed) {
    std::vector<float> v(shape_size(s));
    std::mt19937 rng(seed);
    for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 11) - 5);
    return astype(array(v, s, float32), d);
  };
  // Each library forced (KILN_MATMUL), and the measured choice.
  std::vector<const char*> forced = {"auto", "openblas-gemm"};
  if (cpu::have_onednn()) forced.push_back("onednn");
  const char* saved = std::getenv("KILN_MATMUL");
  std::string saved_value = saved ? saved : "";
  for (const char* lib : forced) {
    ::setenv("KILN_MATMUL", lib, 1);
    for (Dtype d : {float16, bfloat16})
      for (auto [as, bs] : {std::pair<Shape, Shape>{{70, 80}, {80, 90}},     // oneDNN-sized
                            std::pair<Shape, Shape>{{3, 70, 80}, {80, 90}},  // batched, B shared
                            std::pair<Shape, Shape>{{500}, {500, 300}},      // gemv
                            std::pair<Shape, Shape>{{5, 6}, {6, 7}}}) {      // OpenBLAS gemm
        std::vector<float> got, want;
        {
          StreamScope scope(device("cpu"));
          got = astype(matmul(ints(as, d, 1), ints(bs, d, 2)), float32).to_vector<float>();
        }
        {
          StreamScope scope(device("reference"));
          want = astype(matmul(ints(as, d, 1), ints(bs, d, 2)), float32).to_vector<float>();
        }
        ASSERT_EQ(got, want) << lib << " " << d << " " << to_string(as) << " @ " << to_string(bs);
      }
  }
  if (saved)
    ::setenv("KILN_MATMUL", saved_value.c_str(), 1);
  else
    ::unsetenv("KILN_MATMUL");
}

MatmulArgs shape_only(Dtype d, int64_t m, int64_t n, int64_t k, size_t batches = 1) {
  MatmulArgs a;
  a.dtype = d;
  a.m = m;
  a.n = n;
  a.k = k;
  a.c_offsets.assign(batches, 0);
  return a;
}

TEST(CpuMatmul, ClassesRoundSizesAndStayQuickToMeasure) {
  auto key = [](Dtype d, int64_t m, int64_t n, int64_t k, size_t b = 1, int t = 2) {
    return cpu::matmul_class(shape_only(d, m, n, k, b), t).key();
  };
  // Sizes round to the nearest power of two (96 -> 128, 1000 -> 1024, 90 -> 64); halves are
  // float32's problems.
  EXPECT_EQ(key(float32, 96, 1000, 90), "matmul/f32/b1/128x64x1024/t2");
  EXPECT_EQ(key(float16, 96, 1000, 90), key(float32, 96, 1000, 90));
  EXPECT_EQ(key(bfloat16, 96, 1000, 90), key(float32, 96, 1000, 90));
  EXPECT_EQ(key(float64, 3, 5, 7, 6, 1), "matmul/f64/b8/4x8x4/t1");
  // Large problems shrink, summed size first, to 2^28 multiply-adds: the MLP's two products
  // share a class.
  EXPECT_EQ(key(float32, 256, 4096, 1024), "matmul/f32/b1/256x1024x1024/t2");
  EXPECT_EQ(key(float32, 256, 1024, 4096), "matmul/f32/b1/256x1024x1024/t2");
  // Matrix-vector shapes keep their 1 and their own class; operands stay under 2^22 elements.
  EXPECT_EQ(key(float32, 1, 4096, 4096), "matmul/f32/b1/1x2048x2048/t2");
  EXPECT_EQ(key(float32, 4096, 1, 4096), "matmul/f32/b1/2048x2048x1/t2");
  EXPECT_EQ(key(float32, 2, 4096, 4096), "matmul/f32/b1/2x2048x2048/t2");
  for (auto [m, n, k, b] :
       {std::tuple{1 << 20, 1 << 20, 1 << 20, 1}, std::tuple{64, 64, 64, 1 << 16},
        std::tuple{1 << 30, 1, 1 << 30, 1}, std::tuple{7, 1 << 25, 3, 9}}) {
    cpu::MatmulClass c = cpu::matmul_class(shape_only(float32, m, n, k, b), 2);
    int64_t work = c.batches * c.m * c.n * c.k;
    EXPECT_LE(work, int64_t{1} << cpu::kMaxWorkLog2) << c.key();
    for (int64_t elements : {c.batches * c.m * c.k, c.batches * c.k * c.n, c.batches * c.m * c.n})
      EXPECT_LE(elements, int64_t{1} << cpu::kMaxOperandLog2) << c.key();
    EXPECT_EQ(c.m == 1, m == 1) << c.key();
    EXPECT_EQ(c.n == 1, n == 1) << c.key();
    // The table's keys parse back to the same class; anything else is refused.
    std::optional<cpu::MatmulClass> back = cpu::parse_matmul_key(c.key());
    ASSERT_TRUE(back) << c.key();
    EXPECT_EQ(back->key(), c.key());
  }
  for (const char* bad : {"matmul/f32/b1/96x64x64/t2", "matmul/f32/b1/1x1x1/t0",
                          "matmul/i32/b1/64x64x64/t2", "matmul/f32/b1/65536x65536x65536/t2",
                          "matmul/f32/b1/64x64x64/t2 ", "matmul/f32/b1/64x64x64", ""})
    EXPECT_FALSE(cpu::parse_matmul_key(bad)) << bad;
  EXPECT_EQ(cpu::matmul_class(shape_only(float32, 64, 64, 64), 2).kind(), "small");
  EXPECT_EQ(cpu::matmul_class(shape_only(float32, 256, 4096, 1024), 2).kind(), "skinny");
  EXPECT_EQ(cpu::matmul_class(shape_only(float32, 1024, 1024, 1024), 2).kind(), "square");
  EXPECT_EQ(cpu::matmul_class(shape_only(float32, 64, 64, 64, 16), 2).kind(), "batched");
  EXPECT_EQ(cpu::matmul_class(shape_only(float32, 1, 64, 64), 2).kind(), "vector-matrix");
}

// A private KILN_CACHE_DIR (so a class is measured here, not read from an earlier run) and no
// KILN_MATMUL, restored afterwards.
class CpuMatmulChoice : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"KILN_CACHE_DIR", "KILN_MATMUL"})
      if (const char* x = std::getenv(v)) saved_[v] = x;
    // Inside the process's own cache folder (test_cpu_backend.cpp's, removed at exit): kernels
    // the public op compiles are written here by a background thread, which may still be
    // writing when the test ends.
    std::filesystem::path base = saved_.count("KILN_CACHE_DIR")
                                     ? std::filesystem::path(saved_["KILN_CACHE_DIR"])
                                     : std::filesystem::temp_directory_path();
    dir_ = base / ("kiln-matmul-choice-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
    ::unsetenv("KILN_MATMUL");
    cpu::matmul_tuner().forget();
  }
  void TearDown() override {
    for (const char* v : {"KILN_CACHE_DIR", "KILN_MATMUL"}) {
      if (saved_.count(v))
        ::setenv(v, saved_[v].c_str(), 1);
      else
        ::unsetenv(v);
    }
    cpu::matmul_tuner().forget();
    std::error_code ec;  // best effort (see SetUp)
    std::filesystem::remove_all(dir_, ec);
  }
  std::map<std::string, std::string> saved_;
  std::filesystem::path dir_;
};

TEST_F(CpuMatmulChoice, EachClassIsMeasuredOnItsCandidatesAndRecorded) {
  EXPECT_EQ(cpu::choose_matmul_library(shape_only(int32, 100, 100, 100)), MatmulLibrary::Loop);
  EXPECT_EQ(cpu::choose_matmul_library(shape_only(uint8, 1, 100, 100)), MatmulLibrary::Loop);
  struct Case {
    Dtype d;
    int64_t m, n, k, batches;
  };
  for (Case c :
       {Case{float32, 100, 90, 80, 1}, Case{float32, 1, 300, 200, 1}, Case{float64, 300, 1, 200, 1},
        Case{float16, 40, 50, 60, 5}, Case{float64, 64, 64, 64, 1}}) {
    MatmulArgs a = shape_only(c.d, c.m, c.n, c.k, c.batches);
    cpu::MatmulClass cls = cpu::matmul_class(a, cpu::threads_allowed());
    std::vector<MatmulLibrary> cands = cpu::matmul_candidates(cls);
    MatmulLibrary got = cpu::choose_matmul_library(a);
    EXPECT_NE(std::find(cands.begin(), cands.end(), got), cands.end()) << cls.key();
    bool in_table = false;
    for (const cpu::TuneResult& r : cpu::matmul_tuner().table())
      if (r.key == cls.key()) {
        in_table = true;
        EXPECT_EQ(r.winner, cpu::library_id(got));
        EXPECT_EQ(r.seconds.size(), cands.size());
      }
    // A class with one candidate (float64 off the vector shapes) is never measured.
    EXPECT_EQ(in_table, cands.size() > 1) << cls.key();
  }
  EXPECT_EQ(cpu::matmul_candidates(cpu::matmul_class(shape_only(float64, 64, 64, 64), 2)).size(),
            1u);
}

TEST_F(CpuMatmulChoice, KilnMatmulForcesALibraryOrSaysWhyNot) {
  MatmulArgs square = shape_only(float32, 100, 100, 100), vec = shape_only(float32, 1, 100, 100);
  ::setenv("KILN_MATMUL", "openblas-gemm", 1);
  EXPECT_EQ(cpu::choose_matmul_library(square), MatmulLibrary::OpenBlasGemm);
  EXPECT_EQ(cpu::choose_matmul_library(vec), MatmulLibrary::OpenBlasGemm);
  EXPECT_EQ(cpu::choose_matmul_library(shape_only(int64, 5, 5, 5)), MatmulLibrary::Loop);
  EXPECT_TRUE(cpu::matmul_tuner().table().empty());  // forcing measures nothing
  expect_op_matches_reference<float>(float32, {70, 80}, {80, 90});
  ::setenv("KILN_MATMUL", "openblas-gemv", 1);
  EXPECT_EQ(cpu::choose_matmul_library(vec), MatmulLibrary::OpenBlasGemv);
  try {
    cpu::choose_matmul_library(square);
    ADD_FAILURE() << "gemv was forced on a square product";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_MATMUL=openblas-gemv cannot run matmul/f32/"),
              std::string::npos)
        << e.what();
  }
  ::setenv("KILN_MATMUL", "onednn", 1);
  EXPECT_THROW(cpu::choose_matmul_library(shape_only(float64, 100, 100, 100)), Error);
  if (cpu::have_onednn()) {
    EXPECT_EQ(cpu::choose_matmul_library(square), MatmulLibrary::OneDnn);
  }
  // Through the public op, the error reaches the caller.
  {
    StreamScope scope(device("cpu"));
    EXPECT_THROW(eval(matmul(ones({30, 40}, float64), ones({40, 20}, float64))), Error);
  }
  ::setenv("KILN_MATMUL", "cublas", 1);
  EXPECT_THROW(cpu::choose_matmul_library(square), Error);
}

}  // namespace
}  // namespace kiln
