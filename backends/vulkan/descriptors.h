// Descriptor sets for launches. A kernel whose params travel as push constants binds only its
// own buffers, so one set serves every launch on the same buffers: sets are cached per pipeline,
// keyed by the buffers' allocation ids (a VkBuffer handle can come back for another buffer once
// its buffer is destroyed; an id never does). Sets are written once and never updated, so
// several pending command buffers may bind one; a launch holds its set until the GPU is done.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "backends/vulkan/vk_context.h"

namespace kiln::vulkan {

// One descriptor set of storage buffers, in a pool of its own. Small pools are recycled per
// device (creating one is a good part of a launch's host time); larger ones are destroyed.
class DescriptorSet {
 public:
  DescriptorSet(std::shared_ptr<Context> ctx, VkDescriptorSetLayout layout,
                const std::vector<VkBuffer>& buffers);
  ~DescriptorSet();
  DescriptorSet(const DescriptorSet&) = delete;
  DescriptorSet& operator=(const DescriptorSet&) = delete;
  VkDescriptorSet handle() const { return set_; }

 private:
  std::shared_ptr<Context> ctx_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  bool recycle_ = false;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
};

// The sets of one pipeline, the most recently used `capacity` kept.
class DescriptorCache {
 public:
  static constexpr size_t kCapacity = 16;

  // The set binding `buffers` (whose allocation ids are `ids`) with `layout`.
  std::shared_ptr<const DescriptorSet> get(const std::shared_ptr<Context>& ctx,
                                           VkDescriptorSetLayout layout,
                                           const std::vector<VkBuffer>& buffers,
                                           const std::vector<uint64_t>& ids);

  struct Stats {
    int64_t hits = 0, misses = 0;
  };
  // Over every cache in the process (tests and benchmarks).
  static Stats stats();

 private:
  std::mutex mu_;
  std::list<std::pair<std::vector<uint64_t>, std::shared_ptr<const DescriptorSet>>> sets_;
};

}  // namespace kiln::vulkan
