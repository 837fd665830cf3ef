// The library's side of devices and streams: how an op's stream was chosen and resolved, and
// the hooks higher layers install here (graph cannot include them): the backends layer checks
// devices (so device("foo") lists the valid names), the scheduler waits for streams. Internal
// to Kiln; users see graph/device.h.
#pragma once

#include "graph/device.h"

namespace kiln {

// How an op's stream was chosen. A compiled function keeps Explicit and Placement and resolves
// Default again at every call; that is what keeps streams from freezing at the first trace.
enum class StreamOrigin { Default, Explicit, Placement };

struct ResolvedStream {
  Stream stream;
  StreamOrigin origin = StreamOrigin::Default;
};

// Resolves an op's StreamOrDevice against the calling thread's scopes.
ResolvedStream resolve_stream(const StreamOrDevice& s);

// Hooks installed by higher layers (graph cannot include them).
using DeviceChecker = void (*)(const Device&);       // throws kiln::Error if unusable
using StreamSynchronizer = void (*)(const Stream&);  // waits for a stream's work
using RankChecker = void (*)(const Device&);         // throws unless d.rank is a world rank
void set_device_checker(DeviceChecker f);
void set_stream_synchronizer(StreamSynchronizer f);
void set_rank_checker(RankChecker f);  // distributed/ installs it
// The backend's device, and its rank (when it names one) against the world group's size.
void check_device(const Device& d);
// check_device, and that `s` is a device's default stream or was made by new_stream.
void check_stream(const Stream& s);

}  // namespace kiln
