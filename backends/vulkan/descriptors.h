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

// Whether every buffer the backend makes (at most 2 GiB) fits in one texel-buffer view of the
// device: then buffers are created with the uniform-texel usage, so that any may be read as a
// texel buffer whatever the setting below was when it was made (the buffer pool reuses them).
bool texel_views_fit(const PhysicalInfo& info);
// Whether contiguous inputs of element-wise kernels are read through texel buffers
// (ShaderFeatures::texel_loads): by default on a CPU device (lavapipe, where it measured faster)
// whose views fit; KILN_VULKAN_TEXEL_LOADS=0/1 overrides (tests run both forms).
bool use_texel_loads(const PhysicalInfo& info);

// One descriptor set of storage buffers (and of uniform texel buffers, RGBA32UI views of whole
// buffers that the set owns, at the bindings `texel` marks), in a pool of its own. Small pools are
// recycled per device (creating one is a good part of a launch's host time); larger ones are
// destroyed.
class DescriptorSet {
 public:
  DescriptorSet(std::shared_ptr<Context> ctx, VkDescriptorSetLayout layout,
                const std::vector<VkBuffer>& buffers, const std::vector<bool>& texel = {});
  ~DescriptorSet();
  DescriptorSet(const DescriptorSet&) = delete;
  DescriptorSet& operator=(const DescriptorSet&) = delete;
  VkDescriptorSet handle() const { return set_; }

 private:
  std::shared_ptr<Context> ctx_;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  bool recycle_ = false;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
  std::vector<VkBufferView> views_;
};

// The sets of one pipeline, the most recently used `capacity` kept.
class DescriptorCache {
 public:
  static constexpr size_t kCapacity = 16;

  // The set binding `buffers` (whose allocation ids are `ids`) with `layout`.
  std::shared_ptr<const DescriptorSet> get(const std::shared_ptr<Context>& ctx,
                                           VkDescriptorSetLayout layout,
                                           const std::vector<VkBuffer>& buffers,
                                           const std::vector<uint64_t>& ids,
                                           const std::vector<bool>& texel = {});

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
