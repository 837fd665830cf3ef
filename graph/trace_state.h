// The calling thread's tracing state. compile sets it while it runs a user function over
// placeholders; the graph layer reads it to tell scopes opened inside the traced function (kept
// in the trace) from the caller's (resolved again at every call).
#pragma once

namespace kiln {

int scope_depth();       // live StreamScope/PlacementScope entries on this thread
int trace_scope_base();  // scope depth when the innermost trace began; a huge value if none
bool is_tracing();

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
