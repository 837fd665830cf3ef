// The `kiln` command (devices, demo, bench, tune, inspect, run) as one function, so that the
// executable (tools/kiln.cpp) and the Python package (`python -m kiln`, python/src/cli.cpp) run the
// same code: same suites, same JSON and HTML reports.
#pragma once

#include <string>

namespace kiln::tools {

struct CommandDefaults {
  std::string python = "python3";  // what `kiln bench --peers` runs peers.py with
  std::string peers_script;        // peers.py; empty: the one in the source tree
};

// Parses argv (argv[0] is the program's name, as in main) and runs the subcommand; returns the
// exit status. Errors are printed to stderr with status 1; --help prints and returns 0.
int run_command(int argc, const char* const* argv, const CommandDefaults& defaults = {});

}  // namespace kiln::tools
