// Jobs: every state (queued, running, succeeded, failed, cancelled queued and running, deadline
// queued and running), FIFO lanes, priorities between lanes, back-pressure, lanes on different
// devices running at once, and a reduced soak of thousands of jobs from eight threads.
#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "test_util.h"

using namespace kiln;
using namespace std::chrono_literals;
using kiln::test::expect_error;

namespace {

// A gate jobs wait at until the test opens it (a job that holds a worker or a lane).
struct Gate {
  std::promise<void> opened;
  std::shared_future<void> wait_for_open = opened.get_future().share();
  std::atomic<int> arrived{0};
  void open() { opened.set_value(); }
  // A job that records its arrival, waits for the gate, and returns its input.
  Fn job() {
    return [this](const std::vector<Array>& in) {
      ++arrived;
      wait_for_open.wait();
      return in;
    };
  }
  void await_arrivals(int n) const {
    while (arrived.load() < n) std::this_thread::sleep_for(1ms);
  }
};

Array vec(std::vector<float> v) { return array(v, {static_cast<int64_t>(v.size())}); }

CompiledFunction affine() {
  return compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 2.0f + 1.0f}; });
}

}  // namespace

TEST(Jobs, SubmitRunsTheFunctionAndKeepsItsOutputs) {
  Scheduler sched;
  Job j = sched.submit(affine(), {vec({1, 2, 3})}, {.name = "affine"});
  j.wait();
  EXPECT_EQ(j.status(), JobStatus::Succeeded);
  EXPECT_EQ(j.outputs()[0].to_vector<float>(), (std::vector<float>{3, 5, 7}));
  EXPECT_EQ(j.name(), "affine");
  EXPECT_FALSE(j.error());
  JobTimes t = j.times();
  EXPECT_LE(t.submitted, t.started);
  EXPECT_LE(t.started, t.finished);
  EXPECT_FALSE(j.cancel());  // already ended
}

TEST(Jobs, InputsAreHeldAliveByTheJob) {
  Scheduler sched({.workers = 1});
  Gate gate;
  Job blocker = sched.submit(gate.job(), {});
  std::optional<Job> j;
  {
    Array x = vec({4, 5});  // the caller's last reference goes away before the job runs
    j = sched.submit(affine(), {x});
  }
  gate.open();
  EXPECT_EQ(j->outputs()[0].to_vector<float>(), (std::vector<float>{9, 11}));
}

TEST(Jobs, AFailingJobFailsAloneAndItsLaneGoesOn) {
  Scheduler sched;
  Stream lane = new_stream(device("cpu"));
  Job bad = sched.submit(
      [](const std::vector<Array>& in) {
        return std::vector<Array>{matmul(in[0], vec({1, 2}))};
      },
      {vec({1, 2, 3})}, {.stream = lane, .name = "bad"});
  Job good = sched.submit(affine(), {vec({1})}, {.stream = lane});
  EXPECT_EQ(good.outputs()[0].to_vector<float>(), (std::vector<float>{3}));
  bad.wait();
  EXPECT_EQ(bad.status(), JobStatus::Failed);
  ASSERT_TRUE(bad.error());
  expect_error([&] { bad.outputs(); }, {"job 'bad'", "has no outputs", "failed", "matmul"});
}

TEST(Jobs, JobsOnOneLaneStartInSubmissionOrder) {
  Scheduler sched({.workers = 2});
  Stream lane = new_stream(device("cpu"));
  std::mutex mu;
  std::vector<int> order;
  std::vector<Job> jobs;
  for (int i = 0; i < 64; ++i)
    jobs.push_back(sched.submit(
        [&, i](const std::vector<Array>& in) {
          {
            std::lock_guard<std::mutex> lk(mu);
            order.push_back(i);
          }
          return std::vector<Array>{in[0] + float(i)};
        },
        {vec({0})}, {.stream = lane}));
  sched.wait_all();
  ASSERT_EQ(order.size(), 64u);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(order[i], i);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(jobs[i].outputs()[0].item<float>(), float(i));
}

TEST(Jobs, PriorityChoosesBetweenLanes) {
  Scheduler sched({.workers = 1});
  Gate gate;
  Job blocker = sched.submit(gate.job(), {}, {.stream = new_stream(device("cpu"))});
  gate.await_arrivals(1);  // the only worker is busy: the next jobs queue up
  std::mutex mu;
  std::vector<std::string> ran;
  auto record = [&](std::string name) {
    return [&, name](const std::vector<Array>&) {
      std::lock_guard<std::mutex> lk(mu);
      ran.push_back(name);
      return std::vector<Array>{};
    };
  };
  sched.submit(record("low"), {}, {.stream = new_stream(device("cpu")), .priority = 0});
  sched.submit(record("high"), {}, {.stream = new_stream(device("cpu")), .priority = 5});
  sched.submit(record("middle"), {}, {.stream = new_stream(device("cpu")), .priority = 1});
  gate.open();
  sched.wait_all();
  EXPECT_EQ(ran, (std::vector<std::string>{"high", "middle", "low"}));
}

TEST(Jobs, CancellingAQueuedJobIsImmediate) {
  Scheduler sched({.workers = 1});
  Gate gate;
  Job blocker = sched.submit(gate.job(), {});
  gate.await_arrivals(1);
  bool ran = false;
  Job j = sched.submit(
      [&](const std::vector<Array>& in) {
        ran = true;
        return in;
      },
      {}, {.name = "victim"});
  EXPECT_TRUE(j.cancel());
  EXPECT_EQ(j.status(), JobStatus::Cancelled);  // before the worker is free again
  EXPECT_TRUE(j.done());
  EXPECT_EQ(sched.queued(), 0u);
  EXPECT_FALSE(j.cancel());
  expect_error([&] { j.outputs(); }, {"job 'victim'", "cancelled before it started"});
  gate.open();
  sched.wait_all();
  EXPECT_FALSE(ran);
  EXPECT_EQ(blocker.status(), JobStatus::Succeeded);
}

TEST(Jobs, CancellingARunningJobStopsAtTheNextTaskBoundary) {
  Scheduler sched;
  Gate gate;
  std::atomic<bool> first_done{false};
  Job j = sched.submit(
      [&](const std::vector<Array>& in) {
        Array a = in[0] + 1.0f;
        eval(a);  // finishes before the cancel
        first_done = true;
        ++gate.arrived;
        gate.wait_for_open.wait();
        return std::vector<Array>{exp(a) * 2.0f};  // evaluated after the cancel: stopped
      },
      {vec({1, 2})}, {.name = "long"});
  gate.await_arrivals(1);
  EXPECT_TRUE(j.cancel());
  EXPECT_EQ(j.status(), JobStatus::Running);  // it stops at its next task, not now
  gate.open();
  j.wait();
  EXPECT_TRUE(first_done);
  EXPECT_EQ(j.status(), JobStatus::Cancelled);
  expect_error([&] { j.outputs(); }, {"job 'long'", "cancelled"});
  // Nothing else is affected: the scheduler and the streams keep working.
  EXPECT_EQ(sched.submit(affine(), {vec({2})}).outputs()[0].item<float>(), 5.0f);
}

TEST(Jobs, ADeadlinePassingWhileQueuedEndsTheJobAtOnce) {
  Scheduler sched({.workers = 1});
  Gate gate;
  Job blocker = sched.submit(gate.job(), {});
  gate.await_arrivals(1);
  Job j = sched.submit(affine(), {vec({1})},
                       {.name = "late", .deadline = std::chrono::steady_clock::now() + 20ms});
  // The only worker is held by the blocker; the deadline still ends the job.
  EXPECT_TRUE(j.wait_for(10s));
  EXPECT_EQ(j.status(), JobStatus::DeadlineExceeded);
  expect_error([&] { j.outputs(); }, {"job 'late'", "deadline", "queued"});
  gate.open();
  sched.wait_all();
}

TEST(Jobs, ADeadlinePassingWhileRunningStopsTheJob) {
  Scheduler sched;
  Gate gate;
  auto deadline = std::chrono::steady_clock::now() + 1s;
  Job j = sched.submit(
      [&](const std::vector<Array>& in) {
        ++gate.arrived;
        gate.wait_for_open.wait();  // the test opens it once the deadline has passed
        return std::vector<Array>{in[0] + 1.0f};
      },
      {vec({1})}, {.name = "slow", .deadline = deadline});
  gate.await_arrivals(1);  // running before its deadline
  std::this_thread::sleep_until(deadline + 20ms);
  gate.open();  // the kernels it asks for now start after the deadline
  j.wait();
  EXPECT_EQ(j.status(), JobStatus::DeadlineExceeded);
  expect_error([&] { j.outputs(); }, {"job 'slow'", "deadline", "running"});
}

TEST(Jobs, AFullQueuePushesBack) {
  Scheduler sched({.workers = 1, .capacity = 2});
  Gate gate;
  Job blocker = sched.submit(gate.job(), {});
  gate.await_arrivals(1);
  sched.submit(affine(), {vec({1})});
  sched.submit(affine(), {vec({2})});
  EXPECT_EQ(sched.queued(), 2u);
  EXPECT_FALSE(sched.try_submit(affine(), {vec({3})}).has_value());
  std::atomic<bool> returned{false};
  std::optional<Job> late;
  std::thread producer([&] {
    late = sched.submit(affine(), {vec({4})});
    returned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(returned);  // cannot return: the queue has no room until the blocker ends
  gate.open();
  producer.join();
  EXPECT_EQ(late->outputs()[0].item<float>(), 9.0f);
}

TEST(Jobs, LanesOnDifferentDevicesRunAtTheSameTime) {
  Scheduler sched({.workers = 2});
  Gate gate;
  Job a = sched.submit(gate.job(), {}, {.stream = default_stream(device("cpu"))});
  Job b = sched.submit(gate.job(), {}, {.stream = default_stream(device("reference"))});
  gate.await_arrivals(2);  // both started although neither has finished
  gate.open();
  sched.wait_all();
  EXPECT_EQ(a.status(), JobStatus::Succeeded);
  EXPECT_EQ(b.status(), JobStatus::Succeeded);
}

TEST(Jobs, DestroyingTheSchedulerFinishesItsJobs) {
  std::vector<Job> jobs;
  {
    Scheduler sched({.workers = 1});
    for (int i = 0; i < 20; ++i) jobs.push_back(sched.submit(affine(), {vec({float(i)})}));
  }
  for (int i = 0; i < 20; ++i) EXPECT_EQ(jobs[i].outputs()[0].item<float>(), 2.0f * i + 1);
}

TEST(Jobs, BadOptionsAndFunctionsRaise) {
  expect_error([] { Scheduler s({.workers = -1}); }, {"workers", "-1"});
  expect_error([] { Scheduler s({.capacity = 0}); }, {"capacity"});
  Scheduler sched;
  expect_error([&] { sched.submit(Fn{}, {}); }, {"empty"});
  expect_error(
      [&] {
        sched.submit(affine(), {}, {.stream = Stream{0, Device{"nosuch", 0}}});
      },
      {"nosuch"});
  // Inputs the function cannot take fail the job, not the scheduler.
  CompiledFunction add =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] + in[1]}; });
  Job j = sched.submit(add, {vec({1, 2}), vec({1, 2, 3})});
  j.wait();
  EXPECT_EQ(j.status(), JobStatus::Failed);
  expect_error([&] { j.outputs(); }, {"has no outputs", "broadcast"});
}

// A job's function may wait for another job. A wait that could never end raises instead of
// hanging, and a waiting job does not keep the job it waits for from a worker.
TEST(Jobs, WaitingForAJobQueuedBehindOnTheSameStreamRaises) {
  Scheduler sched({.workers = 2});
  Stream lane = new_stream(device("cpu"));
  std::promise<Job> later;
  std::shared_future<Job> later_job = later.get_future().share();
  Job first = sched.submit(
      [&](const std::vector<Array>& in) {
        later_job.get().wait();  // queued behind this job: would never start
        return in;
      },
      {vec({1})}, {.stream = lane, .name = "first"});
  Job second = sched.submit(affine(), {vec({1})}, {.stream = lane, .name = "second"});
  later.set_value(second);
  first.wait();
  EXPECT_EQ(first.status(), JobStatus::Failed);
  expect_error([&] { first.outputs(); },
               {"job 'first'", "waits for job 'second'", "cannot end before it",
                "job 'second' #1 is queued on", "behind job 'first' #0", "another stream"});
  EXPECT_EQ(second.outputs()[0].item<float>(), 3.0f);  // the lane goes on
}

TEST(Jobs, ACycleOfWaitsThroughTwoStreamsRaisesInOneJob) {
  Scheduler sched({.workers = 2});
  Stream s1 = new_stream(device("cpu")), s2 = new_stream(device("cpu"));
  std::promise<std::vector<Job>> handles;
  std::shared_future<std::vector<Job>> jobs = handles.get_future().share();
  auto wait_for = [&](int which) {
    return [&, which](const std::vector<Array>& in) {
      jobs.get()[which].wait();
      return in;
    };
  };
  // a waits for b; b waits for c, which is queued behind a on s1.
  Job a = sched.submit(wait_for(1), {vec({1})}, {.stream = s1, .name = "a"});
  Job b = sched.submit(wait_for(2), {vec({2})}, {.stream = s2, .name = "b"});
  Job c = sched.submit(affine(), {vec({3})}, {.stream = s1, .name = "c"});
  handles.set_value({a, b, c});
  sched.wait_all();
  // Whichever of a and b waits second closes the cycle and fails; the other then finishes.
  EXPECT_NE(a.status() == JobStatus::Failed, b.status() == JobStatus::Failed);
  const Job& failed = a.status() == JobStatus::Failed ? a : b;
  expect_error([&] { failed.outputs(); }, {"cannot end before it", "queued on"});
  EXPECT_EQ(c.outputs()[0].item<float>(), 7.0f);
}

TEST(Jobs, AJobWaitingForAnotherDoesNotHoldTheOnlyWorker) {
  Scheduler sched({.workers = 1});
  Stream s1 = new_stream(device("cpu")), s2 = new_stream(device("cpu"));
  std::promise<Job> inner;
  std::shared_future<Job> inner_job = inner.get_future().share();
  Job outer = sched.submit([&](const std::vector<Array>&) { return inner_job.get().outputs(); }, {},
                           {.stream = s1, .name = "outer"});
  inner.set_value(sched.submit(affine(), {vec({4})}, {.stream = s2, .name = "inner"}));
  EXPECT_EQ(outer.outputs()[0].item<float>(), 9.0f);
  EXPECT_EQ(sched.workers(), 1);  // as asked; the extra thread served the wait
}

TEST(Jobs, AJobWaitingForItselfRaises) {
  Scheduler sched({.workers = 1});
  std::promise<Job> self;
  std::shared_future<Job> self_job = self.get_future().share();
  Job j = sched.submit(
      [&](const std::vector<Array>& in) {
        self_job.get().wait();
        return in;
      },
      {vec({1})}, {.name = "selfish"});
  self.set_value(j);
  j.wait();
  expect_error([&] { j.outputs(); }, {"job 'selfish'", "waits for itself"});
}

// The reduced soak: 8 submitting threads, 4 lanes on two devices, 4,000 jobs with failing,
// cancelled and overdue jobs mixed in. None is lost or run twice, each lane runs its jobs in
// submission order, and every successful job's output is its own sequence number's.
TEST(Jobs, SoakManyJobsFromManyThreads) {
  const int threads = 8, per_thread = 500;
  Scheduler sched({.workers = 2, .capacity = 256});
  std::vector<Stream> lanes = {default_stream(device("cpu")), new_stream(device("cpu")),
                               default_stream(device("reference")),
                               new_stream(device("reference"))};
  CompiledFunction f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 2.0f + in[1]}; });
  std::mutex mu;
  std::map<uint64_t, int> runs;                    // per job: times its function started
  std::map<int, std::vector<uint64_t>> lane_runs;  // per lane: sequence numbers as they ran
  std::vector<std::pair<Job, float>> all;          // job, its scalar input
  std::vector<std::thread> producers;
  for (int p = 0; p < threads; ++p)
    producers.emplace_back([&, p] {
      std::mt19937 rng(p);
      std::vector<std::pair<Job, float>> mine;
      for (int i = 0; i < per_thread; ++i) {
        int lane = static_cast<int>(rng() % lanes.size()), kind = static_cast<int>(rng() % 20);
        auto seq_box = std::make_shared<std::atomic<uint64_t>>(~0ull);
        Fn fn = [&, lane, kind, seq_box, f](const std::vector<Array>& in) {
          while (seq_box->load() == ~0ull) std::this_thread::yield();
          {
            std::lock_guard<std::mutex> lk(mu);
            ++runs[*seq_box];
            lane_runs[lane].push_back(*seq_box);
          }
          if (kind == 0) throw Error("planned failure");
          return f(in);
        };
        JobOptions o{.stream = lanes[lane]};
        if (kind == 1) o.deadline = std::chrono::steady_clock::now();  // already overdue
        float s = static_cast<float>(p * per_thread + i);
        Job j = sched.submit(fn, {vec({1, 2}), array(s)}, o);
        seq_box->store(j.sequence());
        if (kind == 2) j.cancel();
        mine.emplace_back(j, s);
      }
      std::lock_guard<std::mutex> lk(mu);
      all.insert(all.end(), mine.begin(), mine.end());
    });
  for (auto& t : producers) t.join();
  sched.wait_all();
  ASSERT_EQ(all.size(), size_t(threads * per_thread));
  std::map<JobStatus, int> count;
  for (auto& [j, s] : all) {
    ASSERT_TRUE(j.done());
    ++count[j.status()];
    auto it = runs.find(j.sequence());
    int ran = it == runs.end() ? 0 : it->second;
    EXPECT_LE(ran, 1) << "job #" << j.sequence() << " ran twice";
    if (j.status() == JobStatus::Succeeded) {
      EXPECT_EQ(ran, 1);
      EXPECT_EQ(j.outputs()[0].to_vector<float>(), (std::vector<float>{2.0f + s, 4.0f + s}));
    }
  }
  for (auto& [lane, seqs] : lane_runs)
    for (size_t i = 1; i < seqs.size(); ++i)
      ASSERT_LT(seqs[i - 1], seqs[i]) << "lane " << lane << " ran out of submission order";
  EXPECT_GT(count[JobStatus::Succeeded], threads * per_thread / 2);
  EXPECT_GT(count[JobStatus::Failed], 0);
  EXPECT_GT(count[JobStatus::Cancelled] + count[JobStatus::DeadlineExceeded], 0);
  EXPECT_EQ(count[JobStatus::Queued] + count[JobStatus::Running], 0);
}
