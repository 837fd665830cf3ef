// kiln.eval and kiln.async_eval over pytrees: the arrays anywhere in the arguments.
#include "numpy_bridge.h"
#include "tree.h"

namespace kiln::py {
namespace {

std::vector<Array> arrays_in(const nb::args& args) {
  std::vector<Array> out;
  for (nb::handle h : args) {
    if (nb::isinstance<Array>(h)) {  // the common case, without building a structure
      out.push_back(nb::cast<Array>(h));
      continue;
    }
    Flat f = flatten(h, Leaves::Any);
    out.insert(out.end(), f.arrays.begin(), f.arrays.end());
  }
  return out;
}

}  // namespace

void init_eval(nb::module_& m) {
  m.def(
      "eval", [](nb::args args) { wait_for(arrays_in(args)); },
      "Evaluates every array in the arguments (pytrees of arrays) and waits for them; raises "
      "the first error among them. Ctrl-C cancels the work and raises KeyboardInterrupt.");
  m.def(
      "async_eval",
      [](nb::args args) {
        std::vector<Array> arrays = arrays_in(args);
        nb::gil_scoped_release release;
        async_eval(arrays);
      },
      "Starts evaluating every array in the arguments and returns at once.");
}

}  // namespace kiln::py
