// Asynchronous evaluation: a compiled call returns once its plan is submitted and its outputs
// are in flight until evaluated; async_eval starts work and returns; eval, item() and
// to_vector() wait and raise the work's errors; dropping in-flight arrays neither hangs nor
// leaks. A gated test device (the reference interpreter behind an asynchronous queue whose work
// completes only when the test opens a gate) makes "returned before the work finished" an
// observable fact rather than a timing. Runs without OpenCL, so the sanitizer builds cover it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "executor/cancel.h"
#include "executor/inline_policy.h"
#include "graph/array_node.h"
#include "kiln.h"
#include "test_backends.h"
#include "test_util.h"

namespace kiln {
namespace {

// Holds back the completion of device work until opened (optionally with an error).
class Gate {
 public:
  void open(std::exception_ptr error = nullptr) {
    std::vector<std::function<void()>> waiting;
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
      error_ = error;
      waiting.swap(waiting_);
    }
    cv_.notify_all();
    for (auto& f : waiting) f();
  }
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
    error_ = nullptr;
  }
  // Runs f(error) once the gate is open (now if it is).
  void when_open(std::function<void(std::exception_ptr)> f) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!open_) {
      waiting_.push_back([this, f] { f(error_); });
      return;
    }
    std::exception_ptr e = error_;
    lock.unlock();
    f(e);
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  std::exception_ptr error_;
  std::vector<std::function<void()>> waiting_;
};

class GatedEvent : public Event {
 public:
  GatedEvent(EventPtr inner, std::shared_ptr<Gate> gate)
      : inner_(std::move(inner)), gate_(std::move(gate)) {}
  void on_complete(std::function<void(std::exception_ptr)> f) override {
    auto gate = gate_;
    inner_->on_complete([gate, f](std::exception_ptr e) {
      gate->when_open([e, f](std::exception_ptr g) { f(e ? e : g); });
    });
  }
  void wait() override {
    auto done = std::make_shared<test::ManualEvent>();
    on_complete([done](std::exception_ptr e) { done->complete(e); });
    done->wait();
  }

 private:
  EventPtr inner_;
  std::shared_ptr<Gate> gate_;
};

class GatedQueue : public Queue {
 public:
  GatedQueue(std::unique_ptr<Queue> q, std::shared_ptr<Gate> gate)
      : q_(std::move(q)), gate_(std::move(gate)) {}
  EventPtr enqueue_kernel(const CompiledKernel& k, const KernelArgs& a) override {
    return gated(q_->enqueue_kernel(k, a));
  }
  EventPtr enqueue_copy(Buffer& s, Buffer& d, size_t n) override {
    return gated(q_->enqueue_copy(s, d, n));
  }
  EventPtr enqueue_matmul(const MatmulArgs& a) override { return gated(q_->enqueue_matmul(a)); }
  void finish() override { q_->finish(); }
  bool runs_inline() const override { return false; }

 private:
  EventPtr gated(EventPtr e) { return e ? std::make_shared<GatedEvent>(e, gate_) : nullptr; }
  std::unique_ptr<Queue> q_;
  std::shared_ptr<Gate> gate_;
};

class GatedBackend : public test::MirrorBackend {
 public:
  GatedBackend() : MirrorBackend("gated", true) {}
  std::unique_ptr<Queue> create_queue(int device) override {
    return std::make_unique<GatedQueue>(MirrorBackend::create_queue(device), gate);
  }
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
};

GatedBackend& gated() {
  static auto backend = std::make_shared<GatedBackend>();
  static bool registered = (register_backend(backend), true);
  (void)registered;
  return *backend;
}

std::vector<float> iota(int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i % 97) * 0.01f;
  return v;
}

CompiledFunction affine() {
  return compile([](const std::vector<Array>& in) {
    return std::vector<Array>{in[0] * 2.0f + 1.0f, sum(in[0], -1)};
  });
}

TEST(Async, CompiledCallReturnsBeforeItsDeviceWorkCompletes) {
  GatedBackend& g = gated();
  auto f = affine();
  Array x = array(iota(64), {4, 16});
  g.gate->close();
  std::vector<Array> out;
  {
    StreamScope scope(device("gated"));
    out = f({x});
  }
  // The work cannot have completed: the gate holds it.
  EXPECT_FALSE(out[0].is_evaluated());
  EXPECT_FALSE(out[1].is_evaluated());
  EXPECT_EQ(out[0].shape(), (Shape{4, 16}));  // shape, dtype and device are known at once
  EXPECT_EQ(out[0].device(), device("gated"));
  std::thread opener([&] { g.gate->open(); });
  std::vector<float> v = out[0].to_vector<float>();  // waits
  opener.join();
  EXPECT_TRUE(out[0].is_evaluated());
  std::vector<float> xs = iota(64);
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(v[i], xs[i] * 2.0f + 1.0f);
  EXPECT_NEAR(
      out[1].to_vector<float>()[0],
      0.0f +
          [&] {
            float s = 0;
            for (int i = 0; i < 16; ++i) s += xs[i];
            return s;
          }(),
      1e-4f);
}

TEST(Async, AsyncEvalStartsWorkThatEvalWaitsFor) {
  GatedBackend& g = gated();
  Array x = array(iota(32), {32});
  StreamScope scope(device("gated"));  // eager ops run on the caller's stream
  g.gate->close();
  Array y = exp(x) + 1.0f;
  EXPECT_FALSE(y.is_evaluated()) << "before";
  async_eval({y});
  EXPECT_FALSE(y.is_evaluated());
  g.gate->open();
  eval(y);
  EXPECT_TRUE(y.is_evaluated());
  std::vector<float> xs = iota(32), v = y.to_vector<float>();
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(v[i], std::exp(xs[i]) + 1.0f, 1e-5f);
  async_eval(y);  // already evaluated: nothing to do
}

TEST(Async, DeviceErrorsReachTheWaitingCallerAndFailOnlyThatWork) {
  GatedBackend& g = gated();
  auto f = affine();
  Array x = array(iota(64), {4, 16});
  StreamScope scope(device("gated"));
  g.gate->close();
  std::vector<Array> bad = f({x});
  g.gate->open(std::make_exception_ptr(Error("gated: the device lost the work (test)")));
  try {
    bad[0].to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lost the work"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eval(bad), Error);
  EXPECT_THROW(bad[1].to_vector<float>(), Error);
  g.gate->close();
  g.gate->open();
  // The stream, the function and other arrays stay usable.
  std::vector<Array> good = f({x});
  EXPECT_FLOAT_EQ(good[0].to_vector<float>()[1], iota(2)[1] * 2.0f + 1.0f);
  Array y = x + 1.0f;
  EXPECT_FLOAT_EQ(y.to_vector<float>()[1], iota(2)[1] + 1.0f);
}

// x = f(x) on a device stream: each call binds the previous call's output while it is still in
// flight (the in-order queue orders them), so the loop runs to its end with the gate shut, where
// waiting for each step would block until the watchdog opened it.
TEST(Async, ADeviceLoopBindsEachStepsOutputWithoutWaitingForIt) {
  GatedBackend& g = gated();
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 0.5f + 1.0f}; });
  Array x = array(iota(64), {64});
  eval(x);
  StreamScope scope(device("gated"));
  eval(f({x}));  // traced and compiled with the gate open
  g.gate->close();
  std::promise<void> looped;
  std::atomic<bool> forced{false};
  std::thread watchdog([&, done = looped.get_future()] {
    if (done.wait_for(std::chrono::seconds(20)) == std::future_status::ready) return;
    forced = true;  // the loop waited for the device: let it finish, and fail below
    g.gate->open();
  });
  const int steps = 40;
  for (int i = 0; i < steps; ++i) x = f({x})[0];
  EXPECT_FALSE(forced.load()) << "a step waited for the one before it";
  looped.set_value();
  watchdog.join();
  g.gate->open();
  std::vector<float> want = iota(64), got = x.to_vector<float>();
  for (int i = 0; i < steps; ++i)
    for (float& v : want) v = v * 0.5f + 1.0f;
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << "element " << i;
}

// A step that fails (cancelled here) fails every later step that reads it, though none of them
// waited: the error reaches the loop's result, and only the outputs that read the failed input.
TEST(Async, AFailedStepOfADeviceLoopReachesTheResult) {
  GatedBackend& g = gated();
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 0.5f + 1.0f}; });
  auto pair = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{in[0] + 1.0f, in[1] + 1.0f};
  });
  // y has another shape than x, so that no kernel computes both (the error reaches the
  // outputs of the tasks that read a failed input).
  Array x = array(iota(64), {64}), y = array(iota(32), {32});
  eval({x, y});
  StreamScope scope(device("gated"));
  eval(f({x}));
  eval(f({y}));
  eval(pair({x, y}));
  g.gate->close();
  auto token = std::make_shared<CancelToken>();
  token->cancel("step 3 cancelled by the test");
  for (int i = 0; i < 10; ++i) {
    if (i == 3) {
      CancelScope cancel(token);
      x = f({x})[0];
    } else {
      x = f({x})[0];
    }
  }
  y = f({y})[0];
  std::vector<Array> both = pair({x, y});
  g.gate->open();
  test::expect_error([&] { eval(x); }, {"step 3 cancelled by the test"});
  test::expect_error([&] { eval(both[0]); }, {"step 3 cancelled by the test"});
  EXPECT_FLOAT_EQ(both[1].to_vector<float>()[5], iota(6)[5] * 0.5f + 2.0f);
  // The stream and the function stay usable.
  Array fresh = array(iota(64), {64});
  EXPECT_FLOAT_EQ(f({fresh})[0].to_vector<float>()[7], iota(8)[7] * 0.5f + 1.0f);
}

TEST(Async, CpuErrorsReachTheWaitingCaller) {
  auto f = affine();
  Array x = array(iota(64), {4, 16});
  StreamScope scope(device("cpu"));
  auto token = std::make_shared<CancelToken>();
  std::vector<Array> out;
  {
    CancelScope cancel(token);
    token->cancel("cancelled by the test");
    out = f({x});  // stops at its first task, on whichever thread runs it
  }
  try {
    out[0].to_vector<float>();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled by the test"), std::string::npos) << e.what();
  }
  EXPECT_THROW(eval(out), Error);
  std::vector<Array> again = f({x});
  EXPECT_FLOAT_EQ(again[0].to_vector<float>()[3], iota(4)[3] * 2.0f + 1.0f);
}

// Small work on an idle cpu stream runs on the calling thread (executor/inline_policy.h): its
// outputs are ready when the call returns, profiled on this thread, and its errors (here a
// cancellation) reach eval as they do from the stream's worker.
TEST(Async, SmallCallsOnAnIdleCpuStreamRunOnTheCallingThread) {
  struct PolicyScope {
    InlinePolicy old = set_inline_policy(InlinePolicy::Always);
    ~PolicyScope() { set_inline_policy(old); }
  } policy;
  auto f = affine();
  Array x = array(iota(64), {4, 16});
  eval(x);
  StreamScope scope(new_stream(device("cpu")));
  std::vector<TaskEvent> events;
  std::vector<Array> out;
  {
    ProfileScope prof;
    eval(x * 3.0f);  // eager: runs on this thread, which the first event names
    out = f({x});
    EXPECT_TRUE(out[0].is_evaluated());
    EXPECT_TRUE(out[1].is_evaluated());
    events = prof.events();
  }
  ASSERT_GE(events.size(), 2u);
  for (const TaskEvent& e : events) EXPECT_EQ(e.thread, events[0].thread) << e.name;
  EXPECT_FLOAT_EQ(out[0].to_vector<float>()[5], iota(6)[5] * 2.0f + 1.0f);
  auto token = std::make_shared<CancelToken>();
  token->cancel("cancelled inline");
  {
    CancelScope cancel(token);
    out = f({x});
  }
  try {
    eval(out);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cancelled inline"), std::string::npos) << e.what();
  }
  std::vector<float> v = iota(64);
  float row2 = 0;
  for (int i = 32; i < 48; ++i) row2 += v[i];
  EXPECT_NEAR(f({x})[1].to_vector<float>()[2], row2, 1e-4);  // the stream works after the error
}

TEST(Async, CpuCallsOnOneStreamKeepTheirOrderAndValues) {
  auto step =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] + 1.0f}; });
  StreamScope scope(new_stream(device("cpu")));
  Array x = zeros({1000});
  std::vector<Array> all;
  for (int i = 0; i < 50; ++i) {
    x = step({x})[0];  // each waits for its input; the last is still in flight
    all.push_back(x);
  }
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(all[i].to_vector<float>()[999], static_cast<float>(i + 1)) << i;
}

// A cpu stream's worker thread ends after idling; later calls on the stream start another.
TEST(Async, ACpuStreamWorksAfterItsWorkerIdled) {
  auto f = affine();
  Array x = array(iota(64), {4, 16});
  StreamScope scope(new_stream(device("cpu")));
  std::vector<Array> first = f({x});
  eval(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the idle limit
  std::vector<Array> later;
  for (int i = 0; i < 5; ++i) later = f({later.empty() ? x : later[0]});
  float v = x.to_vector<float>()[5];
  for (int i = 0; i < 5; ++i) v = v * 2.0f + 1.0f;
  EXPECT_FLOAT_EQ(later[0].to_vector<float>()[5], v);
  EXPECT_FLOAT_EQ(first[0].to_vector<float>()[5], x.to_vector<float>()[5] * 2.0f + 1.0f);
}

TEST(Async, DroppingInFlightArraysNeitherHangsNorLeaks) {
  GatedBackend& g = gated();
  auto f = affine();
  Array x = array(iota(64), {4, 16});
  std::weak_ptr<ArrayNode> device_out, cpu_out;
  Stream gs = new_stream(device("gated")), cs = new_stream(device("cpu"));
  g.gate->close();
  {
    StreamScope scope(gs);
    std::vector<Array> out = f({x});
    device_out = out[0].node();
  }
  {
    StreamScope scope(cs);
    for (int i = 0; i < 20; ++i) cpu_out = f({x})[0].node();
  }
  EXPECT_FALSE(device_out.expired());  // the work holds its outputs until it completes
  g.gate->open();
  synchronize(gs);
  synchronize(cs);
  EXPECT_TRUE(device_out.expired());
  EXPECT_TRUE(cpu_out.expired());
  // A profile scope ends only once the work submitted while it recorded has completed.
  g.gate->close();
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    g.gate->open();
  });
  std::vector<TaskEvent> events;
  {
    ProfileScope prof;
    StreamScope scope(gs);
    f({x});
    events = prof.events();
  }
  opener.join();
  EXPECT_FALSE(events.empty());
}

// async_eval inside a transform: the work completes on a worker thread, where no transform
// records, yet the graph the transform walks afterwards must still be there.
TEST(Async, AsyncEvalInsideGradKeepsTheGraph) {
  StreamScope scope(new_stream(device("cpu")));
  Fn f = [](const std::vector<Array>& in) {
    Array y = in[0] * in[0];
    async_eval(y);
    // Give the worker time to take the job (a waiting thread would run it itself, on this
    // thread, where the transform records); then wait for its result.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    eval(y);
    return std::vector<Array>{sum(y * 3.0f)};
  };
  Array x = array(std::vector<float>{1, 2, 3}, {3});
  std::vector<float> g = grad(f)({x})[0].to_vector<float>();
  EXPECT_EQ(g, (std::vector<float>{6, 12, 18}));
}

// The exit rule (executor/lane_worker.cpp): a process that returns from main with compiled
// calls still queued on a cpu stream ends cleanly, neither hanging on a worker nor crashing in
// one that runs while static destructors tear the process down. Before the rule this hung or
// crashed in one run out of a few; the child repeats the pattern to make that likely.
TEST(Async, ExitingWithWorkStillQueuedEndsCleanly) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        // Lanes first, so that they are older than the buffer pool and anything else the
        // queued work touches (the order that made static destructors break it).
        synchronize(new_stream(device("cpu")));
        auto f = compile([](const std::vector<Array>& in) {
          return std::vector<Array>{tanh(in[0] * 1.5f) + sum(in[0])};
        });
        Array x = random::normal({256, 1024}, float32, random::key(7));
        for (int s = 0; s < 4; ++s) {
          StreamScope scope(new_stream(device("cpu")));
          for (int i = 0; i < 20; ++i) f({x});  // never read
        }
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace kiln
