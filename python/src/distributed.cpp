// kiln.distributed, as mlx.core.distributed: init() -> Group (rank, size, split), is_available,
// and the collectives all_sum, all_max, all_min, all_gather, sum_scatter, send, recv and
// recv_like, each with keyword-only group= and stream= (C++: distributed/ops.h).
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include "distributed/ops.h"
#include "kiln_py.h"

namespace kiln::py {
namespace {

using namespace nb::literals;
namespace dist = kiln::distributed;

std::optional<dist::Group> group_of(nb::handle g) {
  if (g.is_none()) return std::nullopt;
  return nb::cast<dist::Group>(g);
}

Shape shape_of(nb::handle h) {
  Shape s;
  if (nb::isinstance<nb::int_>(h)) return {nb::cast<int64_t>(h)};
  for (nb::handle x : h) s.push_back(nb::cast<int64_t>(x));
  return s;
}

using Collective = Array (*)(const Array&, std::optional<dist::Group>, StreamOrDevice);

void def_collective(nb::module_& d, const char* name, Collective f, const char* doc) {
  d.def(
      name,
      [f](nb::handle x, nb::handle group, nb::handle s) {
        return f(to_array(x), group_of(group), to_stream_or_device(s));
      },
      "x"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(), doc);
}

}  // namespace

void init_distributed(nb::module_& m) {
  nb::module_ d =
      m.def_submodule("distributed", "Collectives across processes (MPI), as mlx.core.distributed");
  nb::class_<dist::Group>(d, "Group", "A group of ranks (processes) that run collectives together")
      .def("rank", &dist::Group::rank, "This process's rank in the group")
      .def("size", &dist::Group::size, "The number of ranks in the group")
      .def("split", &dist::Group::split, "color"_a, "key"_a = -1,
           "The ranks of this group with the same color, ordered by key (-1: the rank)");
  d.def("is_available", &dist::is_available, "Whether this Kiln was built with MPI");
  d.def(
      "init", [](bool strict, const std::string& backend) { return dist::init(strict, backend); },
      "strict"_a = false, "backend"_a = "any",
      "The world group: every rank a launcher started (a one-rank group when alone)");
  def_collective(d, "all_sum", dist::all_sum, "The sum of x over the group's ranks");
  def_collective(d, "all_max", dist::all_max, "The maximum of x over the group's ranks");
  def_collective(d, "all_min", dist::all_min, "The minimum of x over the group's ranks");
  def_collective(d, "all_gather", dist::all_gather,
                 "Every rank's x concatenated along axis 0, in rank order");
  def_collective(d, "sum_scatter", dist::sum_scatter,
                 "The sum over ranks of x, split along axis 0: this rank's part");
  d.def(
      "send",
      [](nb::handle x, int dst, nb::handle group, nb::handle s) {
        return dist::send(to_array(x), dst, group_of(group), to_stream_or_device(s));
      },
      "x"_a, "dst"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
      "Send x to rank dst; evaluate the result for the message to go");
  d.def(
      "recv",
      [](nb::handle shape, nb::handle dtype, int src, nb::handle group, nb::handle s) {
        return dist::recv(shape_of(shape), to_dtype(dtype), src, group_of(group),
                          to_stream_or_device(s));
      },
      "shape"_a, "dtype"_a, "src"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
      "An array of shape and dtype sent by rank src");
  d.def(
      "recv_like",
      [](nb::handle x, int src, nb::handle group, nb::handle s) {
        return dist::recv_like(to_array(x), src, group_of(group), to_stream_or_device(s));
      },
      "x"_a, "src"_a, nb::kw_only(), "group"_a = nb::none(), "stream"_a = nb::none(),
      "An array like x sent by rank src");
}

}  // namespace kiln::py
