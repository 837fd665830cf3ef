// Files and diagnostics: .npy save/load, the profiler as a context manager, export_to_dot.
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <fstream>
#include <unordered_map>

#include "graph/array_node.h"
#include "numpy_bridge.h"
#include "tree.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

std::string path_of(nb::handle file) {
  nb::object p = nb::module_::import_("os").attr("fspath")(file);
  return nb::cast<std::string>(p);
}

struct Profile {
  std::unique_ptr<ProfileScope> scope;
  std::vector<TaskEvent> events;  // kept after __exit__
};

// Graphviz text for the graph behind `outputs` (nodes not yet evaluated show their op).
std::string dot(const std::vector<Array>& outputs) {
  std::string out = "digraph kiln {\n  rankdir=LR;\n";
  std::unordered_map<const ArrayNode*, int> ids;
  std::vector<Array> todo = outputs;
  while (!todo.empty()) {
    Array a = todo.back();
    todo.pop_back();
    if (ids.count(a.node().get())) continue;
    int id = static_cast<int>(ids.size());
    ids[a.node().get()] = id;
    std::string label =
        a.is_evaluated() ? "evaluated" : primitive_name(a.node()->op, a.node()->params);
    out += "  n" + std::to_string(id) + " [label=\"" + label + "\\n" + a.dtype().name() + " [";
    for (size_t i = 0; i < a.shape().size(); ++i)
      out += (i ? "," : "") + std::to_string(a.shape()[i]);
    out += "]\"];\n";
    for (const Array& in : a.node()->inputs) todo.push_back(in);
  }
  for (auto& [node, id] : ids)
    for (const Array& in : node->inputs)
      out += "  n" + std::to_string(ids[in.node().get()]) + " -> n" + std::to_string(id) + ";\n";
  return out + "}\n";
}

}  // namespace

void init_io(nb::module_& m) {
  m.def(
      "save",
      [](nb::handle file, nb::handle a) {
        Array x = to_array(a);
        wait_for({x});
        std::string p = path_of(file);
        if (p.size() < 4 || p.substr(p.size() - 4) != ".npy") p += ".npy";
        nb::gil_scoped_release release;
        save_npy(p, x);
      },
      "file"_a, "arr"_a, "Saves an array as a .npy file (the suffix is added when missing).");
  m.def(
      "load",
      [](nb::handle file) {
        std::string p = path_of(file);
        if (p.size() < 4 || p.substr(p.size() - 4) != ".npy")
          throw nb::value_error(
              ("load: '" + p + "' is not a .npy file; Kiln reads .npy only").c_str());
        return load_npy(p);
      },
      "file"_a);
  nb::class_<Profile>(m, "Profile")
      .def(nb::init<>())
      .def(
          "__enter__",
          [](Profile& p) -> Profile& {
            p.scope = std::make_unique<ProfileScope>();
            return p;
          },
          nb::rv_policy::reference)
      .def("__exit__",
           [](Profile& p, nb::args) {
             if (!p.scope) throw nb::value_error("Profile.__exit__ without __enter__");
             nb::gil_scoped_release release;
             p.events = p.scope->events();
             p.scope.reset();
           })
      .def_prop_ro("events",
                   [](Profile& p) {
                     std::vector<TaskEvent> ev;
                     {
                       nb::gil_scoped_release release;
                       ev = p.scope ? p.scope->events() : p.events;
                     }
                     nb::list out;
                     for (const TaskEvent& e : ev) {
                       nb::dict d;
                       d["name"] = e.name;
                       d["device"] = e.device;
                       d["stream"] = e.stream;
                       d["start_ns"] = e.start_ns;
                       d["end_ns"] = e.end_ns;
                       d["thread"] = e.thread;
                       out.append(d);
                     }
                     return out;
                   })
      .def(
          "write_chrome_trace",
          [](Profile& p, nb::handle file) {
            if (!p.scope)
              throw nb::value_error("write_chrome_trace: call it inside the `with` block");
            std::string path = path_of(file);
            nb::gil_scoped_release release;
            p.scope->write_chrome_trace(path);
          },
          "file"_a);
  m.def(
      "export_to_dot",
      [](nb::handle file, nb::args outputs, nb::kwargs named) {
        std::vector<Array> arrays;
        for (nb::handle h : outputs) {
          Flat f = flatten(h, Leaves::Any);
          arrays.insert(arrays.end(), f.arrays.begin(), f.arrays.end());
        }
        for (auto [k, h] : named) {
          Flat f = flatten(h, Leaves::Any);
          arrays.insert(arrays.end(), f.arrays.begin(), f.arrays.end());
        }
        std::string text = dot(arrays);
        if (nb::hasattr(file, "write")) {
          file.attr("write")(text);
          return;
        }
        std::ofstream(path_of(file)) << text;
      },
      "file"_a, "outputs"_a, "named"_a,
      "Writes the graph behind the outputs in Graphviz dot form.");
}

}  // namespace kiln::py
