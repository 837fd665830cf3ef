#include "backends/host_cache.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace kiln {

namespace {

// A sysfs cache size ("32768K", "1M") in bytes; 0 if unreadable.
int64_t sysfs_size(const std::string& text) {
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || v <= 0) return 0;
  switch (*end) {
    case 'K': return v << 10;
    case 'M': return v << 20;
    case 'G': return v << 30;
    default: return v;
  }
}

std::string read_word(const std::string& path) {
  std::ifstream f(path);
  std::string w;
  f >> w;
  return w;
}

int64_t sysfs_last_level() {
  int best_level = 0;
  int64_t bytes = 0;
  for (int i = 0;; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string level = read_word(dir + "level");
    if (level.empty()) break;
    if (read_word(dir + "type") == "Instruction") continue;
    int l = std::atoi(level.c_str());
    int64_t size = sysfs_size(read_word(dir + "size"));
    if (l > best_level && size > 0) best_level = l, bytes = size;
  }
  return bytes;
}

int64_t sysconf_last_level() {
#if defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    long v = sysconf(name);
    if (v > 0) return v;
  }
#endif
  return 0;
}

}  // namespace

int64_t last_level_cache_bytes() {
  static const int64_t bytes = [] {
    int64_t b = sysfs_last_level();
    return b > 0 ? b : sysconf_last_level();
  }();
  return bytes;
}

}  // namespace kiln
