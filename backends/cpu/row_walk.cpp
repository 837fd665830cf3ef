#include "backends/cpu/row_walk.h"

#include <cstdlib>

#include "graph/error.h"

namespace kiln::cpu {

int64_t row_bytes(const Kernel& k) {
  int first = k.ndim() - k.row_axes();
  int64_t elements = 1;
  for (int a = first; a < k.ndim(); ++a) elements *= k.domain[a].value;
  int64_t per_element = 0;
  for (const KernelBuffer& b : k.buffers) {
    bool moves = false;
    for (int a = first; a < k.ndim(); ++a) moves = moves || !(b.map.strides[a] == Dim::constant(0));
    if (moves) per_element += static_cast<int64_t>(b.dtype.size());
  }
  return elements * per_element;
}

int64_t row_walk_limit() {
  const char* e = std::getenv("KILN_ROW_WALK_BYTES");
  if (!e || !*e) return -1;
  char* end = nullptr;
  long long v = std::strtoll(e, &end, 10);
  if (*end || v < 0)
    throw_error("KILN_ROW_WALK_BYTES=", e, " is not a byte count; give a whole number >= 0");
  return v;
}

bool row_walk_fits(const Kernel& k) {
  if (!k.is_rows()) return false;
  for (const Dim& d : k.domain)
    if (d.is_runtime()) return false;
  int64_t limit = row_walk_limit();
  return limit < 0 || row_bytes(k) <= limit;
}

}  // namespace kiln::cpu
