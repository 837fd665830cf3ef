// Work that must end before the process's libraries are torn down at exit. When `main` returns,
// Kiln's lane workers and the device drivers (PoCL, lavapipe, a GPU driver) may still be running
// enqueued work; a driver thread left inside a library while that library's finalisers run
// crashes the process (seen: PoCL compiling a kernel in LLVM while lavapipe's finaliser ran).
#pragma once

namespace kiln {

// Host jobs end first: a running job may still enqueue device work.
enum class ExitStage : int { HostJobs = 0, Devices = 1 };

// Adds `finish` (idempotent: it may run more than once) to the steps run at exit, once per
// function however often it is added.
void at_exit_finish(ExitStage stage, void (*finish)());

// Registers the exit steps with atexit again. atexit handlers run in the reverse order of their
// registration, library finalisers among them, so a backend calls this once it has loaded and
// opened a driver: the steps then run before the finalisers of every library loaded so far.
void arm_exit_finish();

// Runs every step of stage `from` and later now, in stage order (the atexit handler runs them
// all; Python's atexit runs the Devices stage while the interpreter is still whole).
void run_exit_finish(ExitStage from = ExitStage::HostJobs);

}  // namespace kiln
