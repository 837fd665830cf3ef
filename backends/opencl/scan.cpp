#include "backends/opencl/scan.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <string>

#include "backends/native.h"
#include "backends/opencl/native_launch.h"
#include "backends/opencl/prelude_opencl.h"
#include "backends/opencl/program_cache.h"
#include "graph/error.h"

namespace kiln::opencl {

namespace {

constexpr int kRun = 4;  // elements per work-item: a tile is kRun * the work-group size
// The runs' totals are scanned by raking: work-items 0, 1, ... scan kRake consecutive totals
// each, then work-item 0 the segments' totals, so no barrier sits inside a loop (with the
// Hillis-Steele form, a barrier per step in a loop, PoCL's cold builds made the device scan
// test take 53 s instead of 23 s on a loaded 2-core host).
constexpr int kRake = 16;

// The ops, in the kernels' combine() and names.
enum { kSum, kProd, kMax, kMin, kLogAddExp, kOps };

// Kernel flags (the last argument).
enum : cl_int { kReverse = 1, kInclusive = 2, kTotals = 4, kCarried = 8 };

// One work-group scans one tile of one row (group g: row g / tiles, tile g % tiles). The tile
// is read coalesced into local memory, each work-item combines its run of kRun, the runs'
// totals are scanned across the group (by raking: kRake), then each run is scanned again from its
// prefix and the tile written back coalesced. With kTotals the group only writes its tile's
// total to aux[g]; with kCarried it starts from aux[g] (the exclusive scan of those totals).
// Logical position k of row (o, q) is element (o * n + k) * inner + q, k counted from the end
// when reversed. $ST: the storage type, $LOAD(X) and $STORE(V) its conversions.
const char* kBody = R"CL(
__kernel void $NAME(__global $ST* src, __global $ST* dst, __global A* aux, __local A* tile,
                    __local A* sums, long n, long inner, long tiles, int flags) {
  const int lid = get_local_id(0), L = get_local_size(0);
  const long g = get_group_id(0), r = g / tiles, t = g - r * tiles;
  const long o = r / inner, q = r - o * inner, first = t * (long)L * RUN;
  const int reverse = flags & 1;
  const A id = identity($OP);
  __local A seg[MAX_SEGMENTS];
  for (int j = 0; j < RUN; ++j) {
    const int e = j * L + lid;
    const long k = first + e;
    if (k < n) {
      $ST X = src[(o * n + (reverse ? n - 1 - k : k)) * inner + q];
      tile[e] = $LOAD;
    } else {
      tile[e] = id;
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  A acc = tile[lid * RUN];
  for (int j = 1; j < RUN; ++j) acc = combine(acc, tile[lid * RUN + j], $OP);
  sums[lid] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  const int rake = min(L, RAKE), segments = L / rake;
  if (lid < segments)
    for (int i = lid * rake + 1; i < (lid + 1) * rake; ++i)
      sums[i] = combine(sums[i - 1], sums[i], $OP);
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    A c = (flags & 8) ? aux[g] : id;
    for (int s = 0; s < segments; ++s) {
      seg[s] = c;
      c = combine(c, sums[s * rake + rake - 1], $OP);
    }
    if (flags & 4) aux[g] = c;
  }
  if (flags & 4) return;
  barrier(CLK_LOCAL_MEM_FENCE);
  A p = seg[lid / rake];
  if (lid % rake != 0) p = combine(p, sums[lid - 1], $OP);
  for (int j = 0; j < RUN; ++j) {
    const int e = lid * RUN + j;
    const A x = tile[e];
    if (flags & 2) {
      p = combine(p, x, $OP);
      tile[e] = p;
    } else {
      tile[e] = p;
      p = combine(p, x, $OP);
    }
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int j = 0; j < RUN; ++j) {
    const int e = j * L + lid;
    const long k = first + e;
    if (k < n) {
      const A V = tile[e];
      dst[(o * n + (reverse ? n - 1 - k : k)) * inner + q] = $STORE;
    }
  }
}
)CL";

// The CPU device's form: no local memory and no barriers (each costs a loop over the group's
// work-items there); work-item g scans chunk g % chunks of row g / chunks sequentially, the
// rows split into as many chunks as keep every core busy. kTotals and kCarried as above.
const char* kChunkBody = R"CL(
__kernel void $NAME(__global $ST* src, __global $ST* dst, __global A* aux, long n, long inner,
                    long rows, long chunks, long chunk, int flags) {
  const long g = get_global_id(0);
  if (g >= rows * chunks) return;
  const long r = g / chunks, c = g - r * chunks, o = r / inner, q = r - o * inner;
  const long first = c * chunk, end = min(n, first + chunk);
  const int reverse = flags & 1;
  A p = (flags & 8) ? aux[g] : identity($OP);
  if (flags & 4) {
    for (long k = first; k < end; ++k) {
      $ST X = src[(o * n + (reverse ? n - 1 - k : k)) * inner + q];
      p = combine(p, $LOAD, $OP);
    }
    aux[g] = p;
    return;
  }
  for (long k = first; k < end; ++k) {
    const long at = (o * n + (reverse ? n - 1 - k : k)) * inner + q;
    $ST X = src[at];
    const A x = $LOAD;
    A V = p;
    if (flags & 2) V = p = combine(p, x, $OP);
    else p = combine(p, x, $OP);
    dst[at] = $STORE;
  }
}
)CL";

// The combine and identity of every op for accumulator A: integers add and multiply as
// unsigned (wrapping, as the reference), floats keep NaN in max/min as the reference's
// sequential loop does (the first NaN wins; equal values: the later one).
const char* kCombine = R"CL(
inline A combine(A a, A b, int op) {
  switch (op) {
    case 0: return AS_A((U)a + (U)b);
    case 1: return AS_A((U)a * (U)b);
#if IS_FLOAT
    case 2: return isnan(a) || a > b ? a : b;
    case 3: return isnan(a) || a < b ? a : b;
    default: {
      if (isnan(a) || isnan(b)) return a + b;
      const A m = a > b ? a : b, lo = a > b ? b : a;
      if (isinf(m)) return m;
      return m + log1p(exp(lo - m));
    }
#else
    case 2: return a > b ? a : b;
    default: return a < b ? a : b;
#endif
  }
}
inline A identity(int op) {
  switch (op) {
    case 0: return (A)0;
    case 1: return (A)1;
    case 2: return LOWEST;
    case 3: return HIGHEST;
    default: return (A)(-INFINITY);
  }
}
)CL";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

std::string kernel_text(const char* body, const std::string& name, int op, const std::string& st,
                        const std::string& load, const std::string& store) {
  std::string s = replace_all(body, "$NAME", name + "_" + std::to_string(op));
  s = replace_all(s, "$OP", std::to_string(op));
  s = replace_all(s, "$LOAD", load);
  s = replace_all(s, "$STORE", store);  // before $ST, its prefix
  return replace_all(s, "$ST", st);
}

std::string literal(Dtype d, scalar::Val v) {
  if (d.is_float()) return v.f > 0 ? "(A)INFINITY" : "(A)(-INFINITY)";
  if (d == int64)
    return v.i == INT64_MIN ? "(A)(-9223372036854775807L - 1L)" : "(A)" + std::to_string(v.i) + "L";
  if (d == uint64) return "(A)" + std::to_string(static_cast<uint64_t>(v.i)) + "UL";
  if (d == int32 && v.i == INT32_MIN) return "(A)(-2147483647 - 1)";
  return "(A)" + std::to_string(v.i) + (d.is_unsigned() ? "U" : "");
}

// The program of dtype d in the tile or the chunked form: kiln_scan_in_<op> reads and writes d,
// kiln_scan_acc_<op> the accumulator (where that is another type: each kernel costs PoCL ~1 s
// to build cold), a kernel per op (kSum ..., kLogAddExp for floats only):
// with the op a constant the compiler keeps its switch out of the loops (cumsum on PoCL took
// 4.0 ms for 2^20 float32 with the op an argument, 1.2 ms with it a constant).
std::string source(Dtype d, bool chunked) {
  std::string acc, st = "", load = "(A)X", store = "V", u, as = "";
  if (d == float64)
    acc = "double", u = "double";
  else if (d.is_float())
    acc = "float", u = "float";
  else if (d == int64)
    acc = "long", u = "ulong", as = "as_long";
  else if (d == uint64)
    acc = "ulong", u = "ulong";
  else if (d == uint32 || d == uint8 || d == bool_)
    acc = "uint", u = "uint";
  else
    acc = "int", u = "uint", as = "as_int";
  if (d == float16)
    st = "ushort", load = "kiln_h2f(X)", store = "kiln_f2h(V)";
  else if (d == bfloat16)
    st = "ushort", load = "kiln_bf2f(X)", store = "kiln_f2bf(V)";
  else if (d == bool_)
    st = "uchar", load = "(A)(X != 0)", store = "(uchar)(V != 0)";
  else if (d == int8)
    st = "char", store = "as_char((uchar)as_uint(V))";
  else if (d == uint8)
    st = "uchar", store = "(uchar)V";
  else
    st = acc;
  std::string s = "#pragma OPENCL FP_CONTRACT OFF\n";
  if (d == float64) s += "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n";
  s += opencl_prelude();
  s += "#define A " + acc + "\n#define U " + u + "\n#define AS_A(x) " + as +
       "(x)\n#define IS_FLOAT " + (d.is_float() ? "1" : "0") + "\n#define RUN " +
       std::to_string(kRun) + "\n#define RAKE " + std::to_string(kRake) +
       "\n#define MAX_SEGMENTS " + std::to_string(256 / kRake) + "\n";
  s += "#define LOWEST " + literal(d, scalar::scan_identity(ScanOp::Max, d)) + "\n";
  s += "#define HIGHEST " + literal(d, scalar::scan_identity(ScanOp::Min, d)) + "\n";
  s += kCombine;
  const char* body = chunked ? kChunkBody : kBody;
  for (int op = 0; op < kOps; ++op) {
    if (op == kLogAddExp && !d.is_float()) continue;
    s += kernel_text(body, "kiln_scan_in", op, st, load, store);
    if (d.size() < 4) s += kernel_text(body, "kiln_scan_acc", op, "A", "X", "V");
  }
  return s;
}

size_t accumulator_bytes(Dtype d) { return d.size() == 8 ? 8 : 4; }

struct ScanProgram {
  cl_program program = nullptr;
  cl_kernel in[kOps] = {}, acc[kOps] = {};  // by op; null: none (logcumsumexp of integers)
  size_t local = 1;  // work-group size: a power of two within the device's and kernels' limits
  std::mutex mu;     // argument state is shared
};

// dev.cpu: the chunked form, else the tile form.
ScanProgram& program_for(ClDevice& dev, Dtype d) {
  return cached_kernels<ScanProgram>(dev, static_cast<int>(d.kind), [&] {
    auto p = std::make_unique<ScanProgram>();
    p->program = build_program(dev, source(d, dev.cpu), "scan").program;
    p->local = 256;
    for (int op = 0; op < kOps; ++op) {
      if (op == kLogAddExp && !d.is_float()) continue;
      char name[32];
      std::snprintf(name, sizeof name, "kiln_scan_in_%d", op);
      p->in[op] = make_kernel(p->program, name, "scan");
      if (d.size() >= 4) {
        p->acc[op] = p->in[op];  // 4- and 8-byte dtypes accumulate in their own type
      } else {
        std::snprintf(name, sizeof name, "kiln_scan_acc_%d", op);
        p->acc[op] = make_kernel(p->program, name, "scan");
      }
      p->local = std::min({p->local, local_size(dev, p->in[op]), local_size(dev, p->acc[op])});
    }
    return p;
  });
}

// One level of the scan of `rows` rows of n (kernel k: src and dst of its storage type):
// one pass when a row fits a tile, else totals, their scan one level up, and the tiles again.
struct Scan {
  ClDevice& dev;
  ClPool& pool;
  cl_command_queue q;
  ScanProgram& p;
  Dtype d;
  int op;  // kSum ... kLogAddExp
  std::vector<std::shared_ptr<void>>& keep;
  cl_event last = nullptr;

  void launch(cl_kernel k, cl_mem src, cl_mem dst, cl_mem aux, int64_t rows, cl_long n,
              cl_long inner, cl_long tiles, cl_int flags) {
    size_t asz = accumulator_bytes(d), tile = p.local * kRun;
    size_t global = static_cast<size_t>(rows * tiles) * p.local;
    if (last) clReleaseEvent(last);
    last = nullptr;
    opencl::launch(q, k, "scan", global, p.local, &last, src, dst, aux, LocalBytes{tile * asz},
                   LocalBytes{p.local * asz}, n, inner, tiles, flags);
  }

  // The chunked form: a few chunks per core in all, none shorter than kMinChunk elements.
  void launch_chunks(cl_kernel k, cl_mem src, cl_mem dst, cl_mem aux, cl_long rows, cl_long n,
                     cl_long inner, cl_long chunks, cl_long chunk, cl_int flags) {
    size_t global = static_cast<size_t>(rows * chunks);
    if (last) clReleaseEvent(last);
    last = nullptr;
    opencl::launch(q, k, "scan", global, 0, &last, src, dst, aux, n, inner, rows, chunks, chunk,
                   flags);
  }

  void chunked(cl_kernel k, cl_mem src, cl_mem dst, int64_t rows, int64_t n, int64_t inner,
               cl_int flags) {
    constexpr int64_t kMinChunk = 4096;
    int64_t want = int64_t{4} * dev.compute_units;
    int64_t chunks =
        std::clamp<int64_t>((want + rows - 1) / rows, 1, (n + kMinChunk - 1) / kMinChunk);
    int64_t chunk = (n + chunks - 1) / chunks;
    if (chunks == 1) return launch_chunks(k, src, dst, dst, rows, n, inner, 1, n, flags);
    auto totals = pool.allocate(static_cast<size_t>(rows * chunks) * accumulator_bytes(d));
    keep.push_back(totals);
    launch_chunks(k, src, dst, totals->mem(), rows, n, inner, chunks, chunk, flags | kTotals);
    chunked(p.acc[op], totals->mem(), totals->mem(), rows, chunks, 1, 0);  // exclusive, forward
    launch_chunks(k, src, dst, totals->mem(), rows, n, inner, chunks, chunk, flags | kCarried);
  }

  void level(cl_kernel k, cl_mem src, cl_mem dst, int64_t rows, int64_t n, int64_t inner,
             cl_int flags) {
    if (dev.cpu) return chunked(k, src, dst, rows, n, inner, flags);
    auto tile = static_cast<int64_t>(p.local) * kRun;
    int64_t tiles = (n + tile - 1) / tile;
    if (tiles == 1) return launch(k, src, dst, dst, rows, n, inner, 1, flags);
    auto totals = pool.allocate(static_cast<size_t>(rows * tiles) * accumulator_bytes(d));
    keep.push_back(totals);
    launch(k, src, dst, totals->mem(), rows, n, inner, tiles, flags | kTotals);
    level(p.acc[op], totals->mem(), totals->mem(), rows, tiles, 1, 0);  // exclusive, forward
    launch(k, src, dst, totals->mem(), rows, n, inner, tiles, flags | kCarried);
  }
};

}  // namespace

cl_event enqueue_scan(ClDevice& dev, ClPool& pool, cl_command_queue q, const NativeArgs& a,
                      std::vector<std::shared_ptr<void>>& keep) {
  check_native_buffers(a);
  if (a.scan == ScanOp::LogAddExp && !a.dtype.is_float())
    throw_error("opencl: ", native_name(a), " is not defined (valid: float dtypes)");
  if (a.dtype == float64 && !dev.fp64)
    throw_error("opencl: ", native_name(a), " needs cl_khr_fp64, which ", dev.label(),
                " lacks (valid: float32, float16, bfloat16 and integer dtypes there)");
  if (a.out_elements() == 0) return nullptr;
  cl_mem src = mem_on(dev, a.buffers[0], a), dst = mem_on(dev, a.buffers[1], a);
  ScanProgram& p = program_for(dev, a.dtype);
  // Bool sums are "or" and products "and": max and min of 0 and 1.
  ScanOp op = a.scan;
  if (a.dtype == bool_ && op == ScanOp::Sum) op = ScanOp::Max;
  if (a.dtype == bool_ && op == ScanOp::Prod) op = ScanOp::Min;
  int code = op == ScanOp::Sum    ? kSum
             : op == ScanOp::Prod ? kProd
             : op == ScanOp::Max  ? kMax
             : op == ScanOp::Min  ? kMin
                                  : kLogAddExp;
  cl_int flags = (a.reverse ? kReverse : 0) | (a.inclusive ? kInclusive : 0);
  std::lock_guard<std::mutex> lock(p.mu);
  Scan s{dev, pool, q, p, a.dtype, code, keep};
  s.level(p.in[code], src, dst, a.outer * a.inner, a.n, a.inner, flags);
  return s.last;
}

}  // namespace kiln::opencl
