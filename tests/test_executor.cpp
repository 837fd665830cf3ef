// The Plan executor on its own: DAG order, both paths, error propagation, concurrent calls of
// one plan, stream ordering across threads and concurrency across streams.
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include "executor/executor.h"
#include "executor/inline_policy.h"
#include "test_backends.h"
#include "test_util.h"

using namespace kiln;

namespace {

struct Recorder {
  std::mutex mu;
  std::vector<int> order;
  void hit(int i) {
    std::lock_guard<std::mutex> l(mu);
    order.push_back(i);
  }
};

// A random DAG of host tasks where each task records itself.
Plan random_plan(int n, int edges_per_task, unsigned seed, Recorder& rec, Stream lane) {
  Plan p;
  int l = p.add_lane({StreamOrigin::Explicit, lane});
  std::mt19937 rng(seed);
  for (int t = 0; t < n; ++t) {
    Task task;
    task.name = "t" + std::to_string(t);
    task.lane = l;
    task.host = [&rec, t] { rec.hit(t); };
    for (int e = 0; e < edges_per_task && t > 0; ++e)
      task.deps.push_back(std::uniform_int_distribution<int>(0, t - 1)(rng));
    p.add_task(std::move(task));
  }
  p.finalize();
  return p;
}

void expect_respects_deps(const Plan& p, const std::vector<int>& order) {
  ASSERT_EQ(order.size(), p.tasks().size());
  std::vector<int> pos(order.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  for (size_t t = 0; t < p.tasks().size(); ++t) {
    ASSERT_GE(pos[t], 0) << "task " << t << " did not run";
    for (int d : p.tasks()[t].deps) EXPECT_LT(pos[d], pos[t]) << d << " -> " << t;
  }
}

Stream ref_stream() { return default_stream(device("reference")); }

// Two tasks that each wait (up to 10 s) for the other to arrive: they finish promptly only if
// they run at the same time.
struct Meeting {
  std::atomic<int> arrived{0};
  std::atomic<bool> timed_out{false};
  std::function<void()> task() {
    return [this] {
      arrived++;
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (arrived.load() < 2)
        if (std::chrono::steady_clock::now() > until) {
          timed_out = true;
          return;
        }
    };
  }
};

}  // namespace

TEST(Executor, RandomDagsOnBothPaths) {
  for (auto path : {RunOptions::Path::Direct, RunOptions::Path::Graph}) {
    for (unsigned seed = 0; seed < 5; ++seed) {
      Recorder rec;
      Plan p = random_plan(300, 3, seed, rec, ref_stream());
      RunOptions opt;
      opt.path = path;
      for (int rerun = 0; rerun < 3; ++rerun) {  // a graph is built once and re-run
        rec.order.clear();
        execute(p, {}, opt);
        expect_respects_deps(p, rec.order);
      }
    }
  }
}

TEST(Executor, IndependentTasksRunInParallel) {
  // Two independent tasks that each wait for the other: only a parallel run finishes them.
  Plan p;
  int l = p.add_lane({StreamOrigin::Explicit, ref_stream()});
  Meeting meeting;
  for (int i = 0; i < 2; ++i) {
    Task t;
    t.lane = l;
    t.name = "meet";
    t.host = meeting.task();
    p.add_task(std::move(t));
  }
  p.finalize();
  RunOptions opt;
  opt.path = RunOptions::Path::Graph;
  execute(p, {}, opt);
  EXPECT_FALSE(meeting.timed_out.load()) << "independent tasks did not run concurrently";
}

TEST(Executor, ErrorsFailOnlyDependents) {
  for (auto path : {RunOptions::Path::Direct, RunOptions::Path::Graph}) {
    Plan p;
    int l = p.add_lane({StreamOrigin::Explicit, ref_stream()});
    std::atomic<int> ran{0};
    auto add = [&](std::vector<int> deps, bool fail) {
      Task t;
      t.lane = l;
      t.name = fail ? "boom" : "ok";
      t.deps = std::move(deps);
      t.host = [&ran, fail] {
        if (fail) throw Error("task boom failed on purpose");
        ran++;
      };
      return p.add_task(std::move(t));
    };
    int a = add({}, false);
    int b = add({a}, true);
    int c = add({b}, false);  // depends on the failure: skipped
    int d = add({a}, false);  // independent of it: runs
    int e = add({c, d}, false);
    (void)e;
    p.finalize();
    RunOptions opt;
    opt.path = path;
    execute(p, {}, opt);
    EXPECT_EQ(ran.load(), 2);  // a and d
  }
}

TEST(Executor, ConcurrentCallsOfOnePlan) {
  // 40 tasks: above the direct-path limit, so calls use pooled graph instances.
  std::atomic<int> total{0};
  Plan p;
  int l = p.add_lane({StreamOrigin::Default, {}});
  for (int i = 0; i < 40; ++i) {
    Task t;
    t.lane = l;
    t.name = "inc";
    if (i > 0) t.deps = {i - 1};
    t.host = [&] { total++; };
    p.add_task(std::move(t));
  }
  p.finalize();
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      // Each thread on its own stream so the calls really overlap.
      StreamScope s(new_stream(device("reference")));
      for (int r = 0; r < 50; ++r) execute(p, {});
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 40);
}

TEST(Executor, OneStreamKeepsSubmissionsApart) {
  Stream s = new_stream(device("reference"));
  std::atomic<int> inside{0};
  std::atomic<int> worst{0};
  Plan p;
  int l = p.add_lane({StreamOrigin::Default, {}});
  Task begin, end;
  begin.lane = end.lane = l;
  begin.host = [&] {
    int now = ++inside;
    int w = worst.load();
    while (now > w && !worst.compare_exchange_weak(w, now)) {
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  };
  end.host = [&] { --inside; };
  int b = p.add_task(std::move(begin));
  end.deps = {b};
  p.add_task(std::move(end));
  p.finalize();
  std::vector<std::thread> threads;
  for (int k = 0; k < 3; ++k)
    threads.emplace_back([&] {
      StreamScope scope(s);
      for (int r = 0; r < 30; ++r) execute(p, {});
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(worst.load(), 1) << "two submissions to one stream overlapped";
}

TEST(Executor, DifferentStreamsRunConcurrently) {
  // A task on stream A waits for a task on stream B submitted from another thread.
  Stream a = new_stream(device("reference")), b = new_stream(device("reference"));
  Meeting meeting;
  auto make = [&](Stream s) {
    Plan p;
    Task t;
    t.lane = p.add_lane({StreamOrigin::Explicit, s});
    t.host = meeting.task();
    p.add_task(std::move(t));
    p.finalize();
    return p;
  };
  Plan pa = make(a), pb = make(b);
  std::thread ta([&] { execute(pa, {}); }), tb([&] { execute(pb, {}); });
  ta.join();
  tb.join();
  EXPECT_FALSE(meeting.timed_out.load());
}

TEST(Executor, RejectsWrongInputs) {
  Plan p;
  Slot s;
  s.dtype = float32;
  s.elements = 4;
  s.kind = SlotKind::Input;
  p.inputs.push_back(p.add_slot(s));
  p.finalize();
  test::expect_error([&] { execute(p, {}); }, {"takes 1 inputs"});
  auto small = std::make_shared<HostBuffer>(8, device("reference"));
  test::expect_error([&] { execute(p, {small}); }, {"16 bytes", "float32"});
}

TEST(Executor, CycleIsRejected) {
  Plan p;
  int l = p.add_lane({StreamOrigin::Default, {}});
  Task a, b;
  a.lane = b.lane = l;
  a.deps = {1};
  b.deps = {0};
  p.add_task(std::move(a));
  p.add_task(std::move(b));
  test::expect_error([&] { p.finalize(); }, {"cycle"});
}

namespace {

// Sets the inline policy for one test and puts the old one back.
struct PolicyScope {
  InlinePolicy old;
  explicit PolicyScope(InlinePolicy p) : old(set_inline_policy(p)) {}
  ~PolicyScope() { set_inline_policy(old); }
};

Plan one_host_task(Stream s, std::function<void()> body) {
  Plan p;
  Task t;
  t.name = "host";
  t.lane = p.add_lane({StreamOrigin::Explicit, s});
  t.host = std::move(body);
  p.add_task(std::move(t));
  p.finalize();
  return p;
}

}  // namespace

// A plan on a host lane with nothing outstanding runs on the calling thread when the policy says
// so: done() has run before execute_async returns, and no Pending is left to wait for.
TEST(Executor, AnIdleHostLaneRunsASmallPlanOnTheCallingThread) {
  PolicyScope policy(InlinePolicy::Always);
  Stream s = new_stream(device("reference"));
  std::thread::id ran_on;
  Plan p = one_host_task(s, [&] { ran_on = std::this_thread::get_id(); });
  bool done = false;
  auto work = execute_async(p, nullptr, {}, [&](RunResult r) {
    done = true;
    EXPECT_TRUE(r.errors.empty());
  });
  EXPECT_EQ(work, nullptr);
  EXPECT_TRUE(done);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  // A failing task fails what depends on it, inline as on the worker; the lane stays usable.
  Plan failing;
  int l = failing.add_lane({StreamOrigin::Explicit, s});
  Task a, b;
  a.lane = b.lane = l;
  a.host = [] { throw Error("the task failed on purpose"); };
  bool b_ran = false;
  b.host = [&] { b_ran = true; };
  b.deps = {failing.add_task(std::move(a))};
  failing.add_task(std::move(b));
  failing.finalize();
  EXPECT_EQ(execute_async(failing, nullptr, {}, [](RunResult) {}), nullptr);
  EXPECT_FALSE(b_ran);
  ran_on = {};
  EXPECT_EQ(execute_async(p, nullptr, {}, [](RunResult) {}), nullptr);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

// A lane with a submission outstanding hands the next plan to its worker whatever the policy,
// so the new plan runs after the one before it, never beside or ahead of it.
TEST(Executor, AHostLaneWithWorkOutstandingKeepsSubmissionOrder) {
  Stream s = new_stream(device("reference"));
  std::atomic<bool> release{false}, first_started{false};
  std::vector<int> order;
  std::mutex mu;
  auto note = [&](int i) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(i);
  };
  Plan first = one_host_task(s, [&] {
    first_started = true;
    while (!release.load()) std::this_thread::yield();
    note(1);
  });
  Plan second = one_host_task(s, [&] { note(2); });
  std::shared_ptr<Pending> a, b;
  {
    PolicyScope policy(InlinePolicy::Never);
    a = execute_async(first, nullptr, {}, [](RunResult) {});
  }
  ASSERT_NE(a, nullptr);
  while (!first_started.load()) std::this_thread::yield();
  {
    PolicyScope policy(InlinePolicy::Always);
    b = execute_async(second, nullptr, {}, [](RunResult) {});
  }
  EXPECT_NE(b, nullptr) << "ran inline while the lane was busy";
  release = true;
  b->wait();
  a->wait();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

// The measured rule: a plan runs inline only once its runs are known to take no longer than a
// hand-off. A plan that takes milliseconds is handed off on every call.
TEST(Executor, TheMeasuredRuleHandsOffSlowPlans) {
  RunningNs avg;
  EXPECT_LT(avg.get(), 0);
  avg.add(800);
  EXPECT_EQ(avg.get(), 800);
  for (int i = 0; i < 100; ++i) avg.add(1600);
  EXPECT_NEAR(avg.get(), 1600, 10);
  PolicyScope policy(InlinePolicy::Measured);
  Stream s = new_stream(device("reference"));
  Plan slow = one_host_task(s, [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  for (int i = 0; i < 3; ++i) {
    auto work = execute_async(slow, nullptr, {}, [](RunResult) {});
    EXPECT_NE(work, nullptr) << "call " << i << " ran inline";
    if (work) work->wait();
  }
}
