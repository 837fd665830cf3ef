#include "executor/stream_hold.h"

#include <condition_variable>
#include <mutex>

#include "executor/lanes.h"
#include "graph/error.h"

namespace kiln {

struct StreamHold::Impl {
  std::shared_ptr<Signal> signal;  // a device lane's
  std::mutex mu;                   // a host lane's job waits on `released`
  std::condition_variable cv;
  bool released = false;
};

StreamHold::StreamHold(const Stream& s) : impl_(std::make_shared<Impl>()) {
  Lane& lane = lane_for(s);
  std::lock_guard<std::mutex> order(lane.order);
  if (lane.inline_queue) {
    // Counted as the lane's asynchronous work, so a later call does not count the lane idle
    // and run ahead of the hold on its own thread (executor/inline_policy.h).
    lane.async_started();
    lane.worker().submit([impl = impl_, &lane] {
      {
        std::unique_lock<std::mutex> lock(impl->mu);
        impl->cv.wait(lock, [&] { return impl->released; });
      }
      lane.async_finished();
    });
    return;
  }
  impl_->signal = lane.queue->create_signal();
  if (!impl_->signal || !lane.queue->enqueue_wait({impl_->signal->event()}))
    throw_error("StreamHold: ", s.str(), "'s queue cannot wait for a signal from the host");
}

StreamHold::~StreamHold() { release(); }

void StreamHold::release() {
  if (impl_->signal) impl_->signal->complete(nullptr);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->released = true;
  }
  impl_->cv.notify_all();
}

}  // namespace kiln
