// FNV-1a (64-bit) and the 16-hex-digit form of a 64-bit value: what Kiln's disk caches, tuner
// tables and artifacts name and check their entries by. The values are on disk, so the
// function must not change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace kiln {

constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ULL;

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aBasis) {
  auto* c = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ULL;
  return h;
}

inline uint64_t fnv1a(std::string_view s, uint64_t h = kFnv1aBasis) {
  return fnv1a(s.data(), s.size(), h);
}

// 16 lowercase hex digits, leading zeros kept.
inline std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace kiln
