// The calling thread's tracing state. compile sets it while it runs a user function over
// placeholders; the graph layer reads it to tell scopes opened inside the traced function (kept
// in the trace) from the caller's (resolved again at every call).
#pragma once

namespace kiln {

int scope_depth();       // live StreamScope/PlacementScope entries on this thread
int trace_scope_base();  // scope depth when the innermost trace began; a huge value if none
bool is_tracing();

// Whether a function transform (vjp, jvp, vmap and those built on them) is recording the
// graph on this thread. Then evaluation keeps each node's inputs (the transform walks them
// afterwards) and a compiled function called inside runs inline, so its graph is visible.
bool in_transform();

class TransformGuard {
 public:
  TransformGuard();
  ~TransformGuard();
  TransformGuard(const TransformGuard&) = delete;
  TransformGuard& operator=(const TransformGuard&) = delete;
};

// RAII: marks the calling thread as tracing from the current scope depth.
class TraceStateGuard {
 public:
  TraceStateGuard();
  ~TraceStateGuard();
  TraceStateGuard(const TraceStateGuard&) = delete;
  TraceStateGuard& operator=(const TraceStateGuard&) = delete;

 private:
  int saved_base_;
};

}  // namespace kiln
