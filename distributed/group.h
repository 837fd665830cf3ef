// Groups of ranks, as MLX's mlx.core.distributed: init() joins the processes a launcher
// (mpiexec, srun) started into the world group, and Group::split makes sub-groups. Without MPI,
// or in a process started alone, init() gives a group of one rank, on which every collective
// returns its input. Collectives are in distributed/ops.h.
#pragma once

#include <string>

namespace kiln::distributed {

class Group {
 public:
  int rank() const;
  int size() const;
  // The ranks of this group with the same `color`, ordered by `key` (-1: this group's rank),
  // as MPI_Comm_split; every rank of the group must call it, in the same order with respect to
  // the group's collectives.
  Group split(int color, int key = -1) const;
  int id() const { return id_; }  // 0: the world; then in the order groups were made

  explicit Group(int id) : id_(id) {}

 private:
  int id_;
};

// Whether this build can run collectives across processes (it found MPI).
bool is_available();

// The world group. backend "mpi" or "any" (the only backend is MPI). Non-strict: a process not
// started as one of several ranks, or a build without MPI, gets a one-rank group. strict=true
// with a build without MPI raises kiln::Error naming the packages to install; strict "mpi"
// in a process started alone starts MPI as a one-rank world. Later calls return the same group.
Group init(bool strict = false, const std::string& backend = "any");

}  // namespace kiln::distributed
