// Calls coalesced into batches on a vulkan lane (backends/vulkan/lane.h): a lone call is
// submitted at once; calls behind two in-flight submissions share one submission; a wait on a
// held call's event submits its batch, as does a device-side wait on it from another lane; a
// call that waits for other work starts a new batch; everything runs in order; and a batch that
// cannot be submitted fails its own calls and leaves the queue usable. A shut
// "gate" (a timeline value only the test signals) keeps the first submission from running, so
// what is held does not depend on timing.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <vector>

#include "backends/vulkan/lane.h"
#include "backends/vulkan/vk_context.h"
#include "kernel_diff.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

using namespace kdiff;
using Stats = vulkan::Lane::Stats;

class VulkanBatches : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::backend_available("vulkan")) GTEST_SKIP() << "no usable vulkan";
    ctx_ = vulkan::context(0);
    gate_ = ctx_->new_timeline();
    gate_event_ = std::make_shared<vulkan::GpuEvent>();
    gate_event_->set_timeline(ctx_.get(), gate_, 1, nullptr);
    std::vector<float> init(kN);
    for (int64_t i = 0; i < kN; ++i) init[i] = static_cast<float>(i % 100);
    a_ = be().allocate(0, kN * 4), b_ = be().allocate(0, kN * 4);
    a_->write(init.data(), 0, kN * 4);
    kernel_ = be().compile(0, plus_one(kN));
    q1_ = be().create_queue(0), q2_ = be().create_queue(0);
  }
  // The queues finish their work as they go: after the gate has opened, whatever failed.
  void TearDown() override {
    if (!ctx_) return;
    open_gate();
    q1_.reset(), q2_.reset();
    vkDeviceWaitIdle(ctx_->device());
    vkDestroySemaphore(ctx_->device(), gate_, nullptr);
  }

  static constexpr int64_t kN = 4099;  // not a multiple of any workgroup size
  static Backend& be() { return backend_for(device("vulkan")); }

  // Step i of the ping-pong a -> b -> a on `q`.
  EventPtr step(Queue& q, int i) {
    KernelArgs args;
    args.buffers =
        i % 2 ? std::vector<Buffer*>{b_.get(), a_.get()} : std::vector<Buffer*>{a_.get(), b_.get()};
    EventPtr ev = q.enqueue_kernel(*kernel_, args);
    EXPECT_TRUE(ev);
    return ev;
  }
  // Shuts the queue's next submission behind the gate, then records `n` steps: the first two
  // are submitted (the gated one and one more), the rest held in one batch.
  std::vector<EventPtr> gated_steps(Queue& q, int n) {
    EXPECT_TRUE(q.enqueue_wait({gate_event_}));
    std::vector<EventPtr> evs;
    for (int i = 0; i < n; ++i) evs.push_back(step(q, i));
    return evs;
  }
  void open_gate() {
    if (gate_open_) return;
    gate_open_ = true;
    VkSemaphoreSignalInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO, nullptr, gate_, 1};
    ASSERT_EQ(vkSignalSemaphore(ctx_->device(), &si), VK_SUCCESS);
  }
  // a after `steps` increments of the starting values (steps even: the result is in a).
  void expect_a_after(int steps) {
    std::vector<float> got(kN);
    a_->read(got.data(), 0, kN * 4);
    for (int64_t i = 0; i < kN; ++i)
      ASSERT_EQ(got[i], static_cast<float>(i % 100 + steps)) << "element " << i;
  }
  static Stats since(const Stats& s0) {
    Stats s = vulkan::Lane::stats();
    return {s.calls - s0.calls, s.submissions - s0.submissions};
  }

  std::shared_ptr<vulkan::Context> ctx_;
  VkSemaphore gate_ = VK_NULL_HANDLE;
  bool gate_open_ = false;
  std::shared_ptr<vulkan::GpuEvent> gate_event_;
  std::shared_ptr<Buffer> a_, b_;
  std::shared_ptr<const CompiledKernel> kernel_;
  std::unique_ptr<Queue> q1_, q2_;
};

TEST_F(VulkanBatches, ALoneCallIsSubmittedAtOnce) {
  Queue* q = q1_.get();
  Stats s0 = vulkan::Lane::stats();
  EventPtr ev = step(*q, 0);
  EXPECT_EQ(since(s0).calls, 1);
  EXPECT_EQ(since(s0).submissions, 1) << "an idle queue held a call back";
  ev->wait();
  step(*q, 1)->wait();
  expect_a_after(2);
}

TEST_F(VulkanBatches, CallsBehindBusyWorkShareOneSubmissionAndAWaitSubmitsThem) {
  Queue* q = q1_.get();
  Stats s0 = vulkan::Lane::stats();
  std::vector<EventPtr> evs = gated_steps(*q, 40);
  EXPECT_EQ(since(s0).calls, 40);
  EXPECT_EQ(since(s0).submissions, 2) << "38 calls behind two submissions should share one batch";
  // A host wait on a held call submits its batch, then waits (here, for the gate).
  auto waited = std::async(std::launch::async, [ev = evs[20]] { ev->wait(); });
  EXPECT_EQ(waited.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "a call behind the shut gate completed";
  EXPECT_EQ(since(s0).submissions, 3) << "waiting on a held call did not submit its batch";
  open_gate();
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a wait on a batched call did not return";
  evs.back()->wait();
  q->finish();
  expect_a_after(40);
}

TEST_F(VulkanBatches, HeldCallsAreSubmittedWhenInFlightWorkCompletes) {
  Queue* q = q1_.get();
  Stats s0 = vulkan::Lane::stats();
  std::vector<EventPtr> evs = gated_steps(*q, 12);
  EXPECT_EQ(since(s0).submissions, 2);
  open_gate();
  // No one asks: the completion thread submits the batch when the work before it completes.
  auto last = evs.back();
  bool done = false;
  for (int i = 0; i < 3000 && !done; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    done = std::static_pointer_cast<vulkan::GpuEvent>(last)->completed();
  }
  ASSERT_TRUE(done) << "a held batch was never submitted";
  EXPECT_EQ(since(s0).submissions, 3);
  q->finish();
  expect_a_after(12);
}

// A call that waits for another lane's work starts a new batch (the calls before it do not wait
// too), and that lane's held producer is submitted first: submitted work never waits for work
// that is not on the queue.
TEST_F(VulkanBatches, DeviceWaitsSubmitTheProducerAndStartANewBatch) {
  Queue *q1 = q1_.get(), *q2 = q2_.get();
  Stats s0 = vulkan::Lane::stats();
  std::vector<EventPtr> evs = gated_steps(*q1, 6);  // two submitted, four held
  EXPECT_EQ(since(s0).submissions, 2);
  auto c = be().allocate(0, kN * 4);
  KernelArgs other;  // on the second lane, reading what the first lane's last step wrote
  other.buffers = {a_.get(), c.get()};
  ASSERT_TRUE(q2->enqueue_wait({evs.back()}));
  EXPECT_EQ(since(s0).submissions, 3) << "a device-side wait left its producer held";
  EventPtr read = q2->enqueue_kernel(*kernel_, other);
  EXPECT_EQ(since(s0).submissions, 4);
  ASSERT_TRUE(q1->enqueue_wait({read}));  // q1 waits for q2 (write after read), then goes on
  EventPtr more = step(*q1, 6);
  EventPtr more2 = step(*q1, 7);
  open_gate();
  more2->wait();
  q1->finish();
  q2->finish();
  expect_a_after(8);
  std::vector<float> got(kN);
  c->read(got.data(), 0, kN * 4);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(got[i], static_cast<float>(i % 100 + 7));
}

TEST_F(VulkanBatches, FinishSubmitsAndWaitsForHeldCalls) {
  Queue* q = q1_.get();
  gated_steps(*q, 10);
  auto finished = std::async(std::launch::async, [q] { q->finish(); });
  EXPECT_EQ(finished.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout);
  open_gate();
  ASSERT_EQ(finished.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  expect_a_after(10);
}

// vkQueueSubmit failing for a held batch (a test hook makes it): its calls fail with the error
// (delivered in submission order, after the calls before them), the calls before it complete,
// and the lane's timeline does not wait for the value the batch would have signalled, so the
// next calls on the same queue run.
TEST_F(VulkanBatches, ABatchThatCannotBeSubmittedFailsItsCallsAndTheQueueGoesOn) {
  Queue* q = q1_.get();
  Stats s0 = vulkan::Lane::stats();
  std::vector<EventPtr> evs = gated_steps(*q, 12);  // two submitted, ten held
  ASSERT_EQ(since(s0).submissions, 2);
  vulkan::fail_nth_submission(1);
  open_gate();  // the held batch is submitted when the work before it completes, or waited for
  try {
    evs[5]->wait();
    ADD_FAILURE() << "a call of a batch that was never submitted completed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vkQueueSubmit"), std::string::npos) << e.what();
  }
  vulkan::fail_nth_submission(0);
  for (int i = 2; i < 12; ++i) EXPECT_THROW(evs[i]->wait(), Error) << "held call " << i;
  evs[0]->wait();
  evs[1]->wait();
  EXPECT_EQ(since(s0).submissions, 2) << "the failed batch counted as submitted";
  EventPtr more = step(*q, 2), more2 = step(*q, 3);
  auto done = std::async(std::launch::async, [more2] { more2->wait(); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "a call after the failed batch waits for the value it never signalled";
  done.get();
  q->finish();
  expect_a_after(4);  // steps 0 and 1, then 2 and 3 again: the failed ten never ran
}

}  // namespace
}  // namespace kiln
