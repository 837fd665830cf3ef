#include "backends/native.h"

#include <limits>

#include "graph/error.h"

namespace kiln {

std::string native_name(const NativeArgs& a) {
  std::string op = a.op == Op::Scan ? op_name(a.scan) : op_name(a.op);
  return op + " " + a.dtype.name();
}

void check_native_args(const NativeArgs& a, const std::vector<size_t>& bytes) {
  size_t want = a.op == Op::Gather ? 3 : (a.op == Op::ScatterAdd ? 4 : 2);
  if (a.buffers.size() != want || bytes.size() != want)
    throw_error("internal: ", native_name(a), " got ", a.buffers.size(), " buffers, needs ", want);
  if (a.outer < 0 || a.n < 0 || a.inner < 0 || a.m < 0)
    throw_error("internal: ", native_name(a), " with a negative extent");
  // Products checked for overflow: an artifact's extents are untrusted.
  auto times = [&](size_t x, int64_t y) {
    size_t r;
    if (__builtin_mul_overflow(x, static_cast<size_t>(y), &r) || r > (size_t(1) << 62))
      throw_error("internal: ", native_name(a), " extents overflow");
    return r;
  };
  size_t d = a.dtype.size(), rows = times(static_cast<size_t>(a.outer), a.inner);
  size_t full = times(times(rows, a.n), 8), picked = times(times(rows, a.m), 8);
  full /= 8, picked /= 8;
  size_t idx = a.shared_index ? static_cast<size_t>(a.m) : picked;
  std::vector<size_t> need;
  switch (a.op) {
    case Op::Sort: need = {full * d, full * d}; break;
    case Op::Argsort: need = {full * d, full * 8}; break;
    case Op::Scan: need = {full * d, full * d}; break;
    case Op::Gather: need = {full * d, idx * 8, picked * d}; break;
    case Op::ScatterAdd: need = {full * d, idx * 8, picked * d, full * d}; break;
    default: throw_error("internal: ", op_name(a.op), " is not a native primitive");
  }
  if ((a.op == Op::Gather || a.op == Op::ScatterAdd) && a.m > 0 && a.n == 0)
    throw_error("internal: ", native_name(a), " indexes an axis of extent 0");
  for (size_t b = 0; b < want; ++b)
    if (bytes[b] < need[b])
      throw_error("internal: ", native_name(a), " buffer ", b, " holds ", bytes[b],
                  " bytes, needs ", need[b]);
}

void check_native_buffers(const NativeArgs& a) {
  std::vector<size_t> bytes;
  for (Buffer* b : a.buffers) bytes.push_back(b ? b->bytes() : 0);
  check_native_args(a, bytes);
}

EventPtr Queue::enqueue_native(const NativeArgs& a) {
  throw_error(native_name(a), ": this backend has no native ", op_name(a.op),
              " (a backend runs sort, argsort, scans, gathers and scatters itself or raises)");
}

namespace scalar {

Val scan_identity(ScanOp op, Dtype d) {
  Val v;
  bool f = d.is_float();
  switch (op) {
    case ScanOp::Sum: break;
    case ScanOp::Prod: v.f = 1, v.i = 1; break;
    case ScanOp::LogAddExp: v.f = -INFINITY; break;
    case ScanOp::Max:
      if (f)
        v.f = -INFINITY;
      else if (d.is_unsigned() || d.is_bool())
        v.i = 0;
      else
        v.i = d == int8 ? INT8_MIN : (d == int32 ? INT32_MIN : INT64_MIN);
      break;
    case ScanOp::Min:
      if (f)
        v.f = INFINITY;
      else if (d.is_bool())
        v.i = 1;
      else if (d == uint64)
        v.i = -1;  // all bits
      else
        v.i = d == int8     ? INT8_MAX
              : d == uint8  ? UINT8_MAX
              : d == int32  ? INT32_MAX
              : d == uint32 ? static_cast<int64_t>(UINT32_MAX)
                            : INT64_MAX;
      break;
  }
  return v;
}

Val scan_combine(ScanOp op, Val acc, Val x, Dtype d) {
  switch (op) {
    case ScanOp::Sum:
      if (d.is_bool()) return Val{0, acc.i | x.i};
      return binary(BinaryOp::Add, acc, x, d);
    case ScanOp::Prod:
      if (d.is_bool()) return Val{0, acc.i & x.i};
      return binary(BinaryOp::Multiply, acc, x, d);
    case ScanOp::Max: return binary(BinaryOp::Maximum, acc, x, d);
    case ScanOp::Min: return binary(BinaryOp::Minimum, acc, x, d);
    case ScanOp::LogAddExp: {
      double a = acc.f, b = x.f, m = std::max(a, b), r;
      if (std::isnan(a) || std::isnan(b))
        r = NAN;
      else if (std::isinf(m))
        r = m;  // +inf wins; both -inf stay -inf
      else
        r = m + std::log1p(std::exp(std::min(a, b) - m));
      return Val{round_to(r, d), 0};
    }
  }
  return acc;
}

}  // namespace scalar
}  // namespace kiln
