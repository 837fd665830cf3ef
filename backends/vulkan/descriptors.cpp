#include "backends/vulkan/descriptors.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>

namespace kiln::vulkan {

namespace {

// Pools of this many storage-buffer descriptors (one set each) are recycled.
constexpr uint32_t kPoolDescriptors = 32;

struct FreePools {
  std::mutex mu;
  std::map<const Context*, std::vector<VkDescriptorPool>> pools;  // reset, ready for a set
};
FreePools& free_pools() {
  static auto& f = *new FreePools;  // contexts live until exit; so do their pools
  return f;
}

std::atomic<int64_t> hits{0}, misses{0};

bool is_texel(const std::vector<bool>& texel, size_t i) { return i < texel.size() && texel[i]; }

}  // namespace

bool texel_views_fit(const PhysicalInfo& info) {
  return info.max_texel_elements * 16 >= uint64_t{1} << 31;
}

bool use_texel_loads(const PhysicalInfo& info) {
  if (!texel_views_fit(info)) return false;
  if (const char* t = std::getenv("KILN_VULKAN_TEXEL_LOADS"); t && *t)
    return std::strcmp(t, "0") != 0;
  return info.cpu;
}

DescriptorSet::DescriptorSet(std::shared_ptr<Context> ctx, VkDescriptorSetLayout layout,
                             const std::vector<VkBuffer>& buffers, const std::vector<bool>& texel)
    : ctx_(std::move(ctx)) {
  VkDevice d = ctx_->device();
  uint32_t n = static_cast<uint32_t>(buffers.size());
  for (uint32_t i = 0; i < n; ++i) {
    if (!is_texel(texel, i)) continue;
    VkBufferViewCreateInfo vi{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
    vi.buffer = buffers[i];
    vi.format = VK_FORMAT_R32G32B32A32_UINT;  // uniform-texel support is required of every device
    vi.range = VK_WHOLE_SIZE;  // buffers are whole 16-byte words (Allocation::capacity_for)
    VkBufferView v = VK_NULL_HANDLE;
    if (VkResult r = vkCreateBufferView(d, &vi, nullptr, &v); r != VK_SUCCESS) {
      for (VkBufferView made : views_) vkDestroyBufferView(d, made, nullptr);
      check(r, "vkCreateBufferView");
    }
    views_.push_back(v);
  }
  recycle_ = n <= kPoolDescriptors;
  if (recycle_) {
    FreePools& f = free_pools();
    std::lock_guard<std::mutex> lock(f.mu);
    auto& list = f.pools[ctx_.get()];
    if (!list.empty()) {
      pool_ = list.back();
      list.pop_back();
    }
  }
  if (!pool_) {
    uint32_t count = recycle_ ? kPoolDescriptors : n;  // of either type
    VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, count},
                                     {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, count}};
    VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pi.maxSets = 1;
    pi.poolSizeCount = 2;
    pi.pPoolSizes = sizes;
    if (VkResult r = vkCreateDescriptorPool(d, &pi, nullptr, &pool_); r != VK_SUCCESS) {
      for (VkBufferView v : views_) vkDestroyBufferView(d, v, nullptr);
      check(r, "vkCreateDescriptorPool");
    }
  }
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = pool_;
  ai.descriptorSetCount = 1;
  ai.pSetLayouts = &layout;
  if (VkResult r = vkAllocateDescriptorSets(d, &ai, &set_); r != VK_SUCCESS) {
    vkDestroyDescriptorPool(d, pool_, nullptr);
    for (VkBufferView v : views_) vkDestroyBufferView(d, v, nullptr);
    check(r, "vkAllocateDescriptorSets");
  }
  std::vector<VkDescriptorBufferInfo> infos(n);
  std::vector<VkWriteDescriptorSet> writes(n);
  size_t view = 0;
  for (uint32_t i = 0; i < n; ++i) {
    infos[i] = {buffers[i], 0, VK_WHOLE_SIZE};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set_;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    if (is_texel(texel, i)) {
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
      writes[i].pTexelBufferView = &views_[view++];
    } else {
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
  }
  vkUpdateDescriptorSets(d, n, writes.data(), 0, nullptr);
}

DescriptorSet::~DescriptorSet() {
  VkDevice d = ctx_->device();
  for (VkBufferView v : views_) vkDestroyBufferView(d, v, nullptr);
  if (!recycle_) {
    vkDestroyDescriptorPool(d, pool_, nullptr);
    return;
  }
  vkResetDescriptorPool(d, pool_, 0);
  FreePools& f = free_pools();
  std::lock_guard<std::mutex> lock(f.mu);
  f.pools[ctx_.get()].push_back(pool_);
}

std::shared_ptr<const DescriptorSet> DescriptorCache::get(const std::shared_ptr<Context>& ctx,
                                                          VkDescriptorSetLayout layout,
                                                          const std::vector<VkBuffer>& buffers,
                                                          const std::vector<uint64_t>& ids,
                                                          const std::vector<bool>& texel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = sets_.begin(); it != sets_.end(); ++it)
      if (it->first == ids) {
        sets_.splice(sets_.begin(), sets_, it);  // most recently used first
        ++hits;
        return sets_.front().second;
      }
  }
  ++misses;
  auto set = std::make_shared<const DescriptorSet>(ctx, layout, buffers, texel);
  std::shared_ptr<const DescriptorSet> evicted;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  sets_.emplace_front(ids, set);
  if (sets_.size() > kCapacity) {
    evicted = std::move(sets_.back().second);
    sets_.pop_back();
  }
  return set;
}

DescriptorCache::Stats DescriptorCache::stats() { return {hits.load(), misses.load()}; }

}  // namespace kiln::vulkan
