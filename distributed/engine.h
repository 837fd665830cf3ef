// The communication lanes: what the executor calls to run a plan's collective tasks. Every group
// has a lane that issues the group's collectives in one order on every rank: at the start of a
// call the executor reserves consecutive positions for the plan's collectives of each group
// (Plan::collectives(), a topological order every rank computes alike), and the lane issues
// position k only after k - 1, whenever the tasks become ready. One progress thread posts the
// non-blocking requests and completes them (no TBB worker ever blocks in MPI), so collectives
// overlap with compute on the other lanes.
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace kiln::distributed {

// Reserves `n` consecutive positions in group `group`'s order; returns the first.
uint64_t reserve_positions(int group, int n);

// Starts the collective `args` (buffers {in, out}, {out} for Recv) at `position` of its group's
// order. Returns an Event completed by the progress thread, or null when it completed here (a
// one-rank group). Device buffers go through host copies: the input is read into host memory
// here, the result written back before the event completes.
EventPtr start_collective(const NativeArgs& args, uint64_t position);

// The collective at `position` will not run on this rank (its input failed): later collectives
// of the group raise, since the other ranks would pair them with the wrong ones.
void skip_position(int group, uint64_t position, const std::string& why);

}  // namespace kiln::distributed
