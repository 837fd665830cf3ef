// Lanes: the live state behind each Stream. A lane owns its backend queue and an order lock that
// keeps submissions to one stream in submission order while different streams run concurrently,
// and tracks the asynchronous submissions still running on it (for synchronize()).
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "backends/backend.h"
#include "executor/lane_worker.h"
#include "executor/plan.h"
#include "graph/device.h"
#include "graph/pending.h"

namespace kiln {

struct Lane {
  Stream stream;
  Backend* backend = nullptr;
  std::unique_ptr<Queue> queue;
  bool inline_queue = true;
  std::mutex order;  // held by a submission while it runs on this stream

  // A host lane's runner of asynchronous submissions, made on first use.
  LaneWorker& worker();
  LaneWorker* worker_if_any();
  // Asynchronous submissions not complete yet: counted so synchronize() can wait for them.
  void async_started();
  void async_finished();
  void wait_async();  // until none is outstanding (helping the worker run its queue)
  bool quiet();       // none is outstanding now
  // Called after a device-only submission on this lane, `bytes` the size of its outputs: while
  // more than queue->calls_ahead() of them are in flight, or their outputs exceed
  // queue->bytes_ahead() (more than two calls), waits for the oldest (whose errors stay with its
  // own outputs).
  void bound_ahead(const std::shared_ptr<Pending>& run, size_t bytes);

 private:
  std::mutex async_mu_;
  std::condition_variable async_cv_;
  int outstanding_ = 0;
  std::unique_ptr<LaneWorker> worker_;
  std::mutex ahead_mu_;
  struct Ahead {
    std::weak_ptr<Pending> run;
    size_t bytes = 0;
  };
  std::deque<Ahead> ahead_;  // device-only submissions, oldest first
  size_t ahead_bytes_ = 0;   // their outputs' bytes
};

// The lane of a stream, created on first use (raises kiln::Error for an unusable device).
Lane& lane_for(const Stream& s);

// Every lane made so far (lanes live for the process), for pending_work().
std::vector<Lane*> all_lanes();

// The stream a symbolic lane runs on for a caller whose current stream is `caller`.
Stream resolve_lane(const LaneSpec& spec, const Stream& caller);

}  // namespace kiln
