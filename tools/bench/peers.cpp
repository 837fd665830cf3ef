#include "tools/bench/peers.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

namespace kiln::bench {

std::string source_tree_peers_script() { return KILN_SOURCE_DIR "/tools/bench/peers.py"; }

void run_peers(const std::vector<Case>& cases, const std::string& python, const std::string& script,
               double seconds, Report& r) {
  using json = nlohmann::json;
  json spec = {{"seconds", seconds}, {"cases", json::array()}};
  for (const Case& c : cases)
    if (!c.dims.empty())
      spec["cases"].push_back({{"name", c.name}, {"shape", c.shape}, {"dims", c.dims}});
  char path[] = "/tmp/kiln-bench-peers-XXXXXX";
  int fd = ::mkstemp(path);
  if (fd < 0) throw Error("kiln bench --peers: cannot create a temporary file in /tmp");
  ::close(fd);
  std::ofstream(path) << spec.dump();
  std::string cmd = "'" + python + "' '" + script + "' < " + path;
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = ::pclose(p);
    std::remove(path);
    if (status != 0 || out.empty())
      throw Error("kiln bench --peers: '" + python + "' " + script + " exited with status " +
                  std::to_string(status) + "; pass --python with a working Python 3");
  } else {
    std::remove(path);
    throw Error("kiln bench --peers: cannot run '" + python + "'");
  }
  json res = json::parse(out, nullptr, false);
  if (res.is_discarded() || !res.contains("results"))
    throw Error("kiln bench --peers: peers.py printed something that is not its JSON result");
  r.peers_asked = true;
  for (const json& x : res["results"]) {
    PeerResult p;
    p.name = x.value("case", ""), p.shape = x.value("shape", "");
    p.peer = x.value("peer", ""), p.mode = x.value("mode", "");
    p.median_ms = x.value("median_ms", 0.0), p.min_ms = x.value("min_ms", 0.0);
    p.max_ms = x.value("max_ms", 0.0), p.error = x.value("error", "");
    r.peers.push_back(p);
  }
  for (const json& m : res["missing"]) r.peers_missing.push_back(m.get<std::string>());
}

}  // namespace kiln::bench
