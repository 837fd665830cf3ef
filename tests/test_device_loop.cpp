// Loops x = f(x) on device streams, each call binding the previous call's output while it is in
// flight (executor.h, InFlightInput): the results equal the reference interpreter's on opencl
// and vulkan, for several dtypes and a size that crosses work-group boundaries, on one stream
// (the in-order queue orders the steps), alternating two streams of one device (waits on the
// device) and alternating a device stream with a cpu stream (waits on the host); a failed step
// fails the loop's result. How many calls a lane keeps in flight (Lane::bound_ahead) is checked
// on a queue of its own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/cancel.h"
#include "executor/lanes.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

constexpr int64_t kN = 1037;  // not a multiple of any work-group size

// One step over four dtypes: int32 stays small (remainder), uint8 wraps as NumPy's does.
std::vector<Array> step(const std::vector<Array>& in) {
  return {in[0] * 0.5f + 1.0f, (in[1] * 3 + 7) % 1009,
          astype(astype(in[2], float32) * 0.75f + 2.0f, bfloat16), in[3] * 5 + 3};
}

std::vector<Array> start(Device d) {
  Array i = arange(0, static_cast<double>(kN), 1, int32, d);
  std::vector<Array> x = {astype(i, float32) * 0.01f, i, astype(i % 50, bfloat16),
                          astype(i % 256, uint8)};
  eval(x);
  return x;
}

// `steps` calls of f, the stream of step i being streams[i % streams.size()].
std::vector<std::vector<double>> loop(const CompiledFunction& f, Device home,
                                      const std::vector<Stream>& streams, int steps) {
  std::vector<Array> x = start(home);
  for (int i = 0; i < steps; ++i) {
    StreamScope scope(streams[static_cast<size_t>(i) % streams.size()]);
    x = f(x);
  }
  std::vector<std::vector<double>> out;
  for (const Array& a : x) out.push_back(test::values(a));
  return out;
}

void expect_equal(const std::vector<std::vector<double>>& got,
                  const std::vector<std::vector<double>>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size());
    for (size_t i = 0; i < got[k].size(); ++i)
      ASSERT_NEAR(got[k][i], want[k][i], 1e-5 * (1 + std::abs(want[k][i])))
          << what << ": output " << k << " element " << i;
  }
}

class DeviceLoop : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!test::backend_available(GetParam())) GTEST_SKIP() << "no usable " << GetParam();
  }
};

TEST_P(DeviceLoop, EqualsTheReferenceOnOneStreamTwoStreamsAndWithCpu) {
  auto f = compile(step);
  const int steps = 60;
  Device ref = device("reference"), d = device(GetParam());
  auto want = loop(f, ref, {Stream{0, ref}}, steps);
  expect_equal(loop(f, d, {Stream{0, d}}, steps), want, "one stream");
  expect_equal(loop(f, d, {new_stream(d), new_stream(d)}, steps), want, "two streams");
  if (test::backend_available("cpu")) {
    Device cpu = device("cpu");
    expect_equal(loop(f, d, {new_stream(d), Stream{0, cpu}}, steps), want, "device and cpu");
  }
}

// A step that fails (cancelled here) among steps that the device runs in batches (the calls
// outrun lavapipe and PoCL): the error reaches the loop's result, raised by a later call that
// finds its input failed or by the final eval, whichever comes first; a later loop on the same
// stream is right.
TEST_P(DeviceLoop, AFailedStepReachesTheResult) {
  auto f = compile(step);
  Device ref = device("reference"), d = device(GetParam());
  Stream s = new_stream(d);
  auto token = std::make_shared<CancelToken>();
  token->cancel("step 17 cancelled by the test");
  test::expect_error(
      [&] {
        std::vector<Array> x = start(d);
        StreamScope scope(s);
        for (int i = 0; i < 200; ++i) {
          if (i == 17) {
            CancelScope cancel(token);
            x = f(x);
          } else {
            x = f(x);
          }
        }
        eval(x);
      },
      {"step 17 cancelled by the test"});
  expect_equal(loop(f, d, {s}, 200), loop(f, ref, {Stream{0, ref}}, 200), "after the failure");
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceLoop, testing::Values("opencl", "vulkan"));

// A queue that only states its bounds; the lane never enqueues on it here.
class BoundedQueue : public Queue {
 public:
  BoundedQueue(size_t calls, size_t bytes) : calls_(calls), bytes_(bytes) {}
  EventPtr enqueue_kernel(const CompiledKernel&, const KernelArgs&) override { return unused(); }
  EventPtr enqueue_copy(Buffer&, Buffer&, size_t) override { return unused(); }
  EventPtr enqueue_matmul(const MatmulArgs&) override { return unused(); }
  void finish() override {}
  bool runs_inline() const override { return false; }
  size_t calls_ahead() const override { return calls_; }
  size_t bytes_ahead() const override { return bytes_; }

 private:
  static EventPtr unused() { throw Error("BoundedQueue runs nothing"); }
  size_t calls_, bytes_;
};

// A submission in flight until the lane waits for it.
struct Call : Pending {
  bool waited = false;
  void wait() override { waited = true; }
};

std::vector<std::shared_ptr<Call>> calls(int n) {
  std::vector<std::shared_ptr<Call>> c;
  for (int i = 0; i < n; ++i) c.push_back(std::make_shared<Call>());
  return c;
}

std::vector<bool> waited(const std::vector<std::shared_ptr<Call>>& c) {
  std::vector<bool> w;
  for (const auto& call : c) w.push_back(call->waited);
  return w;
}

TEST(LaneBound, WaitsForTheOldestOnceTheOutputsInFlightExceedTheBytes) {
  Lane lane;
  lane.queue = std::make_unique<BoundedQueue>(0, 100);
  auto c = calls(5);
  lane.bound_ahead(c[0], 40);
  lane.bound_ahead(c[1], 40);  // 80 bytes in flight: within the bound
  EXPECT_EQ(waited(c), (std::vector<bool>{false, false, false, false, false}));
  lane.bound_ahead(c[2], 40);  // 120: the oldest is waited for, 80 left
  EXPECT_EQ(waited(c), (std::vector<bool>{true, false, false, false, false}));
  lane.bound_ahead(c[3], 500);  // larger than the bound alone: two calls stay in flight
  EXPECT_EQ(waited(c), (std::vector<bool>{true, true, false, false, false}));
  lane.bound_ahead(c[4], 0);  // 540 in flight in three calls: the oldest goes
  EXPECT_EQ(waited(c), (std::vector<bool>{true, true, true, false, false}));
}

TEST(LaneBound, CountsCallsAndBytesTogetherAndSkipsCompletedCalls) {
  Lane lane;
  lane.queue = std::make_unique<BoundedQueue>(2, 1000);
  auto c = calls(4);
  lane.bound_ahead(c[0], 10);
  lane.bound_ahead(c[1], 10);
  lane.bound_ahead(c[2], 10);  // three calls: over the count, within the bytes
  EXPECT_EQ(waited(c), (std::vector<bool>{true, false, false, false}));
  c[1].reset();  // completed and released: nothing to wait for
  lane.bound_ahead(c[3], 10);
  EXPECT_FALSE(c[2]->waited);
  EXPECT_FALSE(c[3]->waited);
}

TEST(LaneBound, NoBoundWaitsForNothing) {
  Lane lane;
  lane.queue = std::make_unique<BoundedQueue>(0, 0);
  auto c = calls(100);
  for (const auto& call : c) lane.bound_ahead(call, size_t{1} << 40);
  for (const auto& call : c) EXPECT_FALSE(call->waited);
}

}  // namespace
}  // namespace kiln
