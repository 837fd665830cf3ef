// A stream held on purpose, for tests of what a stuck call shows (pending_work()) and of giving
// up a wait: work submitted to the stream after the hold starts waits until release() (or the
// hold's end) — on the device, behind a signal its queue waits for, or on a host stream's worker,
// behind a job that waits. For tests and tools (not in kiln.h).
#pragma once

#include <memory>

#include "graph/device.h"

namespace kiln {

class StreamHold {
 public:
  explicit StreamHold(const Stream& s);
  ~StreamHold();  // releases
  StreamHold(const StreamHold&) = delete;
  StreamHold& operator=(const StreamHold&) = delete;
  void release();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kiln
