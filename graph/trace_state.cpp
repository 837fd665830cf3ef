#include "graph/trace_state.h"

#include <climits>

namespace kiln {

namespace {
thread_local int t_trace_base = INT_MAX;
}

int trace_scope_base() { return t_trace_base; }
bool is_tracing() { return t_trace_base != INT_MAX; }

TraceStateGuard::TraceStateGuard() : saved_base_(t_trace_base) { t_trace_base = scope_depth(); }
TraceStateGuard::~TraceStateGuard() { t_trace_base = saved_base_; }

}  // namespace kiln
