// The reference backend's native primitives: the plainest loops that say what each one means
// (a stable comparison sort, a sequential scan, one read or add per index), through the same
// scalar semantics as the interpreter. Every backend's sort, scan, gather and scatter is tested
// against these.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backends/native.h"
#include "backends/reference/reference.h"
#include "graph/error.h"

namespace kiln {

namespace {

using scalar::Val;

void* ptr(Buffer* b) {
  if (!b->host_ptr()) throw_error("reference backend: a native primitive got a non-host buffer");
  return b->host_ptr();
}

void sort_rows(const NativeArgs& a) {
  void* in = ptr(a.buffers[0]);
  void* out = ptr(a.buffers[1]);
  Dtype d = a.dtype;
  std::vector<Val> row(a.n);
  std::vector<int64_t> order(a.n);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t q = 0; q < a.inner; ++q) {
      int64_t base = o * a.n * a.inner + q;
      for (int64_t i = 0; i < a.n; ++i) row[i] = scalar::load(in, d, base + i * a.inner);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return scalar::sorts_before(row[x], row[y], d, a.descending, a.op == Op::Sort);
      });
      for (int64_t i = 0; i < a.n; ++i) {
        if (a.op == Op::Sort)
          scalar::store(out, d, base + i * a.inner, row[order[i]]);
        else
          scalar::store(out, int64, base + i * a.inner, Val{0, order[i]});
      }
    }
}

void scan_rows(const NativeArgs& a) {
  void* in = ptr(a.buffers[0]);
  void* out = ptr(a.buffers[1]);
  Dtype d = a.dtype;
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t q = 0; q < a.inner; ++q) {
      Val acc = scalar::scan_identity(a.scan, d);
      for (int64_t k = 0; k < a.n; ++k) {
        int64_t i = a.reverse ? a.n - 1 - k : k;
        int64_t at = (o * a.n + i) * a.inner + q;
        Val x = scalar::load(in, d, at);
        if (!a.inclusive) scalar::store(out, d, at, acc);
        acc = scalar::scan_combine(a.scan, acc, x, d);
        if (a.inclusive) scalar::store(out, d, at, acc);
      }
    }
}

// The int64 index of output (or update) element (o, j, q), by the index rule.
int64_t index_at(const NativeArgs& a, const void* idx, int64_t o, int64_t j, int64_t q) {
  int64_t at = a.shared_index ? j : (o * a.m + j) * a.inner + q;
  return native_index(scalar::load(idx, int64, at).i, a.n);
}

void gather_rows(const NativeArgs& a) {
  const void* src = ptr(a.buffers[0]);
  const void* idx = ptr(a.buffers[1]);
  void* out = ptr(a.buffers[2]);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j = 0; j < a.m; ++j)
      for (int64_t q = 0; q < a.inner; ++q) {
        int64_t i = index_at(a, idx, o, j, q);
        scalar::store(out, a.dtype, (o * a.m + j) * a.inner + q,
                      scalar::load(src, a.dtype, (o * a.n + i) * a.inner + q));
      }
}

void scatter_add_rows(const NativeArgs& a) {
  const void* base = ptr(a.buffers[0]);
  const void* idx = ptr(a.buffers[1]);
  const void* upd = ptr(a.buffers[2]);
  void* out = ptr(a.buffers[3]);
  Dtype d = a.dtype;
  int64_t total = a.outer * a.n * a.inner;
  // Accumulate as the scalar semantics add (float16/bfloat16 in float32), then store once.
  std::vector<Val> acc(total);
  for (int64_t e = 0; e < total; ++e) acc[e] = scalar::load(base, d, e);
  for (int64_t o = 0; o < a.outer; ++o)
    for (int64_t j = 0; j < a.m; ++j)
      for (int64_t q = 0; q < a.inner; ++q) {
        int64_t e = (o * a.n + index_at(a, idx, o, j, q)) * a.inner + q;
        Val u = scalar::load(upd, d, (o * a.m + j) * a.inner + q);
        acc[e] = scalar::scan_combine(ScanOp::Sum, acc[e], u, d);
      }
  for (int64_t e = 0; e < total; ++e) scalar::store(out, d, e, acc[e]);
}

}  // namespace

void reference_native(const NativeArgs& a) {
  std::vector<size_t> bytes;
  for (Buffer* b : a.buffers) bytes.push_back(b ? b->bytes() : 0);
  check_native_args(a, bytes);
  switch (a.op) {
    case Op::Sort:
    case Op::Argsort: sort_rows(a); break;
    case Op::Scan: scan_rows(a); break;
    case Op::Gather: gather_rows(a); break;
    case Op::ScatterAdd: scatter_add_rows(a); break;
    default: throw_error("internal: ", op_name(a.op), " is not a native primitive");
  }
}

}  // namespace kiln
