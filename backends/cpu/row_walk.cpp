#include "backends/cpu/row_walk.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

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

namespace {

// "512K" / "1024K" / "8M" as in /sys/devices/system/cpu/cpu0/cache/index*/size.
int64_t sysfs_l2() {
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level(dir + "level"), size(dir + "size");
    int lv = 0;
    std::string sz;
    if (!(level >> lv) || lv != 2 || !(size >> sz) || sz.empty()) continue;
    int64_t n = std::stoll(sz);
    char unit = sz.back();
    return unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
  }
  return 0;
}

int64_t query_l2() {
  long n = sysconf(_SC_LEVEL2_CACHE_SIZE);
  if (n > 0) return n;
  int64_t s = sysfs_l2();
  return s > 0 ? s : int64_t{256} << 10;
}

}  // namespace

int64_t l2_cache_bytes() {
  static const int64_t bytes = query_l2();
  return bytes;
}

int64_t row_walk_limit() {
  if (const char* e = std::getenv("KILN_ROW_WALK_BYTES"); e && *e) {
    char* end = nullptr;
    long long v = std::strtoll(e, &end, 10);
    if (*end || v < 0)
      throw_error("KILN_ROW_WALK_BYTES=", e, " is not a byte count; give a whole number >= 0");
    return v;
  }
  return l2_cache_bytes();
}

bool row_walk_fits(const Kernel& k) {
  if (!k.is_rows()) return false;
  for (const Dim& d : k.domain)
    if (d.is_runtime()) return false;
  return row_bytes(k) <= row_walk_limit();
}

}  // namespace kiln::cpu
