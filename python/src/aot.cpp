// kiln.Lowered and kiln.Executable (aot.h): the C++ stages with the Python trees of a call, the
// analyses as objects whose str() is the C++ text, and artifacts saved and loaded by path.
#include "aot.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include "tree.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

struct PyLowered {
  Lowered lowered;
  Stage stage;
};

struct PyExecutable {
  Executable exe;
  Stage stage;
};

std::string path_of(nb::handle file) {
  return nb::cast<std::string>(nb::module_::import_("os").attr("fspath")(file));
}

// The arrays of a call, checked against the tree the executable was lowered for.
// True, with the arrays in `out`, when every argument is an array.
bool only_arrays(const nb::args& args, std::vector<Array>& out) {
  for (nb::handle h : args)
    if (!nb::isinstance<Array>(h)) return false;
  out.reserve(args.size());
  for (nb::handle h : args) out.push_back(nb::cast<Array>(h));
  return true;
}

std::vector<Array> call_arrays(const Stage& stage, const nb::args& args, const nb::kwargs& kwargs) {
  std::vector<Array> arrays;
  bool loaded = stage.args_structure.is_none();
  if (kwargs.size() == 0 && (loaded || stage.positional_arrays == static_cast<int>(args.size())) &&
      only_arrays(args, arrays))
    return arrays;
  if (loaded) {  // arrays, in the order the artifact lists them
    if (kwargs.size() != 0)
      throw Error(
          "a loaded kiln.Executable takes its arguments' arrays positionally (the artifact holds "
          "no argument names); got keyword arguments");
    return flatten(args, Leaves::Arrays, "a loaded executable's argument").arrays;
  }
  Flat flat = flatten(nb::make_tuple(args, kwargs), Leaves::Constants, "an argument");
  if (!flat.structure.equal(stage.args_structure)) {
    throw Error(
        "kiln.Executable: these arguments are not those it was lowered for (their nesting, "
        "keywords or a non-array value differ; arrays must keep their dtypes and shapes); "
        "lower again with f.lower(...) for them");
  }
  return std::move(flat.arrays);
}

// remap= as Executable::load takes it: a dict whose keys and values are device names or
// kiln.Device objects (None: no remapping).
DeviceMap device_map(nb::handle remap) {
  DeviceMap out;
  if (remap.is_none()) return out;
  if (!nb::isinstance<nb::dict>(remap))
    throw nb::type_error(("Executable.load: remap is a " +
                          std::string(nb::type_name(remap.type()).c_str()) +
                          "; give a dict such as {\"opencl:0\": \"cpu:0\"}")
                             .c_str());
  auto name = [](nb::handle h) {
    if (nb::isinstance<Device>(h)) return nb::cast<Device>(h).str();
    if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
    throw nb::type_error(("Executable.load: remap holds a " +
                          std::string(nb::type_name(h.type()).c_str()) +
                          "; its keys and values are device names (\"opencl:0\") or kiln.Device")
                             .c_str());
  };
  for (auto [k, v] : nb::borrow<nb::dict>(remap)) out[name(k)] = name(v);
  return out;
}

nb::object run_executable(const PyExecutable& e, const nb::args& args, const nb::kwargs& kwargs) {
  std::vector<Array> in = call_arrays(e.stage, args, kwargs);
  std::vector<Array> out;
  const Executable& exe = e.exe;
  ArrayFn run = [&exe](const std::vector<Array>& a) { return exe(a); };
  if (e.stage.owner.is_none()) {
    nb::gil_scoped_release release;
    out = run(in);
  } else {
    out = run_with_state(e.stage, in, run);
  }
  if (e.stage.out_structure.is_none()) {
    nb::list l;
    for (const Array& a : out) l.append(nb::cast(a));
    return l;
  }
  return unflatten(e.stage.out_structure, out);
}

// Garbage collection: a stage's trees and owner may reach back to it (a stateful function whose
// globals hold its executable), so the collector sees them.
template <typename T>
int traverse_stage(PyObject* self, visitproc visit, void* arg) {
  if (!nb::inst_ready(self)) return 0;
  const Stage& st = nb::inst_ptr<T>(self)->stage;
  for (const nb::object* o :
       {&st.args_structure, &st.out_structure, &st.owner, &st.state_structure})
    Py_VISIT(o->ptr());
  Py_VISIT(Py_TYPE(self));
  return 0;
}

template <typename T>
int clear_stage(PyObject* self) {
  nb::inst_ptr<T>(self)->stage = Stage{};
  return 0;
}

template <typename T>
PyType_Slot stage_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(traverse_stage<T>)},
                             {Py_tp_clear, reinterpret_cast<void*>(clear_stage<T>)},
                             {0, nullptr}};

void init_analyses(nb::module_& m) {
  nb::class_<CostAnalysis::Device>(m, "DeviceCost")
      .def_ro("flops", &CostAnalysis::Device::flops)
      .def_ro("bytes_read", &CostAnalysis::Device::bytes_read)
      .def_ro("bytes_written", &CostAnalysis::Device::bytes_written)
      .def_ro("kernels", &CostAnalysis::Device::kernels)
      .def_ro("copies", &CostAnalysis::Device::copies)
      .def_ro("library_calls", &CostAnalysis::Device::library_calls);
  nb::class_<CostAnalysis>(m, "CostAnalysis",
                           "Work per device label (\"cpu:0\", or \"caller\" for lanes that follow "
                           "the caller's stream) and in total; str() is the C++ text.")
      .def_ro("devices", &CostAnalysis::devices)
      .def_ro("total", &CostAnalysis::total)
      .def("__str__", &CostAnalysis::str);
  nb::class_<MemoryAnalysis::Device>(m, "DeviceMemory")
      .def_ro("argument_bytes", &MemoryAnalysis::Device::argument_bytes)
      .def_ro("output_bytes", &MemoryAnalysis::Device::output_bytes)
      .def_ro("donated_bytes", &MemoryAnalysis::Device::donated_bytes)
      .def_ro("argument_copy_bytes", &MemoryAnalysis::Device::argument_copy_bytes)
      .def_ro("temp_bytes", &MemoryAnalysis::Device::temp_bytes);
  nb::class_<MemoryAnalysis>(m, "MemoryAnalysis",
                             "What one call holds while it runs, per device; peak_bytes is the "
                             "call's peak. str() is the C++ text.")
      .def_ro("devices", &MemoryAnalysis::devices)
      .def_prop_ro("peak_bytes", &MemoryAnalysis::peak_bytes)
      .def("__str__", &MemoryAnalysis::str);
}

}  // namespace

nb::object make_lowered(Lowered lowered, Stage stage) {
  return nb::cast(PyLowered{std::move(lowered), std::move(stage)});
}

void init_aot(nb::module_& m) {
  init_analyses(m);
  nb::class_<PyLowered>(m, "Lowered", nb::type_slots(stage_slots<PyLowered>),
                        "A function traced and lowered for one signature (f.lower(*args)); "
                        "nothing has run.")
      .def(
          "as_text", [](const PyLowered& l) { return l.lowered.as_text(); },
          "The signature, the graph with placements, the plan and every kernel's IR.")
      .def("cost_analysis", [](const PyLowered& l) { return l.lowered.cost_analysis(); })
      .def(
          "compile",
          [](const PyLowered& l) {
            Executable exe;
            {
              nb::gil_scoped_release release;
              exe = l.lowered.compile();
            }
            return PyExecutable{std::move(exe), l.stage};
          },
          "Builds every kernel: a kiln.Executable, callable with arguments like the lowering's.");
  nb::class_<PyExecutable>(m, "Executable", nb::type_slots(stage_slots<PyExecutable>),
                           "Kernels built for one signature: call it with arrays; save(path) "
                           "writes an artifact that Executable.load runs in another process.")
      .def("__call__", &run_executable)
      .def("as_text", [](const PyExecutable& e) { return e.exe.as_text(); })
      .def("memory_analysis", [](const PyExecutable& e) { return e.exe.memory_analysis(); })
      .def(
          "save",
          [](const PyExecutable& e, nb::handle file) {
            std::string p = path_of(file);
            nb::gil_scoped_release release;
            e.exe.save(p);
          },
          "file"_a,
          "Writes the artifact (the C++ form: `kiln run` and Executable::load read it). A function "
          "with captured inputs/outputs state cannot be saved.")
      .def_static(
          "load",
          [](nb::handle file, nb::handle remap_arg) {
            DeviceMap remap = device_map(remap_arg);
            std::string p = path_of(file);
            Executable exe;
            {
              nb::gil_scoped_release release;
              exe = Executable::load(p, remap);
            }
            return PyExecutable{std::move(exe), Stage{}};
          },
          "file"_a, "remap"_a = nb::none(),
          "Reads an artifact; remap={\"opencl:0\": \"cpu:0\"} runs the work it places on a "
          "device under another's name. The result takes the arguments' arrays in order and "
          "returns a list of arrays.");
}

}  // namespace kiln::py
