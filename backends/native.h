// What every backend shares about the native primitives (sort, argsort, scans, gathers and
// scatters; NativeArgs in backend.h): their names in errors and profiles, the index rule, the
// order sorting uses, and each scan's identity, written once as the reference executes them.
#pragma once

#include <string>

#include "backends/backend.h"
#include "backends/scalar_ops.h"

namespace kiln {

// "sort float32", "cumsum int64", "gather float16": for errors and profiles.
std::string native_name(const NativeArgs& a);
// Raises kiln::Error when the buffers do not hold what `a` describes (a bug in the caller).
void check_native_args(const NativeArgs& a, const std::vector<size_t>& buffer_bytes);
// The same for a's own buffers (a null one counts as 0 bytes).
void check_native_buffers(const NativeArgs& a);

// The index rule: negative from the end, then clamped to [0, n - 1] (n > 0).
inline int64_t native_index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i < 0 ? 0 : (i >= n ? n - 1 : i);
}

namespace scalar {

// Sort order of elements of dtype d: numbers ascending (or descending), NaN after every number
// in both directions, equal elements (and NaNs among themselves) unordered: callers keep them
// by position (stable).
// `total` (sort's values): -0 sorts before +0 (in descending order after), as the cpu
// backend's radix keys order them; argsort keeps the two as ties.
inline bool sorts_before(Val x, Val y, Dtype d, bool descending, bool total = false) {
  if (d.is_float()) {
    bool xn = std::isnan(x.f), yn = std::isnan(y.f);
    if (xn || yn) return !xn && yn;
    if (total && x.f == 0 && y.f == 0 && std::signbit(x.f) != std::signbit(y.f))
      return std::signbit(x.f) != descending;
    return descending ? x.f > y.f : x.f < y.f;
  }
  return descending ? int_less(y.i, x.i, d) : int_less(x.i, y.i, d);
}

// The value a scan starts from (what an exclusive scan gives at its first place).
Val scan_identity(ScanOp op, Dtype d);
// acc combined with x, as the scan's kernel holds values of dtype d (float16 and bfloat16 in
// float32; each stored value rounds to d).
Val scan_combine(ScanOp op, Val acc, Val x, Dtype d);

}  // namespace scalar
}  // namespace kiln
