// `kiln bench --peers`: runs tools/bench/peers.py (NumPy, JAX, MLX, whichever the given Python
// can import) on the suite's cases in the same run and reads its results back.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/report.h"

namespace kiln::bench {

// Fills r.peers and r.peers_missing, running `script` (peers.py) with `python`. A Python that
// cannot run at all raises kiln::Error.
void run_peers(const std::vector<Case>& cases, const std::string& python, const std::string& script,
               double seconds, Report& r);
// peers.py in the source tree this library was built from (the kiln command's default; the
// Python package ships its own copy).
std::string source_tree_peers_script();

}  // namespace kiln::bench
