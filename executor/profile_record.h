// The executor's side of profiling: whether any ProfileScope is alive, the clock events use, and
// recording a finished task into every live scope. Internal to Kiln (kiln.h has only the
// user's side, executor/profile.h).
#pragma once

#include <cstdint>

#include "executor/profile.h"

namespace kiln {

bool profile_active();     // one relaxed atomic load
int64_t profile_now_ns();  // steady clock
void profile_record(const TaskEvent& e);
// An asynchronous submission made while profiling holds the scopes until it completes, so that
// ProfileScope::events() (and the scope's end) include its tasks.
void profile_hold();
void profile_release();

}  // namespace kiln
