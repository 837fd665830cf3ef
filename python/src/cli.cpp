// `python -m kiln ...` (python/kiln/__main__.py): the very `kiln` command (tools/cli.h), so a pip
// user has `devices`, `demo`, `bench` (same suites, JSON and HTML), `inspect` and `run` without
// the C++ build tree.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln_py.h"
#include "tools/cli.h"

namespace kiln::py {

void init_cli(nb::module_& m) {
  m.def(
      "_run_command",
      [](const std::vector<std::string>& argv, const std::string& python,
         const std::string& peers_script) {
        std::vector<const char*> args;
        for (const std::string& a : argv) args.push_back(a.c_str());
        tools::CommandDefaults defaults{python, peers_script};
        nb::gil_scoped_release release;
        return tools::run_command(static_cast<int>(args.size()), args.data(), defaults);
      },
      nb::arg("argv"), nb::arg("python"), nb::arg("peers_script"),
      "Runs the kiln command with argv (argv[0]: the program's name); returns its exit status.");
}

}  // namespace kiln::py
