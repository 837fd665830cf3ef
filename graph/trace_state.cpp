#include "graph/trace_state.h"

#include <climits>

namespace kiln {

namespace {
thread_local int t_trace_base = INT_MAX;
thread_local int t_transforms = 0;
}  // namespace

bool in_transform() { return t_transforms > 0; }
TransformGuard::TransformGuard() { ++t_transforms; }
TransformGuard::~TransformGuard() { --t_transforms; }

int trace_scope_base() { return t_trace_base; }
bool is_tracing() { return t_trace_base != INT_MAX; }

TraceStateGuard::TraceStateGuard() : saved_base_(t_trace_base) { t_trace_base = scope_depth(); }
TraceStateGuard::~TraceStateGuard() { t_trace_base = saved_base_; }

}  // namespace kiln
