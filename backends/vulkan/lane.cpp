#include "backends/vulkan/lane.h"

#include <algorithm>
#include <atomic>
#include <exception>

namespace kiln::vulkan {

namespace {
std::atomic<int64_t> g_calls{0}, g_submissions{0};
}  // namespace

Lane::Stats Lane::stats() { return {g_calls.load(), g_submissions.load()}; }

void full_barrier(VkCommandBuffer cb) {
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask =
      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                     VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                     VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                       0, nullptr, 0, nullptr);
}

Lane::Lane(std::shared_ptr<Context> c) : ctx(std::move(c)) {
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.queueFamilyIndex = ctx->info().queue_family;
  check(vkCreateCommandPool(ctx->device(), &pi, nullptr, &pool_), "vkCreateCommandPool");
  timeline_ = ctx->new_timeline();
}

// No batch is open here: an open batch's events hold the lane until it has been submitted.
Lane::~Lane() {
  vkDestroySemaphore(ctx->device(), timeline_, nullptr);
  vkDestroyCommandPool(ctx->device(), pool_, nullptr);
}

VkCommandBuffer Lane::begin_call() {
  // A batch waits only for its first call's producers: a call that waits for other work (a cpu
  // task's signal, another lane) starts a new one, so the calls before it do not wait too.
  if (open_ && !waits.empty()) submit_open();
  if (!open_) open_batch();
  host_waits.clear();
  full_barrier(open_->cb);
  return open_->cb;
}

void Lane::open_batch() {
  Batch b;
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = pool_;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  check(vkAllocateCommandBuffers(ctx->device(), &ai, &b.cb), "vkAllocateCommandBuffers");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VkResult r = vkBeginCommandBuffer(b.cb, &bi);
  if (r != VK_SUCCESS) {
    vkFreeCommandBuffers(ctx->device(), pool_, 1, &b.cb);
    check(r, "vkBeginCommandBuffer");
  }
  b.value = ++value_;
  b.waits.swap(waits);
  open_ = std::move(b);
}

std::shared_ptr<GpuEvent> Lane::end_call(std::shared_ptr<void> keep) {
  auto ev = std::make_shared<GpuEvent>();
  ev->set_timeline(ctx.get(), timeline_, open_->value, shared_from_this());
  ev->set_submitter(weak_from_this());
  open_->events.push_back(ev);
  open_->keep.push_back(std::move(keep));
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (submitted_ - completed_ < kInFlight ||
      open_->events.size() >= static_cast<size_t>(kBatchCalls))
    submit_open();
  return ev;
}

void Lane::submit_through(uint64_t value) {
  std::lock_guard<std::mutex> lock(mu);
  if (open_ && open_->value <= value) submit_open();
}

uint64_t Lane::flush() {
  std::lock_guard<std::mutex> lock(mu);
  if (open_) submit_open();
  return submitted_;
}

// After the lane's previous value and the first call's producers on other lanes. A batch that
// cannot be submitted fails its calls (on the completion thread: their callbacks must not run
// under `mu`) and gives its value back, so the lane's next batch does not wait for it.
void Lane::submit_open() {
  Batch b = std::move(*open_);
  open_.reset();
  try {
    full_barrier(b.cb);
    check(vkEndCommandBuffer(b.cb), "vkEndCommandBuffer");
    std::vector<VkSemaphore> sems = {timeline_};
    std::vector<uint64_t> values = {b.value - 1};
    for (const Wait& w : b.waits) {
      sems.push_back(w.sem);
      values.push_back(w.value);
    }
    VkTimelineSemaphoreSubmitInfo ti{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
    ti.waitSemaphoreValueCount = static_cast<uint32_t>(values.size());
    ti.pWaitSemaphoreValues = values.data();
    ti.signalSemaphoreValueCount = 1;
    ti.pSignalSemaphoreValues = &b.value;
    std::vector<VkPipelineStageFlags> stages(sems.size(), VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.pNext = &ti;
    si.waitSemaphoreCount = static_cast<uint32_t>(sems.size());
    si.pWaitSemaphores = sems.data();
    si.pWaitDstStageMask = stages.data();
    si.commandBufferCount = 1;
    si.pCommandBuffers = &b.cb;
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &timeline_;
    ctx->submit(si);
  } catch (...) {
    vkFreeCommandBuffers(ctx->device(), pool_, 1, &b.cb);
    value_ = b.value - 1;  // the open batch held the newest value
    for (Wait& w : b.waits) b.keep.push_back(std::move(w.keep));
    ctx->fail(std::move(b.events), std::current_exception(),
              [keep = std::move(b.keep)]() mutable { keep.clear(); });
    return;
  }
  submitted_ = b.value;
  g_submissions.fetch_add(1, std::memory_order_relaxed);
  for (Wait& w : b.waits) b.keep.push_back(std::move(w.keep));
  ctx->watch(
      timeline_, b.value, std::move(b.events),
      [self = shared_from_this(), cb = b.cb, keep = std::move(b.keep), value = b.value]() mutable {
        keep.clear();  // resources lock `mu` as they go
        self->completed(value, cb);
      });
}

// On the completion thread: the batch's command buffer goes back to the pool, and the open
// batch is submitted if the queue now holds too little.
void Lane::completed(uint64_t value, VkCommandBuffer cb) {
  std::lock_guard<std::mutex> lock(mu);
  vkFreeCommandBuffers(ctx->device(), pool_, 1, &cb);
  completed_ = std::max(completed_, value);
  if (open_ && submitted_ - completed_ < kInFlight) submit_open();
}

}  // namespace kiln::vulkan
