// The message layer under the communication lanes: starting the world, splitting groups and
// posting non-blocking collectives and point-to-point messages. distributed/mpi_transport.cpp
// implements it over MPI when the build found MPI; the engine's progress thread is its only
// caller once the world has started, so an implementation needs no locks of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/dtype.h"
#include "graph/primitives.h"

namespace kiln::distributed {

// One posted message or collective, over host memory that stays valid until it completes.
struct Work {
  Op op = Op::AllReduce;  // AllReduce, AllGather, SumScatter, Send, Recv
  ReduceOp reduce = ReduceOp::Sum;
  Dtype dtype = float32;
  int comm = 0;  // the transport's communicator (Transport::world, split)
  int peer = -1;
  int tag = 0;  // Send, Recv: 0 for the user's messages, edge + 1 for a cut edge's
  const void* in = nullptr;
  void* out = nullptr;
  int64_t count = 0;  // elements of `in` (Recv: of `out`)
};

class Request {
 public:
  virtual ~Request() = default;
  virtual bool test() = 0;  // true once complete; raises kiln::Error if the transport failed
  // A completed Recv: how many elements arrived (at most Work::count).
  virtual int64_t received() const = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int world() const = 0;  // the communicator of every rank
  virtual int rank(int comm) const = 0;
  virtual int size(int comm) const = 0;
  // A blocking collective over `comm` (every rank of it calls this at the same point).
  virtual int split(int comm, int color, int key) = 0;
  virtual std::unique_ptr<Request> start(const Work& w) = 0;
  // At exit, before the barrier: sends rank `to` how far this rank got (an exit notice), without
  // waiting for it to be received.
  virtual void notify_exit(int to, const std::vector<int64_t>& counts) = 0;
  // An exit notice another rank sent, if one has arrived: true, with its rank and counts.
  virtual bool exit_notice(int& from, std::vector<int64_t>& counts) = 0;
  // Waits up to `seconds` (< 0: as long as it takes) for every rank of the world to arrive
  // here, then takes the exit notices not received yet; false if they did not arrive.
  virtual bool barrier(double seconds) = 0;
  virtual void finalize() = 0;
  // Liveness: sends every other rank of the world a heartbeat (at most one in flight per peer)
  // and takes those that arrived, recording when each rank was last heard from. The progress
  // thread calls it every few hundred milliseconds, busy or idle.
  virtual void heartbeat() = 0;
  // Seconds since a heartbeat (or an exit notice) last came from world rank `peer`; < 0 if none
  // has come yet.
  virtual double silent_for(int peer) const = 0;
};

// Whether a launcher (mpiexec, srun) started this process as one of several ranks.
bool launched_as_rank();
// The MPI transport, started (MPI_Init_thread); raises kiln::Error naming what to install when
// the build has no MPI.
std::unique_ptr<Transport> start_mpi();

}  // namespace kiln::distributed
