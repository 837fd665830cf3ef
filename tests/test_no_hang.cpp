// Never a hang: every producer x consumer pair across devices finishes with the reference's
// values, on every path a user takes (eager, compiled, compiled run inline, an AOT artifact, a
// Scheduler job); and a call stuck on purpose shows what it waits for (pending_work(), the
// watchdog, SIGQUIT). Each cell runs under a watchdog of its own: one that does not finish in
// time fails the test naming the cell, prints pending_work() and ends the process, instead of
// hanging ctest.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <future>
#include <thread>

#include "executor/inline_policy.h"
#include "executor/stream_hold.h"
#include "test_util.h"

using namespace kiln;

namespace {

constexpr int kCellSeconds = 120;  // a cold PoCL build is ~1 s; a hang is forever

// Runs f on a thread of its own; if it has not finished in `seconds`, fails naming `cell`,
// prints what Kiln waits for and ends the process (the stuck thread cannot be stopped).
template <typename F>
auto within(const std::string& cell, int seconds, F f) -> decltype(f()) {
  auto fut = std::async(std::launch::async, std::move(f));
  if (fut.wait_for(std::chrono::seconds(seconds)) == std::future_status::timeout) {
    std::string text = "NoHang: cell '" + cell + "' did not finish in " + std::to_string(seconds) +
                       " s\n" + pending_work().str();
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    ADD_FAILURE() << text;
    std::_Exit(1);
  }
  return fut.get();
}

std::vector<std::string> available_devices() {
  std::vector<std::string> out;
  for (const char* b : {"cpu", "opencl", "vulkan", "reference"})
    if (test::backend_available(b)) out.push_back(b);
  return out;
}

enum class Consumer {
  Elementwise,
  Softmax,
  RowSum,
  Matmul,
  Sort,
  Argsort,
  Cumsum,
  Take,
  ScatterAdd,
  ToHost
};
constexpr std::array kConsumers = {Consumer::Elementwise, Consumer::Softmax, Consumer::RowSum,
                                   Consumer::Matmul,      Consumer::Sort,    Consumer::Argsort,
                                   Consumer::Cumsum,      Consumer::Take,    Consumer::ScatterAdd,
                                   Consumer::ToHost};
const char* name(Consumer c) {
  switch (c) {
    case Consumer::Elementwise: return "element-wise";
    case Consumer::Softmax: return "softmax";
    case Consumer::RowSum: return "row sum";
    case Consumer::Matmul: return "matmul";
    case Consumer::Sort: return "sort";
    case Consumer::Argsort: return "argsort";
    case Consumer::Cumsum: return "cumsum";
    case Consumer::Take: return "take";
    case Consumer::ScatterAdd: return "scatter_add";
    case Consumer::ToHost: return "copy to host";
  }
  return "?";
}

// How the producer's value reaches the consumer.
enum class Placement { ComputeOn, OtherStream, EarlierCall };
constexpr std::array kPlacements = {Placement::ComputeOn, Placement::OtherStream,
                                    Placement::EarlierCall};
const char* name(Placement p) {
  switch (p) {
    case Placement::ComputeOn: return "compute_on";
    case Placement::OtherStream: return "another stream";
    case Placement::EarlierCall: return "an earlier call";
  }
  return "?";
}

enum class Path { Eager, Compiled, CompiledInline, Aot, Job };
constexpr std::array kPaths = {Path::Eager, Path::Compiled, Path::CompiledInline, Path::Aot,
                               Path::Job};
const char* name(Path p) {
  switch (p) {
    case Path::Eager: return "eager";
    case Path::Compiled: return "compiled";
    case Path::CompiledInline: return "compiled, run inline";
    case Path::Aot: return "AOT artifact";
    case Path::Job: return "Scheduler job";
  }
  return "?";
}

struct Inputs {
  Array x = random::normal({8, 16}, float32, random::key(3));
  Array w = random::normal({16, 4}, float32, random::key(4));
  Array idx = array(std::vector<int64_t>{0, 5, 0}, {3});
  Array upd = random::normal({8, 3}, float32, random::key(5));
};

Array produce(const Array& x) { return x * 2.0f + 1.0f; }

Array consume(Consumer c, const Array& h, const std::vector<Array>& a) {
  switch (c) {
    case Consumer::Elementwise: return exp(h * 0.1f) - h;
    case Consumer::Softmax: return softmax(h, -1);
    case Consumer::RowSum: return sum(h, -1);
    case Consumer::Matmul: return matmul(h, a[1]);
    case Consumer::Sort: return sort(h, -1);
    case Consumer::Argsort: return argsort(h, -1);
    case Consumer::Cumsum: return cumsum(h, 1);
    case Consumer::Take: return take(h, a[2], 1);
    case Consumer::ScatterAdd: return scatter_add(h, a[2], a[3], 1);
    case Consumer::ToHost: return h;
  }
  return h;
}

struct Cell {
  std::string producer, consumer_device;
  Placement placement;
  Consumer consumer;
  Path path;
  std::string str() const {
    return std::string("producer on ") + producer + " via " + name(placement) + ", " +
           name(consumer) + " on " + consumer_device + ", " + name(path);
  }
};

Scheduler& scheduler() {
  static Scheduler s;
  return s;
}

std::vector<double> run_cell(const Cell& c, const Inputs& in) {
  Device pd = device(c.producer);
  Consumer op = c.consumer;
  bool pinned = c.placement == Placement::ComputeOn;
  auto body = [pd, op, pinned](const std::vector<Array>& a) {
    Array h = pinned ? compute_on(pd, produce)(a[0]) : a[0];
    return std::vector<Array>{consume(op, h, a)};
  };
  Array first = in.x;
  if (c.placement == Placement::OtherStream) {
    StreamScope s(new_stream(pd));
    first = produce(in.x);  // lazy: computed when the consumer's call needs it
  } else if (c.placement == Placement::EarlierCall) {
    StreamScope s(new_stream(pd));
    auto f = compile([](const std::vector<Array>& a) { return std::vector<Array>{produce(a[0])}; });
    first = f({in.x})[0];  // in flight while the consumer is submitted
  }
  std::vector<Array> args = {first, in.w, in.idx, in.upd};
  Stream cs = new_stream(device(c.consumer_device));
  StreamScope scope(cs);
  Array out = first;  // replaced by each path's result
  switch (c.path) {
    case Path::Eager: out = body(args)[0]; break;
    case Path::Compiled: out = compile(body)(args)[0]; break;
    case Path::CompiledInline: {
      InlinePolicy before = set_inline_policy(InlinePolicy::Always);
      out = compile(body)(args)[0];
      eval({out});
      set_inline_policy(before);
      break;
    }
    case Path::Aot: {
      Executable e = compile(body).lower(args).compile();
      out = Executable::from_artifact(e.artifact())(args)[0];
      break;
    }
    case Path::Job: {
      JobOptions o;
      o.stream = cs;
      o.name = "no-hang cell";
      out = scheduler().submit(compile(body), args, o).outputs()[0];
      break;
    }
  }
  return test::values(out);
}

std::vector<double> expected(Consumer op, const Inputs& in) {
  StreamScope s(default_stream(device("reference")));
  std::vector<Array> a = {in.x, in.w, in.idx, in.upd};
  return test::values(consume(op, produce(in.x), a));
}

void expect_cell(const Cell& c, const Inputs& in, const std::vector<double>& want) {
  std::vector<double> got = within(c.str(), kCellSeconds, [&] { return run_cell(c, in); });
  ASSERT_EQ(got.size(), want.size()) << c.str();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << c.str() << " at " << i;
}

}  // namespace

// The program of issue 33: a matmul on an OpenCL stream read a value a cpu-placed step of the
// same compiled function produced, and never returned (CLBlast blocked the submitting thread
// on a command that waited for the cpu step, which that thread had yet to start).
TEST(NoHang, IssueProgramPrintsItsSumOnEveryDevice) {
  Array x = random::normal({64, 64}, float32, random::key(0));
  Array w = random::normal({64, 64}, float32, random::key(1));
  auto f = compile([](const std::vector<Array>& in) {
    Array h = compute_on(device("cpu"), [](const Array& a) { return a * 2.0f + 1.0f; })(in[0]);
    return std::vector<Array>{matmul(h, in[1])};
  });
  float want = 0;
  {
    StreamScope s(default_stream(device("reference")));
    want = sum(matmul(x * 2.0f + 1.0f, w)).item<float>();
  }
  if (!test::backend_available("cpu")) GTEST_SKIP() << "the program places work on cpu";
  for (const std::string& d : available_devices()) {
    float got = within("issue 33's program on " + d, kCellSeconds, [&] {
      StreamScope s(new_stream(device(d)));
      return sum(f({x, w})[0]).item<float>();
    });
    EXPECT_NEAR(got, want, 1e-3 * (1 + std::abs(want))) << d;
  }
}

// Producers on every device x placements x consumers on every device x paths. make test runs a
// random sample of the cells (KILN_TEST_SEED replays one), make test-long all of them.
TEST(NoHang, ProducerConsumerMatrix) {
  std::vector<std::string> devs = available_devices();
  std::vector<Cell> cells;
  for (const std::string& p : devs)
    for (Placement pl : kPlacements)
      for (Consumer op : kConsumers)
        for (const std::string& cd : devs)
          for (Path path : kPaths) cells.push_back(Cell{p, cd, pl, op, path});
  test::CaseSample chosen = test::case_sample(cells.size(), 60);
  SCOPED_TRACE(chosen.trace);
  Inputs in;
  std::vector<std::vector<double>> want;
  for (Consumer op : kConsumers) want.push_back(expected(op, in));
  auto t0 = std::chrono::steady_clock::now();
  int ran = 0;
  std::array<double, kPaths.size()> path_s{};
  std::array<int, kPaths.size()> path_n{};
  for (size_t i = 0; i < cells.size(); ++i) {
    if (!chosen(i)) continue;
    auto c0 = std::chrono::steady_clock::now();
    expect_cell(cells[i], in, want[static_cast<size_t>(cells[i].consumer)]);
    auto p = static_cast<size_t>(cells[i].path);
    path_s[p] += std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    path_n[p]++;
    ++ran;
    if (HasFatalFailure()) return;
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("NoHang matrix: %d of %zu cells (%zu devices) in %.1f s\n", ran, cells.size(),
              devs.size(), s);
  for (size_t p = 0; p < kPaths.size(); ++p)
    std::printf("  %-22s %4d cells, %.2f ms each\n", name(kPaths[p]), path_n[p],
                path_n[p] ? 1e3 * path_s[p] / path_n[p] : 0.0);
}

// A call held on purpose on each device: pending_work() names its stream and task, says where
// the task is, and shows the thread waiting for it; released, the call completes with its value.
TEST(PendingWork, ShowsWhatAHeldCallWaitsFor) {
  Array x = random::normal({32, 32}, float32, random::key(7));
  float want = 0;
  {
    StreamScope s(default_stream(device("reference")));
    want = sum(x * 2.0f + 1.0f).item<float>();
  }
  for (const std::string& d : available_devices()) {
    SCOPED_TRACE(d);
    Stream st = new_stream(device(d));
    auto hold = std::make_unique<StreamHold>(st);
    auto waiter = std::async(std::launch::async, [&] {
      StreamScope s(st);
      return sum(x * 2.0f + 1.0f).item<float>();
    });
    std::string text;
    bool seen = false;
    for (int i = 0; i < 500 && !seen; ++i) {
      PendingWork w = pending_work();
      text = w.str();
      for (const BlockedThread& t : w.threads) seen = seen || t.seconds >= 0;
      bool on_stream = text.find(st.str()) != std::string::npos;
      seen = seen && (on_stream || d == "cpu" || d == "reference");
      if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(seen) << text;
    EXPECT_NE(text.find("has waited"), std::string::npos) << text;
    if (d == "opencl" || d == "vulkan") {
      EXPECT_NE(text.find("queued on the device"), std::string::npos) << text;
      EXPECT_NE(text.find(st.str()), std::string::npos) << text;
    }
    hold.reset();  // releases
    float got = within("held call on " + d, kCellSeconds, [&] { return waiter.get(); });
    EXPECT_NEAR(got, want, 1e-3 * (1 + std::abs(want)));
  }
}

// The watchdog and SIGQUIT, in a child process (this binary, one test, an environment of its
// own): the parent reads what the child printed.
TEST(PendingWork, ChildHeldCall) {
  const char* mode = std::getenv("KILN_TEST_CHILD");
  if (!mode) GTEST_SKIP() << "runs as the child of WatchdogAndSigquitPrintWhatACallWaitsFor";
  std::string d = test::backend_available("opencl") ? "opencl" : "cpu";
  Stream st = new_stream(device(d));
  Array x = random::normal({16}, float32, random::key(1));
  auto hold = std::make_unique<StreamHold>(st);
  auto waiter = std::async(std::launch::async, [&] {
    StreamScope s(st);
    return sum(x + 1.0f).item<float>();
  });
  // From when the call waits (its kernels may take seconds to build under a sanitizer): the
  // watchdog's first report comes a second later.
  for (int i = 0; i < 12000 && pending_work().threads.empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (std::string(mode) == "sigquit") kill(getpid(), SIGQUIT);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  hold.reset();
  waiter.get();
}

TEST(PendingWork, WatchdogAndSigquitPrintWhatACallWaitsFor) {
  for (std::string mode : {"watchdog", "sigquit"}) {
    SCOPED_TRACE(mode);
    std::string env = mode == "watchdog" ? "KILN_WATCHDOG=1 " : "";
    std::string cmd = "KILN_TEST_CHILD=" + mode + " " + env + "/proc/" + std::to_string(getpid()) +
                      "/exe --gtest_filter=PendingWork.ChildHeldCall 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    int status = pclose(p);
    EXPECT_EQ(status, 0) << out;
    std::string header = mode == "watchdog"
                             ? "kiln: a wait has lasted longer than KILN_WATCHDOG=1 s"
                             : "kiln: SIGQUIT: what Kiln is waiting for";
    EXPECT_NE(out.find(header), std::string::npos) << out;
    EXPECT_NE(out.find("has waited"), std::string::npos) << out;
    EXPECT_NE(out.find("call(s) in flight"), std::string::npos) << out;
  }
}

// Every wait can be given up: a job whose call is stuck behind a held stream ends at its
// deadline, or when cancelled, with kiln::Error naming what it waited for; another stream
// works meanwhile; released, the abandoned call completes and nothing is left in flight.
TEST(GiveUp, AJobStuckOnAHeldStreamEndsAtItsDeadlineOrCancel) {
  Array x = random::normal({32, 32}, float32, random::key(9));
  eval({x});
  auto f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{sum(in[0] * 2.0f + 1.0f)}; });
  Scheduler sched(SchedulerOptions{2});
  for (const std::string& d : available_devices()) {
    for (bool cancel : {false, true}) {
      SCOPED_TRACE(d + (cancel ? ", cancelled" : ", deadline"));
      Stream st = new_stream(device(d));
      {
        StreamScope s(st);
        eval(f({x}));  // kernels built: the job's call reaches its wait well before the deadline
      }
      auto hold = std::make_unique<StreamHold>(st);
      JobOptions o;
      o.stream = st;
      o.name = "stuck";
      if (!cancel) o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      Job job = sched.submit(f, {x}, o);
      if (cancel) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        job.cancel();
      }
      bool ended = within("a stuck job on " + d, kCellSeconds,
                          [&] { return job.wait_for(std::chrono::seconds(60)); });
      ASSERT_TRUE(ended) << pending_work().str();
      EXPECT_EQ(job.status(), cancel ? JobStatus::Cancelled : JobStatus::DeadlineExceeded);
      std::string why;
      try {
        std::rethrow_exception(job.error());
      } catch (const std::exception& e) {
        why = e.what();
      }
      EXPECT_NE(why.find("gave up waiting"), std::string::npos) << why;
      if (d == "opencl" || d == "vulkan") {
        EXPECT_NE(why.find(st.str()), std::string::npos) << why;
      }
      // Another device's stream: lavapipe runs every vulkan stream on its one queue, where a
      // submission waiting for the host holds the ones after it.
      std::string od = d == "cpu" ? "reference" : "cpu";
      float other =
          within("a stream of " + od + " while one of " + d + " is held", kCellSeconds, [&] {
            StreamScope s(new_stream(device(od)));
            return sum(x * 0.0f + 1.0f).item<float>();
          });
      EXPECT_EQ(other, 1024.0f);
      hold.reset();
      bool drained = false;
      for (int i = 0; i < 3000 && !drained; ++i) {
        drained = pending_work().calls.empty();
        if (!drained) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_TRUE(drained) << pending_work().str();
    }
  }
}

#ifdef KILN_CLI_PATH
// kiln run --timeout on each device: a run whose stream is held on purpose gives up when the
// timeout passes, says what it waited for and exits 124 at once; without the hold it writes
// its output and says so.
TEST(GiveUp, KilnRunTimeoutEndsARunStuckOnEachDevice) {
  std::string dir = KILN_TEST_DATA_DIR;
  Array x = random::normal({16, 16}, float32, random::key(2));
  auto f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{sum(in[0] * 2.0f + 1.0f, 1)}; });
  f.lower({x}).compile().save(dir + "/stuck.kiln");
  save_npy(dir + "/stuck_x.npy", x);
  for (const std::string& d : available_devices()) {
    SCOPED_TRACE(d);
    std::string run = std::string(KILN_CLI_PATH) + " run " + dir + "/stuck.kiln -i " + dir +
                      "/stuck_x.npy -o " + dir + "/stuck_y.npy --device " + d;
    auto shell = [&](const std::string& cmd, std::string& out) {
      FILE* p = popen((cmd + " 2>&1").c_str(), "r");
      char buf[4096];
      size_t n;
      while (p && (n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
      int status = p ? pclose(p) : -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    };
    std::string out;
    EXPECT_EQ(shell(run + " --timeout 60", out), 0) << out;
    EXPECT_NE(out.find("stuck_y.npy: float32 (16,)"), std::string::npos) << out;
    out.clear();
    auto t0 = std::chrono::steady_clock::now();
    int rc = within("kiln run --timeout on " + d, kCellSeconds,
                    [&] { return shell("KILN_TEST_HOLD_STREAM=1 " + run + " --timeout 1", out); });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(rc, 124) << out;
    EXPECT_LT(s, 30) << out;
    EXPECT_NE(out.find("--timeout 1 s passed: gave up waiting"), std::string::npos) << out;
  }
}
#endif
