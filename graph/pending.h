// Work running asynchronously that will fill some array nodes (a compiled call's outputs, an
// async_eval). The node keeps a handle so that whoever needs its value can wait for exactly that
// work; the scheduler implements it. Internal to Kiln.
#pragma once

namespace kiln {

class Pending {
 public:
  virtual ~Pending() = default;
  // Blocks until the work has completed and its results are published in the nodes (possibly
  // running the work on the calling thread if no other thread has started it yet).
  virtual void wait() = 0;
};

}  // namespace kiln
