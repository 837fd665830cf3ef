// Lanes: the live state behind each Stream. A lane owns its backend queue and an order lock that
// keeps submissions to one stream in submission order while different streams run concurrently.
#pragma once

#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "graph/device.h"
#include "scheduler/plan.h"

namespace kiln {

struct Lane {
  Stream stream;
  Backend* backend = nullptr;
  std::unique_ptr<Queue> queue;
  bool inline_queue = true;
  std::mutex order;  // held by a submission while it runs on this stream
};

// The lane of a stream, created on first use (raises kiln::Error for an unusable device).
Lane& lane_for(const Stream& s);

// The stream a symbolic lane runs on for a caller whose current stream is `caller`.
Stream resolve_lane(const LaneSpec& spec, const Stream& caller);

}  // namespace kiln
