// Arrays whose values come from asynchronous work (a compiled call, async_eval): they are in
// flight until the work's completion publishes its results into them, under eval's lock, and
// wakes whoever waits. Internal to compile/.
#pragma once

#include <memory>
#include <vector>

#include "executor/executor.h"
#include "graph/array.h"
#include "graph/pending.h"

namespace kiln {

// Marks nodes nobody else can see yet as in flight.
void mark_in_flight(const std::vector<Array>& nodes);
// Points the nodes still in flight at the work that will complete them.
void attach_pending(const std::vector<Array>& nodes, const std::shared_ptr<Pending>& work);
// When `a` is in flight as an output of device work enqueued at submission (a compiled call's
// on opencl or vulkan), its buffer-to-be and the work writing it: the next call binds the buffer
// and orders itself after that work on the device (executor.h, InFlightInput). Null otherwise
// (ready, or work the caller must wait for).
std::shared_ptr<Buffer> in_flight_buffer(const Array& a, std::shared_ptr<Pending>* work,
                                         int* output);
// Publishes r.outputs[i] / r.errors[i] into nodes[i] (in order), marks every node of `nodes`
// and `also_done` as no longer in flight, and wakes waiters. Any thread. `keep_inputs`: the
// nodes keep their inputs (the work was submitted while a transform recorded).
void publish_results(const std::vector<Array>& nodes, const RunResult& r,
                     const std::vector<Array>& also_done = {}, bool keep_inputs = false);

}  // namespace kiln
