#include "backends/cpu/onednn_matmul.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <tuple>
#include <vector>

#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln::cpu {

namespace {

using dnnl::memory;

// (m, n, k, lda, ldb, ldc, A transposed, B transposed).
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;

struct Entry {
  memory::desc a, b, c, scratch;
  dnnl::matmul prim;
};

// Primitives are immutable once made and may run on several threads at once; each call brings
// its own scratchpad (user scratchpad mode: the library mode shares one between primitives and
// threads, which is unsafe when TBB moves work between threads).
struct State {
  std::shared_mutex mu;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::map<Key, std::shared_ptr<const Entry>> cache;
  int64_t created = 0;
};

State& state() {
  static Immortal<State> s;
  return s.get();
}

// A rows x cols operand stored row-major with leading dimension ld, or (transposed) stored as
// its cols x rows transpose: element (r, c) then lies at c * ld + r.
memory::desc strided(int64_t rows, int64_t cols, int64_t ld, bool transposed = false) {
  if (transposed) return memory::desc({rows, cols}, memory::data_type::f32, {1, ld});
  return memory::desc({rows, cols}, memory::data_type::f32, {ld, 1});
}

// Shapes reaching here were validated by Kiln, so a failure is a library limit: report it with
// the shape instead of letting a dnnl::error escape.
std::shared_ptr<const Entry> entry_for(State& s, const Key& key) {
  {
    std::shared_lock<std::shared_mutex> read(s.mu);
    auto it = s.cache.find(key);
    if (it != s.cache.end()) return it->second;
  }
  auto [m, n, k, lda, ldb, ldc, ta, tb] = key;
  auto e = std::make_shared<Entry>();
  e->a = strided(m, k, lda, ta);
  e->b = strided(k, n, ldb, tb);
  e->c = strided(m, n, ldc);
  try {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(e->a, e->b, e->c), attr, s.engine);
    e->scratch = pd.scratchpad_desc();
    e->prim = dnnl::matmul(pd);
  } catch (const dnnl::error& err) {
    throw_error("cpu backend: oneDNN could not create a float32 matmul for ", m, "x", k, " @ ", k,
                "x", n, ": ", err.what());
  }
  std::unique_lock<std::shared_mutex> write(s.mu);
  if (s.cache.size() >= 1024) s.cache.clear();  // bounded for programs with endless new shapes
  auto [it, fresh] = s.cache.emplace(key, std::move(e));  // another thread may have won the race
  s.created += fresh;
  return it->second;
}

}  // namespace

void onednn_sgemm(const OneDnnOperand& A, const OneDnnOperand& B, float* C, int64_t ldc, int64_t m,
                  int64_t n, int64_t k) {
  // oneDNN's OpenMP build sizes its team (and, at creation, its blocking) from the calling
  // thread's OpenMP setting: one thread, since TBB already runs one tile per core.
  if (omp_get_max_threads() != 1) omp_set_num_threads(1);
  State& s = state();
  std::shared_ptr<const Entry> e =
      entry_for(s, Key{m, n, k, A.ld, B.ld, ldc, A.transposed, B.transposed});
  // Per thread: a stream, and a scratchpad that grows to the largest any primitive asked for.
  thread_local dnnl::stream stream(s.engine);
  thread_local std::vector<char> scratch;
  size_t need = e->scratch.get_size() + 64;
  if (scratch.size() < need) scratch.resize(need);
  void* aligned = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
  memory a(e->a, s.engine, const_cast<float*>(A.data));
  memory b(e->b, s.engine, const_cast<float*>(B.data));
  memory c(e->c, s.engine, C);
  memory sp(e->scratch, s.engine, aligned);
  try {
    e->prim.execute(
        stream,
        {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, sp}});
  } catch (const dnnl::error& err) {
    throw_error("cpu backend: oneDNN float32 matmul ", m, "x", k, " @ ", k, "x", n,
                " failed: ", err.what());
  }
}

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

int64_t onednn_primitive_count() {
  State& s = state();
  std::shared_lock<std::shared_mutex> read(s.mu);
  return s.created;
}

}  // namespace kiln::cpu
