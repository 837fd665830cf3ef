// Group handles over the engine's group table (distributed/engine.cpp), and the checks every
// collective's extents pass before they reach the transport.
#include <cstdlib>

#include "distributed/group.h"
#include "distributed/internal.h"
#include "distributed/transport.h"
#include "graph/device_hooks.h"
#include "graph/error.h"

namespace kiln::distributed {

namespace {

// A device on rank r (placement on ranks, graph/device.h) needs a world of more than r ranks.
void check_rank(const Device& d) {
  int size = detail::group_size(0);
  if (d.rank < size) return;
  throw_error("device ", d, ": rank ", d.rank, " is outside the world group of ", size,
              size == 1 ? " rank" : " ranks", " (ranks 0..", size - 1, "; ",
              is_available() ? "start more with mpiexec -n N"
                             : "this Kiln was built without MPI: install openmpi-bin "
                               "libopenmpi-dev and configure again",
              ")");
}

[[maybe_unused]] const bool g_installed = [] {
  set_rank_checker(&check_rank);
  return true;
}();

}  // namespace

int Group::rank() const { return detail::group_rank(id_); }
int Group::size() const { return detail::group_size(id_); }

Group Group::split(int color, int key) const {
  if (color < 0) throw_error("Group::split: color must be >= 0, got ", color);
  return Group(detail::split_group(id_, color, key));
}

bool is_available() {
#ifdef KILN_HAVE_MPI
  return true;
#else
  return false;
#endif
}

Group init(bool strict, const std::string& backend) {
  return Group(detail::world_group(strict, backend));
}

// Open MPI's mpiexec sets OMPI_COMM_WORLD_SIZE; PMIx launchers (srun --mpi=pmix) PMIX_RANK;
// PMI-1/2 launchers PMI_SIZE.
bool launched_as_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* s = std::getenv(v)) return std::atoi(s) > 1;
  return std::getenv("PMIX_RANK") != nullptr;
}

#ifndef KILN_HAVE_MPI
std::unique_ptr<Transport> start_mpi() {
  throw_error(
      "distributed: this Kiln was built without MPI (install openmpi-bin and "
      "libopenmpi-dev, then configure again)");
}
#endif

namespace detail {

void check_extents(const NativeArgs& a, int size) {
  int64_t want = a.n;
  switch (a.op) {
    case Op::AllGather: want = a.n * size; break;
    case Op::SumScatter:
      if (a.n % size != 0)
        throw_error("sum_scatter: ", a.n, " elements do not split into ", size, " equal parts");
      want = a.n / size;
      break;
    case Op::Recv: want = a.m; break;
    default: break;
  }
  if (a.m != want || a.n < 0)
    throw_error("distributed: ", op_name(a.op), " of ", a.n, " elements was made for a group ",
                "of another size (its result has ", a.m, " elements; this group has ", size,
                " ranks)");
  if ((a.op == Op::Send || a.op == Op::Recv) && (a.peer < 0 || a.peer >= size))
    throw_error("distributed: ", op_name(a.op), " names rank ", a.peer, ", outside the group's ",
                size, " ranks");
}

}  // namespace detail
}  // namespace kiln::distributed
