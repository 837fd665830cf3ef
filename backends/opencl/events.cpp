#include "backends/opencl/events.h"

#include "backends/opencl/completion_poller.h"
#include "graph/error.h"

namespace kiln::opencl {

namespace {

std::exception_ptr error_ptr(const std::string& what) {
  try {
    throw_error(what);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace

ClEvent::ClEvent(cl_event e, std::string what, std::vector<std::shared_ptr<void>> keep, bool poll)
    : ev_(e), what_(std::move(what)), keep_(std::move(keep)), poll_(poll) {}

ClEvent::~ClEvent() { clReleaseEvent(ev_); }

void ClEvent::on_complete(std::function<void(std::exception_ptr)> f) {
  if (poll_) {
    watch_completion(ev_, [f = std::move(f), self = shared_from_this()](cl_int status) {
      f(status < 0 ? self->failure(status) : nullptr);
    });
    return;
  }
  auto ctx = std::make_unique<Callback>(Callback{std::move(f), shared_from_this()});
  cl_int err = clSetEventCallback(ev_, CL_COMPLETE, &ClEvent::callback, ctx.get());
  if (err != CL_SUCCESS) {
    ctx->f(error_ptr("opencl: clSetEventCallback failed: " + cl_error_name(err)));
    return;
  }
  (void)ctx.release();  // owned by the callback from now on
}

void ClEvent::wait() {
  cl_int err = clWaitForEvents(1, &ev_);
  cl_int status = CL_COMPLETE;
  clGetEventInfo(ev_, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
  if (err != CL_SUCCESS || status < 0) std::rethrow_exception(failure(status < 0 ? status : err));
}

void ClEvent::set_cause(std::exception_ptr e) {
  std::lock_guard<std::mutex> lock(cause_mu_);
  cause_ = std::move(e);
}

void CL_CALLBACK ClEvent::callback(cl_event, cl_int status, void* user) {
  std::unique_ptr<Callback> ctx(static_cast<Callback*>(user));
  ctx->f(status < 0 ? ctx->self->failure(status) : nullptr);
}

std::exception_ptr ClEvent::failure(cl_int status) const {
  {
    std::lock_guard<std::mutex> lock(cause_mu_);
    if (cause_) return cause_;
  }
  return error_ptr("opencl: " + what_ + " failed on the device: " + cl_error_name(status));
}

std::shared_ptr<ClEvent> user_event(cl_context ctx, std::string what, bool poll) {
  cl_int err = CL_SUCCESS;
  cl_event e = clCreateUserEvent(ctx, &err);
  cl_check(err, "clCreateUserEvent");
  return std::make_shared<ClEvent>(e, std::move(what), std::vector<std::shared_ptr<void>>{}, poll);
}

void complete_user_event(ClEvent& e, std::exception_ptr error) {
  if (error) e.set_cause(error);
  clSetUserEventStatus(e.handle(), error ? -1 : CL_COMPLETE);
}

ClSignal::ClSignal(cl_context ctx)
    : event_(user_event(ctx, "a cpu task the device waited for", false)) {}

ClSignal::~ClSignal() {
  if (!done_.exchange(true)) clSetUserEventStatus(event_->handle(), -1);
}

void ClSignal::complete(std::exception_ptr error) {
  if (done_.exchange(true)) return;
  clSetUserEventStatus(event_->handle(), error ? -1 : CL_COMPLETE);
}

}  // namespace kiln::opencl
