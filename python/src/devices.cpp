// Devices and streams: kiln.Device, kiln.Stream, the defaults, `with kiln.stream(...)` and the
// placement scope kiln.compute_on builds on (python/kiln/__init__.py).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include "graph/at_exit.h"
#include "kiln_py.h"

namespace kiln::py {
namespace {

using namespace nb::literals;

Device to_device(nb::handle h) {
  if (nb::isinstance<Device>(h)) return nb::cast<Device>(h);
  if (nb::isinstance<nb::str>(h)) return device(nb::cast<std::string>(h));
  if (nb::isinstance<Stream>(h)) return nb::cast<Stream>(h).device;
  std::string type = nb::type_name(h.type()).c_str();
  throw nb::type_error(
      ("expected a kiln.Device or a device name like \"opencl:0\"; got a " + type).c_str());
}

// `with kiln.stream(s):` — a StreamScope that lives between __enter__ and __exit__.
struct StreamContext {
  Stream stream;
  std::unique_ptr<StreamScope> scope;
};
struct PlacementContext {
  Device device;
  std::unique_ptr<PlacementScope> scope;
};

}  // namespace

void init_devices(nb::module_& m) {
  nb::class_<Device>(m, "Device")
      .def(
          "__init__",
          // rank: the device on that rank of the world group (placement on ranks), as the
          // name "rank1/cpu" says.
          [](Device* self, nb::handle spec, int index, int rank) {
            // -1 is "not given"; other negatives were silently ignored.
            if (index < -1 || rank < -1)
              throw Error("kiln.Device: " + std::string(index < -1 ? "index" : "rank") + " is " +
                          std::to_string(index < -1 ? index : rank) +
                          "; give a non-negative integer, or leave it out");
            Device d = to_device(spec);
            if (index >= 0) d.index = index;
            if (rank >= 0) d.rank = rank;
            if (index >= 0 || rank >= 0) d = device(d.str());
            new (self) Device(d);
          },
          "type"_a, "index"_a = -1, nb::kw_only(), "rank"_a = -1)
      .def_prop_ro("type", [](const Device& d) { return d.backend; })
      .def_prop_ro("index", [](const Device& d) { return d.index; })
      .def_prop_ro("rank", [](const Device& d) { return d.rank; })
      .def("__repr__",
           [](const Device& d) {
             std::string rank = d.rank < 0 ? "" : ", rank=" + std::to_string(d.rank);
             return "Device(" + d.backend + ", " + std::to_string(d.index) + rank + ")";
           })
      .def("__str__", &Device::str)
      .def("__eq__",
           [](const Device& a, nb::handle b) {
             return nb::isinstance<Device>(b) && nb::cast<Device>(b) == a;
           })
      .def("__hash__", [](const Device& d) { return nb::hash(nb::str(d.str().c_str())); });
  nb::class_<Stream>(m, "Stream")
      .def_prop_ro("device", [](const Stream& s) { return s.device; })
      .def_prop_ro("index", [](const Stream& s) { return s.index; })
      .def("__repr__",
           [](const Stream& s) {
             return "Stream(Device(" + s.device.backend + ", " + std::to_string(s.device.index) +
                    "), " + std::to_string(s.index) + ")";
           })
      .def("__eq__",
           [](const Stream& a, nb::handle b) {
             return nb::isinstance<Stream>(b) && nb::cast<Stream>(b) == a;
           })
      .def("__hash__", [](const Stream& s) { return nb::hash(nb::str(s.str().c_str())); });

  m.def(
      "devices",
      [] {
        nb::list out;
        for (const DeviceInfo& i : devices()) {
          nb::dict d;
          d["device"] = i.device;
          d["description"] = i.description;
          d["available"] = i.available;
          d["reason"] = i.reason;
          out.append(d);
        }
        return out;
      },
      "Every known device, available or not, with a description or the reason it is not.");
  m.def(
      "device", [](const std::string& spec) { return device(spec); }, "spec"_a);
  m.def("default_device", [] { return default_device(); });
  m.def(
      "set_default_device", [](nb::handle d) { set_default_device(to_device(d)); }, "device"_a);
  m.def(
      "default_stream", [](nb::handle d) { return default_stream(to_device(d)); }, "device"_a);
  m.def(
      "set_default_stream", [](const Stream& s) { set_default_stream(s); }, "stream"_a);
  m.def(
      "new_stream", [](nb::handle d) { return new_stream(to_device(d)); }, "device"_a);
  m.def("current_stream", [] { return current_stream(); });
  m.def(
      "clear_streams", [] { reset_default_streams(); },
      "Every device's default stream on this thread back to its stream 0.");
  m.def(
      "synchronize",
      [](std::optional<Stream> s) {
        nb::gil_scoped_release release;
        if (s)
          synchronize(*s);
        else
          synchronize(current_stream());
      },
      "stream"_a = nb::none());

  m.def(
      "_finish_device_work",
      [] {
        nb::gil_scoped_release release;
        run_exit_finish(ExitStage::Devices);
      },
      "Waits for the work every opencl and vulkan queue holds (run at interpreter exit).");

  nb::class_<StreamContext>(m, "StreamContext")
      .def("__enter__",
           [](StreamContext& c) {
             if (c.scope) throw nb::value_error("this kiln.stream context is already entered");
             c.scope = std::make_unique<StreamScope>(c.stream);
             return c.stream;
           })
      .def("__exit__", [](StreamContext& c, nb::args) { c.scope.reset(); });
  m.def(
      "stream",
      [](nb::handle s) {
        Stream st = nb::isinstance<Stream>(s) ? nb::cast<Stream>(s) : default_stream(to_device(s));
        return StreamContext{st, nullptr};
      },
      "s"_a, "Use as `with kiln.stream(s):` — ops inside default to stream (or device) s.");
  nb::class_<PlacementContext>(m, "_Placement")
      .def("__enter__",
           [](PlacementContext& c) {
             if (c.scope) throw nb::value_error("this compute_on context is already entered");
             c.scope = std::make_unique<PlacementScope>(c.device);
           })
      .def("__exit__", [](PlacementContext& c, nb::args) { c.scope.reset(); });
  m.def("_placement", [](nb::handle d) { return PlacementContext{to_device(d), nullptr}; });
}

}  // namespace kiln::py
