// The host's last-level cache size, for choices that keep a working set in cache: the cpu
// backend's streaming stores and, on devices that are the host's own cores (PoCL, lavapipe),
// how many bytes of calls a stream keeps in flight.
#pragma once

#include <cstdint>

namespace kiln {

// The highest-level data or unified cache sysfs lists for cpu0, else what glibc's sysconf
// reports (from cpuid on x86); 0 when neither says. Read once.
int64_t last_level_cache_bytes();

}  // namespace kiln
