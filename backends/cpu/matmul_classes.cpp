#include "backends/cpu/matmul_classes.h"

#include <tbb/task_arena.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>

#include "backends/cpu/buffer_pool.h"
#include "backends/cpu/gemm_tiles.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln::cpu {

namespace {

// Bumped when the candidates or the classes change meaning: older tables are then ignored.
constexpr int kMatmulTuneVersion = 2;

int log2_round(int64_t v) {
  return static_cast<int>(std::lround(std::log2(static_cast<double>(v))));
}

int64_t small_work() { return int64_t{1} << 21; }  // below 128^3 multiply-adds

// The representative problem's operands, filled with a value whose sums stay exact and finite.
struct Operands {
  std::shared_ptr<Buffer> a, b, c;
  MatmulArgs args;
};

std::shared_ptr<Buffer> filled(Dtype d, int64_t elements) {
  auto buf =
      BufferPool::instance()->allocate(static_cast<size_t>(elements) * d.size(), Device{"cpu", 0});
  if (d == float32) {
    auto* p = static_cast<float*>(buf->host_ptr());
    std::fill(p, p + elements, 0.25f);
  } else {
    auto* p = static_cast<double*>(buf->host_ptr());
    std::fill(p, p + elements, 0.25);
  }
  return buf;
}

std::shared_ptr<Operands> operands_for(const MatmulClass& c) {
  auto o = std::make_shared<Operands>();
  o->a = filled(c.dtype, c.batches * c.m * c.k);
  o->b = filled(c.dtype, c.batches * c.k * c.n);
  o->c = filled(c.dtype, c.batches * c.m * c.n);
  MatmulArgs& a = o->args;
  a.dtype = c.dtype;
  a.m = c.m;
  a.n = c.n;
  a.k = c.k;
  for (int64_t i = 0; i < c.batches; ++i) {
    a.a_offsets.push_back(i * c.m * c.k);
    a.b_offsets.push_back(i * c.k * c.n);
    a.c_offsets.push_back(i * c.m * c.n);
  }
  a.a = o->a.get();
  a.b = o->b.get();
  a.c = o->c.get();
  return o;
}

// What one of the class's threads runs: its share of the tiles (gemm_tiles.h), as independent
// products of one tile's shape. Every library is cut into the same tiles, so the libraries
// differ in how fast a core runs a tile, and one thread measures that without needing the
// machine's other cores to be idle.
MatmulClass one_threads_share(const MatmulClass& c) {
  TileGrid g = plan_tiles(c.batches, c.m, c.n, c.k, c.threads);
  int64_t tiles = c.batches * ((c.m + g.rows - 1) / g.rows) * ((c.n + g.cols - 1) / g.cols);
  MatmulClass t = c;
  t.m = g.rows;
  t.n = g.cols;
  t.batches = (tiles + c.threads - 1) / c.threads;
  t.threads = 1;
  return t;
}

std::vector<TuneCandidate> candidates_for(const MatmulClass& c) {
  std::shared_ptr<Operands> o = operands_for(one_threads_share(c));
  // An arena of one: the tiles run on the calling thread, as TuneCandidate requires.
  auto alone = std::make_shared<tbb::task_arena>(1);
  std::vector<TuneCandidate> out;
  for (MatmulLibrary lib : matmul_candidates(c))
    out.push_back(
        {library_id(lib), [o, alone, lib] { alone->execute([&] { matmul_with(lib, o->args); }); }});
  return out;
}

std::vector<std::string> ids_of(const MatmulClass& c) {
  std::vector<std::string> ids;
  for (MatmulLibrary lib : matmul_candidates(c)) ids.push_back(library_id(lib));
  return ids;
}

std::string host_key() {
  return host_cpu_model() + "|" + matmul_libraries() +
         "|kiln " KILN_VERSION_STRING "|matmul tune " + std::to_string(kMatmulTuneVersion);
}

}  // namespace

std::string MatmulClass::key() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "matmul/%s/b%lld/%lldx%lldx%lld/t%d",
                dtype == float64 ? "f64" : "f32", static_cast<long long>(batches),
                static_cast<long long>(m), static_cast<long long>(k), static_cast<long long>(n),
                threads);
  return buf;
}

std::string MatmulClass::kind() const {
  if (m == 1 && n == 1) return "dot";
  if (m == 1) return "vector-matrix";
  if (n == 1) return "matrix-vector";
  if (batches > 1) return "batched";
  if (m * n * k < small_work()) return "small";
  int64_t lo = std::min({m, n, k}), hi = std::max({m, n, k});
  return hi >= 4 * lo ? "skinny" : "square";
}

MatmulClass matmul_class(const MatmulArgs& a, int threads) {
  MatmulClass c;
  c.dtype = a.dtype == float64 ? float64 : float32;
  c.threads = std::max(1, threads);
  // Exponents of batches, k, n, m: the order in which ties are halved (the batch count and the
  // summed size change the work but not the output tiles).
  std::array<int, 4> e = {
      log2_round(std::max<size_t>(1, a.c_offsets.size())), log2_round(std::max<int64_t>(1, a.k)),
      log2_round(std::max<int64_t>(1, a.n)), log2_round(std::max<int64_t>(1, a.m))};
  auto over = [&] {
    int b = e[0], k = e[1], n = e[2], m = e[3];
    return b + m + k + n > kMaxWorkLog2 || b + m + k > kMaxOperandLog2 ||
           b + k + n > kMaxOperandLog2 || b + m + n > kMaxOperandLog2;
  };
  while (over()) --*std::max_element(e.begin(), e.end());
  c.batches = int64_t{1} << e[0];
  c.k = int64_t{1} << e[1];
  c.n = int64_t{1} << e[2];
  c.m = int64_t{1} << e[3];
  return c;
}

std::optional<MatmulClass> parse_matmul_key(const std::string& key) {
  char dtype[8] = {};
  long long b, m, k, n;
  int t, used = 0;
  if (std::sscanf(key.c_str(), "matmul/%3[f0-9]/b%lld/%lldx%lldx%lld/t%d%n", dtype, &b, &m, &k, &n,
                  &t, &used) != 6 ||
      used != static_cast<int>(key.size()))
    return std::nullopt;
  // Only what matmul_class produces: a table entry is data, never trusted to size buffers.
  if ((std::string(dtype) != "f32" && std::string(dtype) != "f64") || t < 1 || t > 4096 ||
      std::min({b, m, k, n}) < 1 || std::max({b, m, k, n}) > (1 << kMaxOperandLog2))
    return std::nullopt;
  MatmulArgs a;
  a.dtype = std::string(dtype) == "f64" ? float64 : float32;
  a.m = m, a.n = n, a.k = k;
  a.c_offsets.assign(static_cast<size_t>(b), 0);
  MatmulClass c = matmul_class(a, t);
  if (c.key() != key) return std::nullopt;
  return c;
}

std::vector<MatmulLibrary> matmul_candidates(const MatmulClass& c) {
  std::vector<MatmulLibrary> libs = {MatmulLibrary::OpenBlasGemm};
  if (c.m == 1 || c.n == 1) libs.push_back(MatmulLibrary::OpenBlasGemv);
  if (c.dtype == float32 && have_onednn()) libs.push_back(MatmulLibrary::OneDnn);
  return libs;
}

const char* library_id(MatmulLibrary lib) {
  switch (lib) {
    case MatmulLibrary::OpenBlasGemm: return "openblas-gemm";
    case MatmulLibrary::OpenBlasGemv: return "openblas-gemv";
    case MatmulLibrary::OneDnn: return "onednn";
    case MatmulLibrary::Loop: return "loop";
  }
  return "?";
}

MatmulLibrary library_from_id(const std::string& id) {
  for (MatmulLibrary lib : {MatmulLibrary::OpenBlasGemm, MatmulLibrary::OpenBlasGemv,
                            MatmulLibrary::OneDnn, MatmulLibrary::Loop})
    if (id == library_id(lib)) return lib;
  throw_error("cpu backend: no matmul library '", id,
              "' (onednn, openblas-gemm, openblas-gemv, loop)");
}

Tuner& matmul_tuner() {
  static Immortal<Tuner> t("matmul", host_key(), "KILN_MATMUL");
  return t.get();
}

MatmulLibrary choose_matmul_library(const MatmulArgs& a) {
  if (!a.dtype.is_float()) return MatmulLibrary::Loop;
  if (a.m == 0 || a.n == 0 || a.k == 0)  // nothing for a library to do (matmul_with)
    return MatmulLibrary::OpenBlasGemm;
  MatmulClass c = matmul_class(a, threads_allowed());
  return library_from_id(
      matmul_tuner().choose(c.key(), ids_of(c), [&] { return candidates_for(c); }));
}

TuneResult tune_matmul_class(const MatmulClass& c) {
  TuneResult r;
  tbb::task_arena arena(c.threads);
  arena.execute([&] { r = matmul_tuner().measure(c.key(), candidates_for(c)); });
  return r;
}

std::vector<MatmulClass> tune_classes() {
  struct Shape {
    int64_t batches, m, k, n;
  };
  const Shape shapes[] = {{1, 1024, 1024, 1024}, {1, 256, 1024, 4096}, {1, 256, 4096, 1024},
                          {1, 4096, 64, 4096},   {1, 1, 4096, 4096},   {1, 4096, 4096, 1},
                          {1, 32, 32, 32},       {1, 64, 64, 64},      {1, 128, 128, 128},
                          {1, 256, 256, 256},    {64, 64, 64, 64},     {16, 128, 128, 128}};
  std::vector<MatmulClass> out;
  std::set<std::string> seen;
  auto add = [&](const MatmulClass& c) {  // one candidate is no choice: nothing to measure
    if (matmul_candidates(c).size() > 1 && seen.insert(c.key()).second) out.push_back(c);
  };
  for (Dtype d : {float32, float64})
    for (const Shape& s : shapes) {
      MatmulArgs a;
      a.dtype = d;
      a.m = s.m, a.n = s.n, a.k = s.k;
      a.c_offsets.assign(static_cast<size_t>(s.batches), 0);
      add(matmul_class(a, threads_allowed()));
    }
  for (const TuneResult& r : matmul_tuner().table())
    if (auto c = parse_matmul_key(r.key)) add(*c);
  return out;
}

}  // namespace kiln::cpu
