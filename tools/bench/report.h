// What `kiln bench` writes: JSON (one record per case, device and mode; schema in README) and a
// self-contained HTML report with SVG charts (time per case per device, fraction of the bound,
// compiled over eager speedup) and a device comparison table.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/suite.h"

namespace kiln::bench {

// Peers (NumPy, JAX, MLX) measured by tools/bench/peers.py in the same run.
struct PeerResult {
  std::string name, shape, peer, mode;  // peer: "numpy", "jax", "mlx"; mode: "eager" or "jit"
  double median_ms = 0, min_ms = 0, max_ms = 0;
  std::string error;
};

struct Report {
  Machine machine;
  std::string suite, date;
  std::vector<std::string> devices;
  std::vector<Result> results;
  bool peers_asked = false;
  std::vector<PeerResult> peers;
  std::vector<std::string> peers_missing;  // "jax: No module named 'jax'"
};

void write_json(const Report& r, const std::string& path);
void write_html(const Report& r, const std::string& path);

}  // namespace kiln::bench
