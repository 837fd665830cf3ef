#include "backends/opencl/sort.h"

#include <mutex>
#include <sstream>
#include <tuple>

#include "backends/native.h"
#include "backends/opencl/native_launch.h"
#include "backends/opencl/program_cache.h"
#include "backends/sort_passes.h"
#include "graph/error.h"

namespace kiln::opencl {

namespace {

// key_of: the order of the reference's sorts_before (backends/native.h) as unsigned integers.
// Floats: NaN (any payload) the largest key; a set sign bit flips every bit, a clear one sets
// the sign bit, so -inf < ... < -0 < +0 < ... < +inf; argsort first makes -0 into +0 (a tie).
// Signed integers flip the sign bit. Descending complements the key within the element's width,
// NaN excepted. Padding slots take the largest key and an index >= n: they sort after all.
const char* kKernels = R"(
#define KMAX ((K) ~(K)0)
K key_of(E b, int total_order, int desc) {
#if KIND == 2
  if ((E)(b & MAG) > INF) return KMAX;
  if (!total_order && (E)(b & MAG) == 0) b = 0;
  E k = (b & SIGN) ? (E)~b : (E)(b | SIGN);
#elif KIND == 1
  E k = (E)(b ^ SIGN);
#else
  E k = b;
#endif
  if (desc) k = (E)~k;
  return (K)k;
}

bool after(K ka, uint ia, K kb, uint ib) { return ka > kb || (ka == kb && ia > ib); }

// Slot t of row r = t >> plog holds element i = t & pmask of that row (padding past n).
__kernel void kiln_sort_keys(__global const E* a, __global K* keys, __global uint* idx, uint n,
                             uint inner, uint plog, uint used, uint slots, int total_order,
                             int desc) {
  const uint pmask = (1u << plog) - 1u;
  for (uint t = get_global_id(0); t < slots; t += get_global_size(0)) {
    uint i = t & pmask;
    K k = KMAX;
    if (t < used && i < n) {
      uint r = t >> plog, o = r / inner, q = r - o * inner;
      k = key_of(a[(o * n + i) * inner + q], total_order, desc);
    }
    keys[t] = k;
    idx[t] = i;
  }
}

// Slots x < y = x + j: swapped unless in the order of their stage (ascending where bit k of the
// row position is clear).
#define EXCHANGE(KA, IA, x, y, pos)                         \
  {                                                         \
    K kx = KA[x], ky = KA[y];                               \
    uint ix = IA[x], iy = IA[y];                            \
    if (after(kx, ix, ky, iy) == (((pos) & pmask & k) == 0)) \
      KA[x] = ky, KA[y] = kx, IA[x] = iy, IA[y] = ix;       \
  }

// A block of 2 * local size slots in local memory, stages k0..k1 (sort_passes.h).
__kernel void kiln_sort_local(__global K* keys, __global uint* idx, uint pmask, uint k0, uint k1,
                              uint j0, __local K* lk, __local uint* li) {
  const uint l = get_local_id(0), L = get_local_size(0), base = get_group_id(0) * 2u * L;
  lk[l] = keys[base + l], li[l] = idx[base + l];
  lk[l + L] = keys[base + l + L], li[l + L] = idx[base + l + L];
  for (uint k = k0; k <= k1; k <<= 1)
    for (uint j = k == k0 ? j0 : k >> 1; j > 0; j >>= 1) {
      barrier(CLK_LOCAL_MEM_FENCE);
      uint x = ((l & ~(j - 1u)) << 1) | (l & (j - 1u)), y = x + j;
      EXCHANGE(lk, li, x, y, base + x)
    }
  barrier(CLK_LOCAL_MEM_FENCE);
  keys[base + l] = lk[l], idx[base + l] = li[l];
  keys[base + l + L] = lk[l + L], idx[base + l + L] = li[l + L];
}

// The step (k, j) across the array, work-item p exchanging one pair; or with steps = 2 the
// steps j and j / 2, work-item p holding the four slots x, x + j / 2, x + j, x + 3 j / 2 (one
// direction: k > j).
#define SWAP_IF(ka, ia, kb, ib)         \
  if (after(ka, ia, kb, ib) == up) {    \
    K kt = ka;                          \
    uint it = ia;                       \
    ka = kb, kb = kt, ia = ib, ib = it; \
  }
__kernel void kiln_sort_global(__global K* keys, __global uint* idx, uint pmask, uint k, uint j,
                               uint steps) {
  uint p = get_global_id(0);
  if (steps == 1u) {
    uint x = ((p & ~(j - 1u)) << 1) | (p & (j - 1u)), y = x + j;
    EXCHANGE(keys, idx, x, y, x)
    return;
  }
  uint h = j >> 1, t = ((p & ~(h - 1u)) << 1) | (p & (h - 1u));
  uint x = ((t & ~(j - 1u)) << 1) | (t & (j - 1u));
  bool up = (x & pmask & k) == 0;
  K k0 = keys[x], k1 = keys[x + h], k2 = keys[x + j], k3 = keys[x + j + h];
  uint i0 = idx[x], i1 = idx[x + h], i2 = idx[x + j], i3 = idx[x + j + h];
  SWAP_IF(k0, i0, k2, i2)
  SWAP_IF(k1, i1, k3, i3)
  SWAP_IF(k0, i0, k1, i1)
  SWAP_IF(k2, i2, k3, i3)
  keys[x] = k0, keys[x + h] = k1, keys[x + j] = k2, keys[x + j + h] = k3;
  idx[x] = i0, idx[x + h] = i1, idx[x + j] = i2, idx[x + j + h] = i3;
}

// Output element g = (o, i, q) takes the element ranked i in row (o, q), or its index.
__kernel void kiln_sort_out(__global const E* a, __global const uint* idx, __global E* values,
                            __global long* indices, uint n, uint inner, uint plog, uint total,
                            int arg) {
  for (uint g = get_global_id(0); g < total; g += get_global_size(0)) {
    uint row = g / inner, q = g - row * inner, o = row / n, i = row - o * n;
    uint j = idx[((o * inner + q) << plog) + i];
    if (arg)
      indices[g] = (long)j;
    else
      values[g] = a[(o * n + j) * inner + q];
  }
}
)";

std::string source(Dtype d) {
  const char* e = d.size() == 1   ? "uchar"
                  : d.size() == 2 ? "ushort"
                  : d.size() == 4 ? "uint"
                                  : "ulong";
  int kind = d.is_float() ? 2 : (d.is_int() && !d.is_unsigned()) ? 1 : 0;
  std::ostringstream os;
  os << "#define E " << e << "\n#define K " << (d.size() == 8 ? "ulong" : "uint")
     << "\n#define KIND " << kind << "\n";
  const int bits = static_cast<int>(d.size()) * 8;
  const uint64_t sign = uint64_t{1} << (bits - 1);
  uint64_t inf = 0;  // the bits of +inf: exponent all ones, mantissa zero
  if (d == float16) inf = 0x7c00;
  if (d == bfloat16) inf = 0x7f80;
  if (d == float32) inf = 0x7f800000;
  if (d == float64) inf = 0x7ff0000000000000;
  os << "#define SIGN ((E)0x" << std::hex << sign << "ul)\n#define MAG ((E)0x" << (sign - 1)
     << "ul)\n#define INF ((E)0x" << inf << "ul)\n"
     << kKernels;
  return os.str();
}

struct SortKernels {
  cl_program program = nullptr;
  cl_kernel keys = nullptr, local = nullptr, global = nullptr, out = nullptr;
  size_t lanes = 1;  // work-group size of the local passes; a block is twice as many slots
  std::mutex mu;     // argument state is shared
};

SortKernels& kernels_for(ClDevice& dev, Dtype d) {
  return cached_kernels<SortKernels>(dev, static_cast<int>(d.kind), [&] {
    auto k = std::make_unique<SortKernels>();
    k->program = build_program(dev, source(d), "sort").program;
    k->keys = make_kernel(k->program, "kiln_sort_keys", "sort");
    k->local = make_kernel(k->program, "kiln_sort_local", "sort");
    k->global = make_kernel(k->program, "kiln_sort_global", "sort");
    k->out = make_kernel(k->program, "kiln_sort_out", "sort");
    k->lanes = local_size(dev, k->local);
    return k;
  });
}

// Work-items for a loop over `items`: whole work-groups, a few per compute unit on a CPU device.
size_t items_grid(const ClDevice& dev, int64_t items, size_t lanes) {
  int64_t groups = (items + static_cast<int64_t>(lanes) - 1) / static_cast<int64_t>(lanes);
  if (dev.cpu) groups = std::min<int64_t>(groups, int64_t{4} * dev.compute_units);
  return static_cast<size_t>(std::max<int64_t>(groups, 1)) * lanes;
}

}  // namespace

cl_event enqueue_sort(ClDevice& dev, ClPool& pool, cl_command_queue q, const NativeArgs& a,
                      std::vector<std::shared_ptr<void>>& keep) {
  check_native_buffers(a);
  const int64_t total = a.out_elements();
  if (total == 0) return nullptr;
  cl_mem in = mem_on(dev, a.buffers[0], a), out = mem_on(dev, a.buffers[1], a);
  SortKernels& k = kernels_for(dev, a.dtype);
  const int64_t rows = a.outer * a.inner;
  SortPlan plan = plan_sort(rows, a.n, static_cast<int64_t>(2 * k.lanes));
  const size_t key_bytes = a.dtype.size() == 8 ? 8 : 4;
  auto keys = pool.allocate(static_cast<size_t>(plan.slots) * key_bytes);
  auto idx = pool.allocate(static_cast<size_t>(plan.slots) * 4);
  keep = {keys, idx};
  cl_mem mk = keys->mem(), mi = idx->mem();
  cl_uint n = static_cast<cl_uint>(a.n), inner = static_cast<cl_uint>(a.inner), plog = 0;
  while ((int64_t{1} << plog) < plan.padded) ++plog;
  cl_uint pmask = static_cast<cl_uint>(plan.padded - 1);
  cl_uint used = static_cast<cl_uint>(rows * plan.padded), slots = static_cast<cl_uint>(plan.slots);
  cl_int total_order = a.op == Op::Sort ? 1 : 0, desc = a.descending ? 1 : 0;
  std::lock_guard<std::mutex> lock(k.mu);
  launch(q, k.keys, "sort", items_grid(dev, plan.slots, k.lanes), k.lanes, nullptr, in, mk, mi, n,
         inner, plog, used, slots, total_order, desc);
  for (const SortPass& p : plan.passes) {
    if (p.local) {
      cl_uint k0 = p.k0, k1 = p.k1, j0 = p.j0;
      launch(q, k.local, "sort", static_cast<size_t>(plan.slots) / 2, k.lanes, nullptr, mk, mi,
             pmask, k0, k1, j0, LocalBytes{2 * k.lanes * key_bytes}, LocalBytes{2 * k.lanes * 4});
    } else {
      launch(q, k.global, "sort", static_cast<size_t>(plan.slots) / (2 * p.steps), k.lanes, nullptr,
             mk, mi, pmask, cl_uint{p.k0}, cl_uint{p.j0}, cl_uint{p.steps});
    }
  }
  cl_uint count = static_cast<cl_uint>(total);
  cl_int arg = a.op == Op::Argsort ? 1 : 0;
  cl_event ev = nullptr;
  launch(q, k.out, "sort", items_grid(dev, total, k.lanes), k.lanes, &ev, in, mi, out, out, n,
         inner, plog, count, arg);
  return ev;
}

}  // namespace kiln::opencl
