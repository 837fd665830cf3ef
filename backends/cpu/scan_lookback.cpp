#include "backends/cpu/scan_lookback.h"

#include <cmath>

#include "backends/cpu/tune.h"
#include "graph/immortal.h"

namespace kiln::cpu {

namespace {

// Raised when the scans' loops change, so that a table's rates measured with older code are
// measured again.
constexpr int kScanSplitVersion = 1;

Tuner& scan_split_tuner() {
  static Immortal<Tuner> t("scan_split",
                           host_cpu_model() + "|kiln " KILN_VERSION_STRING "|scan split " +
                               std::to_string(kScanSplitVersion),
                           "");
  return t.get();
}

}  // namespace

double lookback_weight(const std::string& key, const std::function<LookbackProbe()>& make) {
  TuneResult r = scan_split_tuner().result(key, {"scan", "total"}, [&] {
    LookbackProbe p = make();
    return std::vector<TuneCandidate>{{"scan", p.scan}, {"total", p.total}};
  });
  double t_scan = 0, t_total = 0;
  for (const auto& [id, seconds] : r.seconds) (id == "scan" ? t_scan : t_total) = seconds;
  double w = t_scan + t_total > 0 ? t_scan / (t_scan + t_total) : 1;
  return std::clamp(std::isfinite(w) ? w : 1.0, 0.05, 1.0);
}

std::vector<int64_t> lookback_starts(int64_t blocks, int chunks, double later) {
  std::vector<int64_t> start(static_cast<size_t>(chunks) + 1);
  double whole = 1 + (chunks - 1) * later;
  for (int c = 1; c < chunks; ++c)
    start[c] = std::llround(static_cast<double>(blocks) * (1 + (c - 1) * later) / whole);
  start[chunks] = blocks;
  return start;
}

}  // namespace kiln::cpu
