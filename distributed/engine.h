// The communication lanes: what the executor calls to run a plan's collective tasks. Every group
// has a lane that issues the group's collectives in one order on every rank: at the start of a
// call the executor reserves consecutive positions for the plan's collectives of each group
// (Plan::collectives(), a topological order every rank computes alike), and the lane issues
// position k only after k - 1, whenever the tasks become ready. One progress thread posts the
// non-blocking requests and completes them (no TBB worker ever blocks in MPI), so collectives
// overlap with compute on the other lanes. The messages of a program's cut edges (placement on
// ranks) go through the same thread, each edge in an order of its own (Channel).
#pragma once

#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace kiln::distributed {

// Which order a collective task is issued in. A group's collectives (and the user's send and
// recv) share the group's order, the same on every rank. A message of a cut edge (placement on
// ranks: NativeArgs::tag > 0) has an order of its own per peer, tag and direction: it occurs
// once per call, so only the calls' order matters, and sharing the group's order could make a
// rank wait to issue one message for a value that needs another rank's later message first.
struct Channel {
  int group = 0;
  int peer = -1, tag = 0;  // tag 0: the group's order
  bool send = false;
  bool operator<(const Channel& o) const;
};
Channel channel_of(const NativeArgs& args);

// Reserves `n` consecutive positions in the channel's order; returns the first.
uint64_t reserve_positions(const Channel& channel, int n);

// Starts the collective `args` (buffers {in, out}, {out} for Recv, {in} for a cut edge's Send)
// at `position` of its channel's order. Returns an Event completed by the progress thread, or
// null when it completed here (a one-rank group). Device buffers go through host copies: the
// input is read into host memory here, the result written back before the event completes.
// A cut edge's Recv raises kiln::Error when the sender's value failed (skip_position).
EventPtr start_collective(const NativeArgs& args, uint64_t position);

// The collective at `position` will not run on this rank (its input failed): later collectives
// of the group raise, since the other ranks would pair them with the wrong ones. A cut edge's
// Send sends a message of another length than its value's, holding `why`, so the receiver
// raises instead of waiting; its Recv still takes the message, so the sender completes.
void skip_position(const NativeArgs& args, uint64_t position, const std::string& why);

// Messages of cut edges this process has posted, sent and received (failure messages
// included), for tests: across the ranks each count equals the number of cut edges per call.
struct MessageCounts {
  uint64_t sent = 0, received = 0;
};
MessageCounts message_counts();

}  // namespace kiln::distributed
