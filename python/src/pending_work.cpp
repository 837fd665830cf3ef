// kiln.pending_work(): what is in flight and what waits for it (executor/pending_work.h), as a
// dict of lists of dicts whose "text" is what the watchdog prints; and kiln._hold_stream, the
// tests' way to hold a stream on purpose (executor/stream_hold.h).
#include "executor/stream_hold.h"
#include "kiln_py.h"

#include <nanobind/stl/unique_ptr.h>

namespace kiln::py {

using namespace nb::literals;

namespace {

nb::list strings(const std::vector<std::string>& v) {
  nb::list out;
  for (const std::string& s : v) out.append(nb::str(s.c_str()));
  return out;
}

nb::dict as_dict(const PendingWork& w) {
  nb::list calls, tasks, threads;
  for (const PendingCall& c : w.calls) {
    nb::dict d;
    d["id"] = c.id;
    d["seconds"] = c.seconds;
    d["tasks"] = c.tasks;
    d["done"] = c.done;
    calls.append(d);
  }
  for (const PendingTask& t : w.tasks) {
    nb::dict d;
    d["call"] = t.call;
    d["stream"] = nb::str(t.stream.c_str());
    d["task"] = nb::str(t.task.c_str());
    d["state"] = nb::str(t.state.c_str());
    d["waits_for"] = strings(t.waits_for);
    tasks.append(d);
  }
  for (const BlockedThread& t : w.threads) {
    nb::dict d;
    d["thread"] = nb::str(t.thread.c_str());
    d["waits_for"] = nb::str(t.waits_for.c_str());
    d["seconds"] = t.seconds;
    threads.append(d);
  }
  nb::dict out;
  out["calls"] = calls;
  out["tasks"] = tasks;
  out["threads"] = threads;
  out["held"] = strings(w.held);
  out["text"] = nb::str(w.str().c_str());
  return out;
}

}  // namespace

void init_pending_work(nb::module_& m) {
  m.def(
      "pending_work", [] { return as_dict(pending_work()); },
      "What Kiln has in flight and what waits for it: {'calls', 'tasks', 'threads', 'held', "
      "'text'} (docs/debugging.md). Kiln's own; MLX has no such call.");
  nb::class_<StreamHold>(m, "_StreamHold")
      .def("release", &StreamHold::release)
      .def("__enter__", [](StreamHold& h) -> StreamHold& { return h; })
      .def("__exit__", [](StreamHold& h, nb::args) { h.release(); });
  m.def(
      "_hold_stream", [](const Stream& s) { return std::make_unique<StreamHold>(s); }, "stream"_a,
      "Tests only: work submitted to `stream` from now on waits until release().");
}

}  // namespace kiln::py
