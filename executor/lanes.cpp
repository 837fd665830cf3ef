#include "executor/lanes.h"

#include <map>

#include "backends/registry.h"
#include "graph/device_hooks.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln {

namespace {

struct Lanes {
  std::mutex mu;
  std::map<Stream, std::unique_ptr<Lane>> lanes;
};
Lanes& lanes() {
  static Immortal<Lanes> l;  // workers may still run jobs at exit
  return l.get();
}

void synchronize_hook(const Stream& s) {
  Lane& l = lane_for(s);
  l.wait_async();  // asynchronous submissions, until their results are published
  std::lock_guard<std::mutex> order(l.order);  // waits for a submission in flight
  l.queue->finish();
}

[[maybe_unused]] const bool g_installed = [] {
  set_stream_synchronizer(&synchronize_hook);
  return true;
}();

}  // namespace

LaneWorker& Lane::worker() {
  std::lock_guard<std::mutex> lock(async_mu_);
  if (!worker_) worker_ = std::make_unique<LaneWorker>();
  return *worker_;
}

LaneWorker* Lane::worker_if_any() {
  std::lock_guard<std::mutex> lock(async_mu_);
  return worker_.get();
}

void Lane::async_started() {
  std::lock_guard<std::mutex> lock(async_mu_);
  ++outstanding_;
}

void Lane::async_finished() {
  std::lock_guard<std::mutex> lock(async_mu_);
  if (--outstanding_ == 0) async_cv_.notify_all();
}

// The oldest of the bound depends only on work enqueued before it, all of it already
// submitted (a mixed plan starts its host tasks before its call returns), so waiting for it
// cannot wait on this caller. Held weakly: a completed run nobody holds is not kept alive here.
// The bytes leave two calls in flight however large: the device then has the next call queued
// while it runs one (arrays past any cache lose nothing to the bound).
void Lane::bound_ahead(const std::shared_ptr<Pending>& run, size_t bytes) {
  size_t calls = queue ? queue->calls_ahead() : 0, most = queue ? queue->bytes_ahead() : 0;
  if (calls == 0 && most == 0) return;
  auto over = [&] {
    return (calls > 0 && ahead_.size() > calls) ||
           (most > 0 && ahead_bytes_ > most && ahead_.size() > 2);
  };
  std::unique_lock<std::mutex> lock(ahead_mu_);
  ahead_.push_back({run, bytes});
  ahead_bytes_ += bytes;
  while (over()) {
    std::shared_ptr<Pending> oldest = ahead_.front().run.lock();
    ahead_bytes_ -= ahead_.front().bytes;
    ahead_.pop_front();
    if (!oldest) continue;  // completed and released
    lock.unlock();
    try {
      oldest->wait();
    } catch (...) {  // its error reaches its own outputs, not this call
    }
    lock.lock();
  }
}

bool Lane::quiet() {
  std::lock_guard<std::mutex> lock(async_mu_);
  return outstanding_ == 0;
}

void Lane::wait_async() {
  if (LaneWorker* w = worker_if_any()) w->drain();
  std::unique_lock<std::mutex> lock(async_mu_);
  async_cv_.wait(lock, [&] { return outstanding_ == 0; });
}

static Lane& lane_for_slow(const Stream& s);

Lane& lane_for(const Stream& s) {
  // Lanes live for the whole process, so a per-thread memo of the last one is always valid.
  thread_local const Lane* last = nullptr;
  if (last && last->stream == s) return const_cast<Lane&>(*last);
  Lane& l = lane_for_slow(s);
  last = &l;
  return l;
}

static Lane& lane_for_slow(const Stream& s) {
  Lanes& all = lanes();
  std::lock_guard<std::mutex> lock(all.mu);
  auto it = all.lanes.find(s);
  if (it != all.lanes.end()) return *it->second;
  Backend& b = backend_for(s.device);
  auto lane = std::make_unique<Lane>();
  lane->stream = s;
  lane->backend = &b;
  lane->queue = b.create_queue(s.device.index);
  lane->inline_queue = lane->queue->runs_inline();
  Lane& ref = *lane;
  all.lanes.emplace(s, std::move(lane));
  return ref;
}

std::vector<Lane*> all_lanes() {
  Lanes& all = lanes();
  std::lock_guard<std::mutex> lock(all.mu);
  std::vector<Lane*> out;
  for (auto& [stream, lane] : all.lanes) out.push_back(lane.get());
  return out;
}

Stream resolve_lane(const LaneSpec& spec, const Stream& caller) {
  switch (spec.origin) {
    case StreamOrigin::Default:
      // Placement on ranks is decided where the function is traced: a rank's part and the
      // messages between the parts are lowered from it.
      if (caller.device.rank >= 0)
        throw_error("a compiled function was called on ", caller.device,
                    ": place work on a rank inside the function (compute_on(device(\"",
                    caller.device, "\"), f) around the code, then compile), not around the call");
      return caller;
    case StreamOrigin::Explicit: return spec.stream;
    case StreamOrigin::Placement: return Stream{0, spec.stream.device};
  }
  return caller;
}

}  // namespace kiln
