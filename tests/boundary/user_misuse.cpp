// Compile-fail checks of the public boundary: a user's file that includes only kiln.h. Case 0
// must compile (the control: everything but the misuse line is valid); every other case must
// fail to compile with the error ctest expects (tests/CMakeLists.txt, boundary.*).
#include "kiln.h"

int main() {
  kiln::Array a = kiln::zeros({2});
#if KILN_BOUNDARY_CASE == 0
  return a.size() == 2 ? 0 : 1;
#elif KILN_BOUNDARY_CASE == 1
  return a.node()->data != nullptr;  // node state is internal
#elif KILN_BOUNDARY_CASE == 2
  a.node()->in_flight = true;  // evaluation flags are internal
#elif KILN_BOUNDARY_CASE == 3
  kiln::register_backend(nullptr);  // registration is in backends/extension.h
#elif KILN_BOUNDARY_CASE == 4
  kiln::backend_for(kiln::device("reference"));  // so is the backend lookup
#elif KILN_BOUNDARY_CASE == 5
  kiln::ProfileScope::record(kiln::TaskEvent{});  // the executor's side of profiling
#elif KILN_BOUNDARY_CASE == 6
  kiln::Array b(a.shape(), a.dtype(), kiln::Op::Constant, {}, {}, {});  // building raw nodes
#elif KILN_BOUNDARY_CASE == 7
  return a.buffer() != nullptr;  // buffers are internal
#elif KILN_BOUNDARY_CASE == 8
  kiln::set_device_checker(nullptr);  // the hooks higher layers install are internal
#endif
}
