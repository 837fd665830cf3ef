// kiln.Scheduler and kiln.Job over scheduler/jobs.h. A job's function is any Python callable (a
// kiln.compile'd one included) over pytrees: a worker takes the GIL only to run it (a compiled
// function releases it again while its plan runs) and evaluates the outputs without it.
//
// Lock order: the scheduler's and a job's mutexes may be held by a C++ thread that then takes the
// GIL (ending a job drops its function, whose Python objects need the GIL to be freed). So no
// thread may wait for those mutexes while holding the GIL: every call into the C++ scheduler or a
// job below releases the GIL first, and waits poll for Ctrl-C with the GIL released between polls.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <variant>

#include "kiln_py.h"
#include "tree.h"

namespace kiln::py {
namespace {

using namespace nb::literals;
using Clock = std::chrono::steady_clock;

// What a job holds of Python: shared by the C++ job's function and the kiln.Job, and freed with
// the GIL taken, from whichever thread lets it go last.
struct JobData {
  const void* scheduler = nullptr;  // the PyScheduler it was submitted to
  nb::object fn, args_structure;
  nb::object out_structure = nb::none();  // the result's tree, set when fn returns
  nb::object python_error = nb::none();   // the exception fn raised
};

bool interpreter_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

std::shared_ptr<JobData> make_job_data() {
  // A custom deleter (so not make_shared): the Python references need the GIL to go. Past the
  // interpreter's end there is nothing to free them into, and taking the GIL would hang: leaked.
  return std::shared_ptr<JobData>(std::make_unique<JobData>().release(), [](JobData* d) {
    if (!Py_IsInitialized() || interpreter_finalizing()) return;
    nb::gil_scoped_acquire gil;
    std::unique_ptr<JobData> owned(d);
  });
}

// On a worker thread: the scheduler it works for (for its whole life) and the job it runs now.
// Waiting for either from there would wait for itself.
thread_local const void* t_worker_of = nullptr;
thread_local const JobData* t_running = nullptr;

// The C++ function of a job: the Python callable over the job's arrays, the GIL held only here.
Fn job_function(std::shared_ptr<JobData> data) {
  return [data](const std::vector<Array>& in) -> std::vector<Array> {
    t_worker_of = data->scheduler;
    struct Running {
      explicit Running(const JobData* d) { t_running = d; }
      ~Running() { t_running = nullptr; }
    } running(data.get());
    nb::gil_scoped_acquire gil;
    try {
      nb::tuple args = nb::borrow<nb::tuple>(unflatten(data->args_structure, in));
      nb::object result = data->fn(*args);
      Flat f = flatten(result, Leaves::Constants, "the job's result");
      data->out_structure = f.structure;
      return std::move(f.arrays);
    } catch (nb::python_error& e) {
      // The exception object itself becomes job.error; the C++ job fails with its text.
      nb::object value = nb::borrow(e.value());
      if (!e.traceback().is_none()) PyException_SetTraceback(value.ptr(), e.traceback().ptr());
      data->python_error = value;
      throw Error("the job's function raised " + std::string(nb::type_name(value.type()).c_str()) +
                  ": " + nb::str(value).c_str());
    }
  };
}

struct PyJob {
  Job job;
  std::shared_ptr<JobData> data;
};

// Garbage collection: the function's exception, its traceback or the function itself may reach
// back to the kiln.Job. Only data the kiln.Job alone holds is shown to the collector: until the
// job ends, the C++ job's function holds it too, which the collector cannot see.
int traverse_job(PyObject* self, visitproc visit, void* arg) {
  if (!nb::inst_ready(self)) return 0;
  const PyJob* j = nb::inst_ptr<PyJob>(self);
  if (j->data && j->data.use_count() == 1) {
    const JobData& d = *j->data;
    for (const nb::object* o : {&d.fn, &d.args_structure, &d.out_structure, &d.python_error})
      Py_VISIT(o->ptr());
  }
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int clear_job(PyObject* self) {
  PyJob* j = nb::inst_ptr<PyJob>(self);
  if (j->data && j->data.use_count() == 1) {
    j->data->fn = nb::none();
    j->data->python_error = nb::none();
  }
  return 0;
}

PyType_Slot job_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(traverse_job)},
                           {Py_tp_clear, reinterpret_cast<void*>(clear_job)},
                           {0, nullptr}};

struct PyScheduler {
  std::unique_ptr<Scheduler> s;
  ~PyScheduler() {
    if (s && t_worker_of == this) {
      // Freed by one of its own workers (a job held the last reference): that worker cannot
      // wait for itself, so another thread runs the remaining jobs to their end and joins.
      std::thread([owned = std::move(s)]() mutable { owned.reset(); }).detach();
      return;
    }
    close();
  }
  // Runs every submitted job to its end (their functions need the GIL: released meanwhile).
  void close() {
    if (!s) return;
    not_from_own_job("close() (or leaving its `with` block)");
    nb::gil_scoped_release release;
    s.reset();
  }
  void not_from_own_job(const char* what) const {
    if (t_worker_of == this && t_running)
      throw Error(std::string("kiln.Scheduler.") + what +
                  " inside one of its own jobs would wait for that job itself; call it from "
                  "outside the scheduler's jobs");
  }
  Scheduler& get() {
    if (!s) throw Error("this kiln.Scheduler is closed; make a new one to submit more jobs");
    return *s;
  }
};

// Waits until the job ends or `timeout` seconds pass (None: no limit), in slices with the GIL
// released; Ctrl-C cancels the job and raises KeyboardInterrupt. A wait from inside a job that
// could never end (the job itself, a job queued behind it) raises in Job::wait_until.
bool wait_job(const Job& job, std::optional<double> timeout) {
  if (timeout && !(*timeout >= 0))
    throw Error("Job.wait: timeout is " + std::to_string(*timeout) +
                "; give seconds >= 0, or None to wait until the job ends");
  Clock::time_point end = Clock::time_point::max();
  if (timeout)
    end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                             std::chrono::duration<double>(std::min(*timeout, 1e9)));
  for (;;) {
    bool done;
    {
      nb::gil_scoped_release release;
      done = job.wait_until(std::min(end, Clock::now() + std::chrono::milliseconds(20)));
    }
    if (done) return true;
    if (Clock::now() >= end) return false;
    if (PyErr_CheckSignals() != 0) {
      {
        nb::gil_scoped_release release;
        job.cancel();
      }
      throw nb::python_error();
    }
  }
}

nb::object kiln_error_type() { return nb::module_::import_("kiln._kiln").attr("Error"); }

// Why a job ended without outputs, as a Python exception object (None if it has none).
nb::object job_error(const PyJob& j) {
  std::exception_ptr e;
  JobStatus status;
  {
    nb::gil_scoped_release release;
    e = j.job.error();
    status = j.job.status();
  }
  if (!e) return nb::none();
  if (status == JobStatus::Failed && !j.data->python_error.is_none()) return j.data->python_error;
  try {
    std::rethrow_exception(e);
  } catch (const Error& err) {
    return kiln_error_type()(err.what());
  } catch (const std::exception& err) {
    return nb::handle(PyExc_RuntimeError)(err.what());
  } catch (...) {
    return nb::handle(PyExc_RuntimeError)("a non-standard C++ exception");
  }
}

nb::object job_outputs(const PyJob& j) {
  wait_job(j.job, std::nullopt);
  std::vector<Array> out;
  try {
    nb::gil_scoped_release release;
    out = j.job.outputs();
  } catch (const Error& err) {
    if (j.data->python_error.is_none()) throw;
    // kiln.Error raised from the function's own exception, so its traceback is kept.
    nb::object exc = kiln_error_type()(err.what());
    PyException_SetCause(exc.ptr(), j.data->python_error.inc_ref().ptr());
    PyErr_SetObject(reinterpret_cast<PyObject*>(exc.type().ptr()), exc.ptr());
    throw nb::python_error();
  }
  return unflatten(j.data->out_structure, out);
}

JobOptions job_options(nb::handle stream, int priority, std::optional<double> deadline,
                       std::string name) {
  JobOptions o;
  if (!stream.is_none()) {
    StreamOrDevice sd = to_stream_or_device(stream);
    o.stream = std::holds_alternative<Stream>(sd) ? std::get<Stream>(sd)
                                                  : default_stream(std::get<Device>(sd));
  }
  o.priority = priority;
  o.name = std::move(name);
  if (deadline) {
    if (!std::isfinite(*deadline))
      throw Error("Scheduler.submit: deadline is " + std::to_string(*deadline) +
                  "; give the seconds from now within which the job must end");
    o.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::min(*deadline, 1e9)));
  }
  return o;
}

nb::object submit(PyScheduler& self, nb::handle fn, nb::handle args, nb::handle stream,
                  int priority, std::optional<double> deadline, std::string name) {
  if (!PyCallable_Check(fn.ptr())) throw nb::type_error("Scheduler.submit: fn is not callable");
  nb::object arg_tuple;
  if (nb::isinstance<nb::tuple>(args))
    arg_tuple = nb::borrow(args);
  else if (nb::isinstance<nb::list>(args))
    arg_tuple = nb::tuple(args);
  else if (nb::isinstance<Array>(args))
    arg_tuple = nb::make_tuple(args);
  else
    throw nb::type_error(("Scheduler.submit: args is a " +
                          std::string(nb::type_name(args.type()).c_str()) +
                          "; give a tuple or list of fn's positional arguments")
                             .c_str());
  Flat flat = flatten(arg_tuple, Leaves::Constants, "a job's argument");
  auto data = make_job_data();
  data->scheduler = &self;
  data->fn = nb::borrow(fn);
  data->args_structure = flat.structure;
  JobOptions options = job_options(stream, priority, deadline, std::move(name));
  Scheduler& s = self.get();
  Fn f = job_function(data);
  std::optional<Job> job;
  if (t_worker_of == &self) {
    // From one of its own jobs: the C++ submit raises rather than wait on a full queue for room
    // only this worker could make.
    {
      nb::gil_scoped_release release;
      job.emplace(s.submit(std::move(f), std::move(flat.arrays), std::move(options)));
    }
    return nb::cast(PyJob{*job, data});
  }
  // A full queue: wait for room with the GIL released (workers need it to make room), trying
  // again after pauses growing to 10 ms, and Ctrl-C raises KeyboardInterrupt meanwhile.
  for (auto pause = std::chrono::microseconds(50);;
       pause = std::min(pause * 2, std::chrono::microseconds(10000))) {
    {
      nb::gil_scoped_release release;
      job = s.try_submit(f, flat.arrays, options);
      if (!job) std::this_thread::sleep_for(pause);
    }
    if (job) break;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
  }
  return nb::cast(PyJob{*job, data});
}

}  // namespace

void init_jobs(nb::module_& m) {
  nb::enum_<JobStatus>(m, "JobStatus")
      .value("queued", JobStatus::Queued)
      .value("running", JobStatus::Running)
      .value("succeeded", JobStatus::Succeeded)
      .value("failed", JobStatus::Failed)
      .value("cancelled", JobStatus::Cancelled)
      .value("deadline_exceeded", JobStatus::DeadlineExceeded);

  nb::class_<PyJob>(m, "Job", nb::type_slots(job_slots),
                    "A submitted job; Scheduler.submit returns it.")
      .def(
          "wait",
          [](const PyJob& j, std::optional<double> timeout) { return wait_job(j.job, timeout); },
          "timeout"_a = nb::none(),
          "Waits until the job ends (True) or `timeout` seconds pass (False). Ctrl-C cancels "
          "the job and raises KeyboardInterrupt.")
      .def_prop_ro("status",
                   [](const PyJob& j) {
                     nb::gil_scoped_release release;
                     return j.job.status();
                   })
      .def_prop_ro("done",
                   [](const PyJob& j) {
                     nb::gil_scoped_release release;
                     return j.job.done();
                   })
      .def_prop_ro("error", &job_error,
                   "None, or why the job failed (the exception its function raised), was "
                   "cancelled or missed its deadline.")
      .def("outputs", &job_outputs,
           "What the function returned, once the job succeeded (waiting first); kiln.Error "
           "naming the job and why otherwise.")
      .def(
          "cancel",
          [](const PyJob& j) {
            nb::gil_scoped_release release;
            return j.job.cancel();
          },
          "Cancels at once if queued, at the next task boundary if running; False if it had "
          "already ended.")
      .def_prop_ro(
          "queued_ms",
          [](const PyJob& j) {
            nb::gil_scoped_release release;
            return j.job.times().queued_ms();
          },
          "Milliseconds from submission to its start (or its end, if it never started).")
      .def_prop_ro(
          "run_ms",
          [](const PyJob& j) {
            nb::gil_scoped_release release;
            return j.job.times().run_ms();
          },
          "Milliseconds from its start to its end (0 until it ends or if it never started).")
      .def_prop_ro("name", [](const PyJob& j) { return j.job.name(); })
      .def_prop_ro("stream", [](const PyJob& j) { return j.job.stream(); })
      .def("__repr__", [](const PyJob& j) {
        JobStatus s;
        {
          nb::gil_scoped_release release;
          s = j.job.status();
        }
        return "Job(" +
               (j.job.name().empty() ? "#" + std::to_string(j.job.sequence())
                                     : "'" + j.job.name() + "'") +
               ", " + job_status_name(s) + ")";
      });

  nb::class_<PyScheduler>(m, "Scheduler", nb::is_weak_referenceable(),
                          "Runs submitted functions on worker threads, one job at a time per "
                          "stream, by priority; `with` (or close()) waits for every job.")
      .def(
          "__init__",
          [](PyScheduler* self, long long capacity, int workers) {
            if (capacity <= 0)
              throw Error("kiln.Scheduler: capacity is " + std::to_string(capacity) +
                          "; a scheduler needs room for at least one queued job");
            new (self) PyScheduler();
            self->s = std::make_unique<Scheduler>(
                SchedulerOptions{workers, static_cast<size_t>(capacity)});
          },
          "capacity"_a = 1024, "workers"_a = 0)
      .def("submit", &submit, "fn"_a, "args"_a = nb::tuple(), "stream"_a = nb::none(),
           "priority"_a = 0, "deadline"_a = nb::none(), "name"_a = "",
           "Queues fn(*args), waiting while the queue is full (Ctrl-C raises KeyboardInterrupt). "
           "stream: a kiln.Stream or device (default: the caller's current stream); deadline: "
           "seconds from now.")
      .def("wait_all",
           [](PyScheduler& self) {
             Scheduler& s = self.get();
             self.not_from_own_job("wait_all()");
             nb::gil_scoped_release release;
             s.wait_all();
           })
      .def_prop_ro("queued",
                   [](PyScheduler& self) {
                     Scheduler& s = self.get();
                     nb::gil_scoped_release release;
                     return s.queued();
                   })
      .def_prop_ro("workers", [](PyScheduler& self) { return self.get().workers(); })
      .def("close", &PyScheduler::close)
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](PyScheduler& self, nb::args) { self.close(); });
}

}  // namespace kiln::py
