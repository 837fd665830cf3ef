// The extension module kiln._kiln: every binding file's init, in dependency order, and
// kiln::Error as the Python exception kiln.Error.
#include "kiln_py.h"

namespace kiln::py {
namespace {

// kiln.Error derives from ValueError (what MLX raises for bad arguments) and RuntimeError (what
// runtime failures are in Python), so `except ValueError` and `except RuntimeError` both see it.
nb::object make_error_type(nb::module_& m) {
  nb::object bases = nb::make_tuple(nb::handle(PyExc_ValueError), nb::handle(PyExc_RuntimeError));
  PyObject* t = PyErr_NewExceptionWithDoc(
      "kiln.Error",
      "Raised by Kiln for bad arguments (what was wrong and what would be valid) and for failed "
      "work (a kernel or device error); other arrays, streams and jobs stay usable.",
      bases.ptr(), nullptr);
  return nb::steal(t);
}

}  // namespace
}  // namespace kiln::py

NB_MODULE(_kiln, m) {
  using namespace kiln::py;
  // Leaked on purpose: the type lives as long as the interpreter, past any static destructor.
  static PyObject* error_type = make_error_type(m).release().ptr();
  m.attr("Error") = nb::handle(error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      PyErr_SetString(error_type, e.what());
    }
  });
  init_dtypes(m);
  init_devices(m);
  init_array(m);
  init_ops(m);
  init_array_methods(m);
  init_eval(m);
  init_aot(m);
  init_compile(m);
  init_jobs(m);
  init_cli(m);
  init_transforms(m);
  init_random(m);
  init_io(m);
  init_memory(m);
  init_distributed(m);
  init_pending_work(m);
}
