#include "backends/opencl/scatter.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <sstream>

#include "backends/native.h"
#include "backends/opencl/native_launch.h"
#include "backends/opencl/prelude_opencl.h"
#include "backends/opencl/program_cache.h"
#include "graph/error.h"

namespace kiln::opencl {

namespace {

// How dtype d is stored (T), accumulated (A: the output itself, or a 32-bit temporary when
// `wide`), widened into the temporary and rounded out of it, and how one update is added.
struct Form {
  const char* t;
  const char* acc;
  bool wide;
  const char* widen;   // WIDEN(x): a stored element as A
  const char* narrow;  // NARROW(x): an A as a stored element
  const char* add;     // ADD(p, x): adds the stored update x into *p
};

Form form_of(Dtype d) {
  switch (d.kind) {
    case Dtype::Kind::Bool:
      return {"uchar",        "uint",
              true,           "((x) != 0 ? 1u : 0u)",
              "((uchar)(x))", "if ((x) != 0) atomic_or(p, 1u)"};
    case Dtype::Kind::Int8:
    case Dtype::Kind::UInt8:  // a 32-bit wrapping sum wraps to 8 bits as the reference's
      return {"uchar", "uint", true, "((uint)(x))", "((uchar)(x))", "atomic_add(p, (uint)(x))"};
    case Dtype::Kind::Float16:
      return {"ushort",
              "uint",
              true,
              "as_uint(kiln_h2f(x))",
              "kiln_f2h(as_float(x))",
              "kiln_add_f32(p, kiln_h2f(x))"};
    case Dtype::Kind::BFloat16:
      return {"ushort",
              "uint",
              true,
              "as_uint(kiln_bf2f(x))",
              "kiln_f2bf(as_float(x))",
              "kiln_add_f32(p, kiln_bf2f(x))"};
    case Dtype::Kind::Int32:
    case Dtype::Kind::UInt32: return {"uint", "uint", false, "", "", "atomic_add(p, x)"};
    case Dtype::Kind::Float32:
      return {"uint", "uint", false, "", "", "kiln_add_f32(p, as_float(x))"};
    case Dtype::Kind::Int64:
    case Dtype::Kind::UInt64: return {"ulong", "ulong", false, "", "", "atom_add(p, x)"};
    case Dtype::Kind::Float64:
      return {"ulong", "ulong", false, "", "", "kiln_add_f64(p, as_double(x))"};
  }
  throw_error("internal: scatter_add of an unknown dtype");
}

// Float adds as compare-and-swap loops on the bits (so NaN compares equal to itself and the
// loop ends); the kernels: the update adder (work-item t takes updates [t * chunk, ...), each
// (o, j, k) stepped rather than divided), and the widening and rounding passes of the
// temporary. The index rule: negative from the end, then clamped to [0, n - 1].
const char* kKernels = R"CL(
inline void kiln_add_f32(volatile __global uint* p, float v) {
  uint seen = *p, old;
  while ((old = atomic_cmpxchg(p, seen, as_uint(as_float(seen) + v))) != seen) seen = old;
}
#ifdef KILN_F64
inline void kiln_add_f64(volatile __global ulong* p, double v) {
  ulong seen = *p, old;
  while ((old = atom_cmpxchg(p, seen, as_ulong(as_double(seen) + v))) != seen) seen = old;
}
#endif
__kernel void kiln_scatter_add(__global const long* idx, __global const T* upd,
    volatile __global A* acc, long outer, long n, long inner, long m, int shared, long chunk) {
  const long total = outer * m * inner;
  const long first = (long)get_global_id(0) * chunk;
  const long end = min(first + chunk, total);
  if (first >= end) return;
  long k = first % inner, row = first / inner;
  long j = row % m, o = row / m;
  for (long g = first; g < end; ++g) {
    long i = idx[shared ? j : g];
    if (i < 0) i += n;
    i = clamp(i, 0L, n - 1);
    volatile __global A* p = acc + (o * n + i) * inner + k;
    T x = upd[g];
    ADD(p, x);
    if (++k == inner) {
      k = 0;
      if (++j == m) j = 0, ++o;
    }
  }
}
#if WIDE
__kernel void kiln_scatter_widen(__global const T* a, __global A* acc, long total, long chunk) {
  const long first = (long)get_global_id(0) * chunk, end = min(first + chunk, total);
  for (long e = first; e < end; ++e) { T x = a[e]; acc[e] = WIDEN(x); }
}
__kernel void kiln_scatter_narrow(__global const A* acc, __global T* out, long total, long chunk) {
  const long first = (long)get_global_id(0) * chunk, end = min(first + chunk, total);
  for (long e = first; e < end; ++e) { A x = acc[e]; out[e] = NARROW(x); }
}
#endif
)CL";

std::string source(Dtype d) {
  Form f = form_of(d);
  std::ostringstream os;
  if (d.size() == 8) os << "#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable\n";
  if (d == float64) os << "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n#define KILN_F64 1\n";
  if (d.is_half()) os << opencl_prelude();
  os << "#define T " << f.t << "\n#define A " << f.acc << "\n#define WIDE " << (f.wide ? 1 : 0)
     << "\n#define WIDEN(x) " << f.widen << "\n#define NARROW(x) " << f.narrow
     << "\n#define ADD(p, x) " << f.add << "\n"
     << kKernels;
  return os.str();
}

struct ScatterKernels {
  cl_program program = nullptr;
  cl_kernel add = nullptr, widen = nullptr, narrow = nullptr;
  size_t local = 1;  // work-group size of every pass
  std::mutex mu;     // argument state is shared
};

ScatterKernels& kernels_for(ClDevice& dev, Dtype d) {
  return cached_kernels<ScatterKernels>(dev, static_cast<int>(d.kind), [&] {
    auto k = std::make_unique<ScatterKernels>();
    k->program = build_program(dev, source(d), "scatter_add").program;
    k->add = make_kernel(k->program, "kiln_scatter_add", "scatter_add");
    k->local = local_size(dev, k->add);
    if (form_of(d).wide) {
      k->widen = make_kernel(k->program, "kiln_scatter_widen", "scatter_add");
      k->narrow = make_kernel(k->program, "kiln_scatter_narrow", "scatter_add");
      k->local = std::min({k->local, local_size(dev, k->widen), local_size(dev, k->narrow)});
    }
    return k;
  });
}

// An elementwise pass over `total` elements from `src` into `dst`; its event or null.
void pass(const ClDevice& dev, cl_command_queue q, cl_kernel k, size_t local, cl_mem src,
          cl_mem dst, int64_t total, cl_event* ev) {
  cl_long chunk = 0, t = total;
  size_t global = chunked_grid(dev, local, total, chunk);
  launch(q, k, "scatter_add", global, local, ev, src, dst, t, chunk);
}

bool has_extension(const ClDevice& dev, const char* name) {
  size_t size = 0;
  if (clGetDeviceInfo(dev.id, CL_DEVICE_EXTENSIONS, 0, nullptr, &size) != CL_SUCCESS) return false;
  std::string exts(size, '\0');
  if (clGetDeviceInfo(dev.id, CL_DEVICE_EXTENSIONS, size, exts.data(), nullptr) != CL_SUCCESS)
    return false;
  std::istringstream words(exts.c_str());
  for (std::string w; words >> w;)
    if (w == name) return true;
  return false;
}

}  // namespace

bool has_scatter_add_kernel(const ClDevice& dev, Dtype d) {
  if (d.size() < 8) return true;
  if (d == float64 && !dev.fp64) return false;
  return has_extension(dev, "cl_khr_int64_base_atomics");
}

cl_event enqueue_scatter_add(ClDevice& dev, ClPool& pool, cl_command_queue q, const NativeArgs& a,
                             std::vector<std::shared_ptr<void>>& keep) {
  check_native_buffers(a);
  if (!has_scatter_add_kernel(dev, a.dtype))
    throw_error("opencl: ", native_name(a), " needs cl_khr_int64_base_atomics",
                a.dtype == float64 ? " and cl_khr_fp64" : "", ", which ", dev.label(),
                " does not offer");
  const int64_t total = a.out_elements(), updates = a.outer * a.m * a.inner;
  if (total == 0) return nullptr;
  cl_mem base = mem_on(dev, a.buffers[0], a), mi = mem_on(dev, a.buffers[1], a),
         mu = mem_on(dev, a.buffers[2], a), mo = mem_on(dev, a.buffers[3], a);
  ScatterKernels& k = kernels_for(dev, a.dtype);
  const bool wide = form_of(a.dtype).wide;
  std::lock_guard<std::mutex> lock(k.mu);
  // The accumulator: the output itself (the base copied in; not onto itself), or a 32-bit
  // temporary widened from the base.
  cl_mem acc = mo;
  if (wide) {
    auto tmp = pool.allocate(static_cast<size_t>(total) * 4);
    acc = tmp->mem();
    keep.push_back(tmp);
    pass(dev, q, k.widen, k.local, base, acc, total, nullptr);
  } else if (base != mo) {
    cl_check(clEnqueueCopyBuffer(q, base, mo, 0, 0, static_cast<size_t>(total) * a.dtype.size(), 0,
                                 nullptr, nullptr),
             "clEnqueueCopyBuffer (scatter_add)");
  }
  cl_event ev = nullptr;
  if (updates > 0) {
    cl_long chunk = 0, outer = a.outer, n = a.n, inner = a.inner, m = a.m;
    cl_int shared = a.shared_index ? 1 : 0;
    size_t global = chunked_grid(dev, k.local, updates, chunk);
    launch(q, k.add, "scatter_add", global, k.local, wide ? nullptr : &ev, mi, mu, acc, outer, n,
           inner, m, shared, chunk);
  }
  if (wide) pass(dev, q, k.narrow, k.local, acc, mo, total, &ev);
  if (!ev) cl_check(clEnqueueMarkerWithWaitList(q, 0, nullptr, &ev), "clEnqueueMarker");
  return ev;
}

}  // namespace kiln::opencl
