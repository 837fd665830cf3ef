#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "backends/host_cache.h"
#include "backends/launch_check.h"
#include "backends/native.h"
#include "backends/native_kernels.h"
#include "backends/sort_passes.h"
#include "backends/split_reduce.h"
#include "backends/vulkan/descriptors.h"
#include "backends/vulkan/disk_cache.h"
#include "backends/vulkan/flatten.h"
#include "backends/vulkan/gather_shader.h"
#include "backends/vulkan/glsl_codegen.h"
#include "backends/vulkan/glsl_compiler.h"
#include "backends/vulkan/host_signal.h"
#include "backends/vulkan/lane.h"
#include "backends/vulkan/matmul_shader.h"
#include "backends/vulkan/memory.h"
#include "backends/vulkan/scan_shader.h"
#include "backends/vulkan/scatter_shader.h"
#include "backends/vulkan/sort_shader.h"
#include "backends/vulkan/vk_context.h"
#include "graph/env.h"
#include "graph/error.h"
#include "graph/immortal.h"

namespace kiln {

namespace {

using vulkan::check;
using vulkan::Context;
using vulkan::full_barrier;
using vulkan::GpuEvent;
using vulkan::Lane;

using vulkan::Allocation;

class VulkanBuffer : public Buffer {
 public:
  VulkanBuffer(std::shared_ptr<Context> ctx, size_t bytes)
      : alloc_(vulkan::take_buffer(ctx, bytes)), device_{"vulkan", ctx->index()} {}
  // The executor drops a buffer only after the work using it completed.
  ~VulkanBuffer() override { vulkan::give_back_buffer(std::move(alloc_)); }
  size_t bytes() const override { return alloc_->bytes; }
  Device device() const override { return device_; }
  void read(void* dst, size_t offset, size_t n) const override {
    bounds(offset, n, "read");
    if (alloc_->mapped) {
      std::memcpy(dst, static_cast<const char*>(alloc_->mapped) + offset, n);
      return;
    }
    Allocation staging(alloc_->ctx, n);
    alloc_->ctx->transfer(alloc_->buffer, offset, staging.buffer, 0, n);
    std::memcpy(dst, staging.mapped, n);
  }
  void write(const void* src, size_t offset, size_t n) override {
    bounds(offset, n, "write");
    if (alloc_->mapped) {
      std::memcpy(static_cast<char*>(alloc_->mapped) + offset, src, n);
      return;
    }
    Allocation staging(alloc_->ctx, n);
    std::memcpy(staging.mapped, src, n);
    alloc_->ctx->transfer(staging.buffer, 0, alloc_->buffer, offset, n);
  }
  VkBuffer handle() const { return alloc_->buffer; }
  VkDeviceAddress address() const { return alloc_->address; }
  uint64_t id() const { return alloc_->id; }
  const Context* context() const { return alloc_->ctx.get(); }

 private:
  void bounds(size_t offset, size_t n, const char* what) const {
    if (offset > alloc_->bytes || n > alloc_->bytes - offset)
      throw_error("vulkan buffer ", what, " of ", n, " bytes at ", offset, " exceeds its ",
                  alloc_->bytes, " bytes");
  }
  std::unique_ptr<Allocation> alloc_;
  Device device_;
};

// A compute pipeline and its layouts: `bindings` storage buffers (uniform texel buffers where
// `texel` marks them), `push_bytes` of push constants.
struct Pipeline {
  std::shared_ptr<Context> ctx;
  VkShaderModule module = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;

  Pipeline(std::shared_ptr<Context> c, const std::vector<uint32_t>& spirv, uint32_t nbindings,
           uint32_t push_bytes, const std::vector<bool>& texel = {})
      : ctx(std::move(c)), bindings(nbindings) {
    VkDevice d = ctx->device();
    VkShaderModuleCreateInfo mi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mi.codeSize = spirv.size() * 4;
    mi.pCode = spirv.data();
    check(vkCreateShaderModule(d, &mi, nullptr, &module), "vkCreateShaderModule");
    std::vector<VkDescriptorSetLayoutBinding> b(bindings);
    for (uint32_t i = 0; i < bindings; ++i) {
      b[i].binding = i;
      b[i].descriptorType = i < texel.size() && texel[i] ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                         : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      b[i].descriptorCount = 1;
      b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo li{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    li.bindingCount = bindings;
    li.pBindings = b.data();
    check(vkCreateDescriptorSetLayout(d, &li, nullptr, &set_layout), "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &set_layout;
    pli.pushConstantRangeCount = push_bytes ? 1 : 0;
    pli.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(d, &pli, nullptr, &layout), "vkCreatePipelineLayout");
    VkComputePipelineCreateInfo ci{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = module;
    ci.stage.pName = "main";
    ci.layout = layout;
    check(vkCreateComputePipelines(d, ctx->pipeline_cache(), 1, &ci, nullptr, &pipeline),
          "vkCreateComputePipelines");
  }
  ~Pipeline() {
    VkDevice d = ctx->device();
    vkDestroyPipeline(d, pipeline, nullptr);
    vkDestroyPipelineLayout(d, layout, nullptr);
    vkDestroyDescriptorSetLayout(d, set_layout, nullptr);
    vkDestroyShaderModule(d, module, nullptr);
  }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
};

// One dispatch of a compiled kernel: the (rewritten) Kernel IR it runs, its shader and pipeline,
// and the descriptor sets of recent launches (when its params are push constants).
struct Stage {
  Kernel ir;
  vulkan::Shader shader;
  std::unique_ptr<Pipeline> pipe;
  std::unique_ptr<vulkan::DescriptorCache> sets = std::make_unique<vulkan::DescriptorCache>();
};

Stage build_stage(const std::shared_ptr<Context>& ctx, const Kernel& k, const std::string& name,
                  bool by_address = false);

// A compiled kernel: one stage, or part/tail/combine stages of a split full reduction that
// share a scratch buffer bound after the kernel's buffers.
struct VulkanKernel : CompiledKernel {
  Kernel ir;  // as the caller built it: launches are checked against it
  LaunchCheck launch_check;
  std::vector<Stage> stages;
  size_t scratch_bytes = 0;
  // The same stages reaching their buffers by address (ShaderFeatures::by_address), built on
  // the first launch with a buffer beyond maxStorageBufferRange.
  mutable std::mutex wide_mu;
  mutable std::vector<Stage> wide_stages;

  const std::vector<Stage>& wide(const std::shared_ptr<Context>& ctx) const {
    std::lock_guard<std::mutex> lock(wide_mu);
    if (wide_stages.empty()) {
      std::vector<Stage> built;
      for (const Stage& st : stages) built.push_back(build_stage(ctx, st.ir, ir.name, true));
      wide_stages = std::move(built);
      ctx->persist_pipeline_cache();
    }
    return wide_stages;
  }
};

Stage build_stage(const std::shared_ptr<Context>& ctx, const Kernel& k, const std::string& name,
                  bool by_address) {
  Stage st;
  st.ir = k;
  k.validate();  // a rewrite bug surfaces as kiln::Error, never as stray memory accesses
  vulkan::ShaderFeatures f{ctx->info().float64, ctx->info().int64, ctx->label(), by_address};
  f.wide_access = ctx->info().cpu;
  if (const char* w = std::getenv("KILN_VULKAN_WIDE_ACCESS"); w && *w)  // tests: both forms
    f.wide_access = std::strcmp(w, "0") != 0;
  f.texel_loads = vulkan::use_texel_loads(ctx->info());
  f.subgroup_size = ctx->info().subgroups ? ctx->info().subgroup_size : 0;
  f.subgroup_runs = ctx->info().cpu;
  if (const char* r = std::getenv("KILN_VULKAN_SUBGROUP_RUNS"); r && *r)  // tests: both forms
    f.subgroup_runs = std::strcmp(r, "0") != 0;
  f.subgroups = ctx->info().subgroups;
  if (const char* g = std::getenv("KILN_VULKAN_SUBGROUPS"); g && *g)  // tests: the tree too
    f.subgroups = f.subgroups && std::strcmp(g, "0") != 0;
  f.push_bytes = ctx->info().max_push_bytes;
  const vulkan::PhysicalInfo& info = ctx->info();
  f.keep_nan32 = info.keep_nan32, f.keep_denorm32 = info.keep_denorm32;
  f.keep_nan64 = info.keep_nan64, f.keep_denorm64 = info.keep_denorm64;
  f.divide_in_double = info.float64 && !info.cpu;
  if (const char* d = std::getenv("KILN_VULKAN_DIVIDE_IN_DOUBLE"); d && *d)  // tests: GPU form
    f.divide_in_double = info.float64 && std::strcmp(d, "0") != 0;
  if (const char* pc = std::getenv("KILN_VULKAN_PUSH_CONSTANTS"); pc && *pc)  // tests: both forms
    f.push_bytes = std::strcmp(pc, "0") != 0 ? f.push_bytes : 0;
  // Measurements of the element-wise form on a device (docs/backends/vulkan.md).
  if (std::optional<uint64_t> n =
          env_count("KILN_VULKAN_MAP_LOCAL_SIZE", "the workgroup size of element-wise kernels")) {
    if (*n == 0 || *n > ctx->info().max_local_size || (*n & (*n - 1)) != 0)
      throw_error("KILN_VULKAN_MAP_LOCAL_SIZE is ", *n, ": a power of two from 1 to ",
                  ctx->info().max_local_size, " (", ctx->label(), "'s maxComputeWorkGroupSize)");
    f.map_local_size = static_cast<int>(*n);
  }
  if (const char* v = std::getenv("KILN_VULKAN_VECTOR_ACCESS"); v && *v)
    f.vector_access = std::strcmp(v, "0") != 0;
  st.shader = vulkan::generate_glsl(k, f);
  // Fault injection for tests: a kernel whose name or GLSL contains KILN_VULKAN_FAULT_KERNEL
  // gets GLSL that glslang rejects, to check that a failed build fails only the work needing it.
  if (const char* fault = std::getenv("KILN_VULKAN_FAULT_KERNEL"))
    if (*fault &&
        (name.find(fault) != std::string::npos ||
         st.shader.glsl.find(fault, st.shader.glsl.find("void main")) != std::string::npos))
      st.shader.glsl += "#error KILN_VULKAN_FAULT_KERNEL matches this kernel\n";
  if (const char* dump = std::getenv("KILN_VULKAN_DUMP_GLSL"); dump && *dump == '1')
    std::fprintf(stderr, "// kiln vulkan kernel %s\n%s\n", k.name.c_str(),
                 st.shader.glsl.substr(st.shader.glsl.find("void main")).c_str());
  std::vector<uint32_t> spirv = vulkan::cached_spirv(k.hash(), st.shader.glsl, k.name);
  st.pipe =
      std::make_unique<Pipeline>(ctx, spirv, static_cast<uint32_t>(st.shader.bindings),
                                 static_cast<uint32_t>(st.shader.push_words) * 8, st.shader.texel);
  return st;
}

// Full reductions of at least 2^16 elements run as at least 64 workgroups' partials
// (split_reduce.h): one workgroup is one core of lavapipe, one compute unit of a GPU. No part,
// and no row of a reduction with kept axes, is longer than kMaxPart elements: 8192 steps of a
// 64-invocation workgroup's loop, far from lavapipe's loop limit (PhysicalInfo::loop_limit), and
// on a GPU more workgroups for a long row. Float partials are float64 where the device has
// shaderFloat64.
constexpr int64_t kMaxPart = int64_t{1} << 19;

SplitOptions split_options(const Context& ctx) {
  SplitOptions o{64, int64_t{1} << 16, ctx.info().float64};
  o.max_part = kMaxPart;
  return o;
}

std::shared_ptr<VulkanKernel> build_kernel(std::shared_ptr<Context> ctx, const Kernel& k) {
  auto vk = std::make_shared<VulkanKernel>();
  vk->ir = k;
  vk->launch_check = LaunchCheck(k);
  Kernel flat = vulkan::flatten_domain(k);
  std::optional<SplitReduce> split = split_full_reduction(flat, split_options(*ctx));
  if (!split) split = split_long_rows(flat, split_options(*ctx));
  if (split) {
    vk->stages.push_back(build_stage(ctx, split->part, k.name));
    if (split->tail) vk->stages.push_back(build_stage(ctx, *split->tail, k.name));
    vk->stages.push_back(build_stage(ctx, split->combine, k.name));
    vk->scratch_bytes = static_cast<size_t>(split->partials) * split->partial_dtype.size();
  } else {
    vk->stages.push_back(build_stage(ctx, flat, k.name));
  }
  ctx->persist_pipeline_cache();
  return vk;
}

struct MatmulPipeline {
  vulkan::MatmulShader shader;
  std::unique_ptr<Pipeline> pipe;
};

// The matmul pipeline of (device, dtype, form), built on first use and kept for the process.
const MatmulPipeline& matmul_pipeline(const std::shared_ptr<Context>& ctx, Dtype d,
                                      const vulkan::MatmulForm& f) {
  struct Cache {
    std::mutex mu;
    std::map<std::tuple<const Context*, int, bool, int, bool, bool, bool>,
             std::shared_ptr<MatmulPipeline>>
        pipelines;
  };
  static Immortal<Cache> cache;
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& p = cache->pipelines[{ctx.get(), static_cast<int>(d.kind), f.tiled, f.width, f.by_address,
                              f.trans_a, f.trans_b}];
  if (!p) {
    if (d == float64 && !ctx->info().float64)
      throw_error("vulkan: float64 matmul needs the device feature shaderFloat64, which ",
                  ctx->label(), " does not offer");
    auto mp = std::make_shared<MatmulPipeline>();
    mp->shader = vulkan::matmul_glsl(d, f);
    mp->pipe = std::make_unique<Pipeline>(ctx, vulkan::compile_glsl(mp->shader.glsl, "matmul"),
                                          static_cast<uint32_t>(mp->shader.bindings),
                                          sizeof(vulkan::MatmulPush));
    p = mp;
  }
  return *p;
}

// The gather pipeline of (device, element size, form), built on first use and kept for the
// process, with its descriptor sets (its params are push constants, so sets depend only on the
// buffers).
struct GatherPipeline {
  std::unique_ptr<Pipeline> pipe;
  std::unique_ptr<vulkan::DescriptorCache> sets = std::make_unique<vulkan::DescriptorCache>();
};

const GatherPipeline& gather_pipeline(const std::shared_ptr<Context>& ctx, size_t element_bytes,
                                      bool by_address) {
  struct Cache {
    std::mutex mu;
    std::map<std::tuple<const Context*, size_t, bool>, std::shared_ptr<GatherPipeline>> pipelines;
  };
  static Immortal<Cache> cache;
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& p = cache->pipelines[{ctx.get(), element_bytes, by_address}];
  if (!p) {
    auto gp = std::make_shared<GatherPipeline>();
    std::vector<uint32_t> spirv =
        vulkan::compile_glsl(vulkan::gather_glsl(element_bytes, by_address), "gather");
    gp->pipe = std::make_unique<Pipeline>(ctx, spirv, by_address ? 0 : 3,
                                          static_cast<uint32_t>(sizeof(vulkan::GatherPush)));
    p = gp;
  }
  return *p;
}

// A scatter_add pass's pipeline of (device, dtype, pass, form), kept as gathers' are.
const GatherPipeline& scatter_pipeline(const std::shared_ptr<Context>& ctx, Dtype d,
                                       vulkan::ScatterPass pass, bool by_address) {
  struct Cache {
    std::mutex mu;
    std::map<std::tuple<const Context*, int, int, bool>, std::shared_ptr<GatherPipeline>> pipelines;
  };
  static Immortal<Cache> cache;
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& p =
      cache->pipelines[{ctx.get(), static_cast<int>(d.kind), static_cast<int>(pass), by_address}];
  if (!p) {
    auto sp = std::make_shared<GatherPipeline>();
    const vulkan::PhysicalInfo& info = ctx->info();
    vulkan::ScatterFloatModes modes{info.keep_nan32, info.keep_denorm32, info.keep_nan64,
                                    info.keep_denorm64};
    std::vector<uint32_t> spirv =
        vulkan::compile_glsl(vulkan::scatter_glsl(d, pass, by_address, modes), "scatter_add");
    uint32_t bindings = by_address ? 0 : static_cast<uint32_t>(vulkan::scatter_bindings(pass));
    sp->pipe = std::make_unique<Pipeline>(ctx, spirv, bindings,
                                          static_cast<uint32_t>(sizeof(vulkan::ScatterPush)));
    p = sp;
  }
  return *p;
}

// The sort pipelines of (device, dtype, form), one per stage, built on first use and kept for
// the process, with their descriptor sets (input, keys, indices, output; params are pushed).
struct SortPipelines {
  std::unique_ptr<Pipeline> pipe[4];  // by vulkan::SortStage
  std::unique_ptr<vulkan::DescriptorCache> sets[4];
};

const SortPipelines& sort_pipelines(const std::shared_ptr<Context>& ctx, Dtype d, bool by_address) {
  struct Cache {
    std::mutex mu;
    std::map<std::tuple<const Context*, int, bool>, std::shared_ptr<SortPipelines>> pipelines;
  };
  static Immortal<Cache> cache;
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& p = cache->pipelines[{ctx.get(), static_cast<int>(d.kind), by_address}];
  if (!p) {
    auto sp = std::make_shared<SortPipelines>();
    for (int s = 0; s < 4; ++s) {
      auto stage = static_cast<vulkan::SortStage>(s);
      sp->pipe[s] = std::make_unique<Pipeline>(
          ctx, vulkan::compile_glsl(vulkan::sort_glsl(d, stage, by_address), "sort"),
          by_address ? 0 : 4, static_cast<uint32_t>(sizeof(vulkan::SortPush)));
      sp->sets[s] = std::make_unique<vulkan::DescriptorCache>();
    }
    p = sp;
  }
  return *p;
}

using ScanPipeline = GatherPipeline;  // the same shape: a pipeline and its descriptor sets

// The scan pipeline of (device, dtype, op, stage, form), built on first use and kept for the
// process (scan_shader.h), with its descriptor sets.
const ScanPipeline& scan_pipeline(const std::shared_ptr<Context>& ctx, Dtype d, uint32_t op,
                                  bool acc_stage, bool chunked, bool by_address) {
  struct Cache {
    std::mutex mu;
    std::map<std::tuple<const Context*, int, uint32_t, bool, bool, bool>,
             std::shared_ptr<ScanPipeline>>
        pipelines;
  };
  static Immortal<Cache> cache;
  std::lock_guard<std::mutex> lock(cache->mu);
  auto& p =
      cache->pipelines[{ctx.get(), static_cast<int>(d.kind), op, acc_stage, chunked, by_address}];
  if (!p) {
    auto sp = std::make_shared<ScanPipeline>();
    const vulkan::PhysicalInfo& info = ctx->info();
    std::vector<uint32_t> spirv = vulkan::compile_glsl(
        vulkan::scan_glsl(
            d, op, acc_stage, chunked, by_address, info.float64, info.int64,
            {info.keep_nan32, info.keep_denorm32, info.keep_nan64, info.keep_denorm64}),
        "scan");
    sp->pipe = std::make_unique<Pipeline>(ctx, spirv, by_address ? 0 : 3,
                                          static_cast<uint32_t>(sizeof(vulkan::ScanPush)));
    p = sp;
  }
  return *p;
}

// A loop x = f(x) keeps its calls' outputs alive while they are in flight; once those outgrow
// the cache every step reads and writes memory (lavapipe: f on 2^20 floats took 1.1-1.7 ms a
// step with up to 128 calls in flight against a 0.6 ms round trip; docs/performance.md). On a
// device that is the host's own cores the outputs in flight stay within a quarter of its
// last-level cache, as on opencl. A GPU's cache size is not queried here: no bound.
size_t bytes_ahead_limit(const vulkan::PhysicalInfo& info) {
  static const std::optional<uint64_t> n =
      env_count("KILN_VULKAN_BYTES_AHEAD",
                "the bytes of outputs a caller may keep in flight on a vulkan stream before "
                "waiting for the oldest call (0: no bound; unset: a quarter of the host's "
                "last-level cache on a CPU device, else none)");
  if (n) return static_cast<size_t>(*n);
  return info.cpu ? static_cast<size_t>(last_level_cache_bytes() / 4) : 0;
}

class VulkanQueue : public Queue {
 public:
  VulkanQueue(std::shared_ptr<Context> ctx, Backend& backend, int device)
      : ctx_(ctx),
        lane_(std::make_shared<Lane>(std::move(ctx))),
        backend_(backend),
        device_(device) {}
  ~VulkanQueue() override {
    try {
      finish();
    } catch (...) {  // a lost device at exit: nothing left to wait for
    }
  }

  EventPtr enqueue_kernel(const CompiledKernel& ck, const KernelArgs& args) override {
    auto& k = static_cast<const VulkanKernel&>(ck);
    k.launch_check(k.ir, args);
    std::vector<VkBuffer> handles;
    std::vector<uint64_t> ids;
    std::vector<VkDeviceAddress> addresses;
    bool wide = false;
    for (Buffer* b : args.buffers) {
      VulkanBuffer* vb = own(b, k.ir.name);
      handles.push_back(vb->handle());
      ids.push_back(vb->id());
      addresses.push_back(vb->address());
      wide = wide || beyond_binding_range(*vb, k.ir.name);
    }
    const std::vector<Stage>& stages = wide ? k.wide(ctx_) : k.stages;
    size_t n = stages.size();
    std::vector<std::array<uint32_t, 3>> groups(n);
    for (size_t i = 0; i < n; ++i)
      if (!grid(stages[i].ir, stages[i].shader, args.params, groups[i].data()))
        return nullptr;  // an empty domain: nothing to run
    auto res = std::make_shared<LaunchResources>(lane_);
    if (k.scratch_bytes) {
      res->scratch = lane_scratch(k.scratch_bytes);
      handles.push_back(res->scratch->buffer);
      ids.push_back(res->scratch->id);
      addresses.push_back(res->scratch->address);
    }
    Operands ops{handles, ids, addresses, wide};
    std::vector<std::vector<int64_t>> pushed(n);  // push-constant words per stage
    for (size_t i = 0; i < n; ++i) pushed[i] = bind_stage(stages[i], ops, args.params, *res);
    return submit(res, [&](VkCommandBuffer cb) {
      for (size_t i = 0; i < n; ++i) {
        if (i) full_barrier(cb);  // the combine reads what the parts wrote
        const Pipeline& p = *stages[i].pipe;
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
        if (res->sets[i]) {
          VkDescriptorSet set = res->sets[i]->handle();
          vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0,
                                  nullptr);
        }
        if (!pushed[i].empty())
          vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             static_cast<uint32_t>(pushed[i].size() * 8), pushed[i].data());
        vkCmdDispatch(cb, groups[i][0], groups[i][1], groups[i][2]);
      }
    });
  }

  EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) override {
    auto* s = dynamic_cast<VulkanBuffer*>(&src);
    auto* d = dynamic_cast<VulkanBuffer*>(&dst);
    if (s && d && s->context() == ctx_.get() && d->context() == ctx_.get()) {
      if (bytes == 0) return nullptr;
      auto res = std::make_shared<LaunchResources>(lane_);
      return submit(res, [&](VkCommandBuffer cb) {
        VkBufferCopy region{0, 0, bytes};
        vkCmdCopyBuffer(cb, s->handle(), d->handle(), 1, &region);
      });
    }
    std::vector<std::shared_ptr<GpuEvent>> after;
    {
      std::lock_guard<std::mutex> lock(lane_->mu);
      after.swap(lane_->host_waits);
    }
    if (d && d->context() == ctx_.get() && src.host_ptr() && !after.empty())
      return deferred_upload(src, dst, bytes, after);
    // Host or another device on either side: a blocking host transfer (the executor has waited
    // for the source's producer already).
    if (dst.host_ptr()) {
      src.read(dst.host_ptr(), 0, bytes);
    } else if (src.host_ptr()) {
      dst.write(src.host_ptr(), 0, bytes);
    } else {
      std::vector<char> tmp(bytes);
      src.read(tmp.data(), 0, bytes);
      dst.write(tmp.data(), 0, bytes);
    }
    return nullptr;
  }

  // Gathers, scatter_add, sorts and scans have shaders of their own (gather_shader.h,
  // scatter_shader.h, sort_shader.h, scan_shader.h); scatter_add of a dtype without atomics
  // here runs Kernel IR reductions (backends/native_kernels.h).
  EventPtr enqueue_native(const NativeArgs& a) override {
    if (a.op == Op::Gather) return enqueue_gather(a);
    if (a.op == Op::ScatterAdd && has_scatter_add_shader(a.dtype)) return enqueue_scatter_add(a);
    if (a.op == Op::Sort || a.op == Op::Argsort) return enqueue_sort(a);
    if (a.op == Op::Scan) return enqueue_scan(a);
    return enqueue_native_as_kernels(backend_, device_, *this, a);
  }
  EventPtr enqueue_matmul(const MatmulArgs& a) override {
    size_t nb = a.c_offsets.size();
    if (a.a_offsets.size() != nb || a.b_offsets.size() != nb)
      throw_error("vulkan: matmul got ", a.a_offsets.size(), "/", a.b_offsets.size(), "/", nb,
                  " batch offsets for A/B/C (they must agree)");
    VulkanBuffer* bufs[3] = {own(a.a, "matmul"), own(a.b, "matmul"), own(a.c, "matmul")};
    vulkan::MatmulForm form;
    form.tiled = !ctx_->info().cpu;
    form.trans_a = a.trans_a;
    form.trans_b = a.trans_b;
    for (VulkanBuffer* b : bufs)
      form.by_address = form.by_address || beyond_binding_range(*b, "matmul");
    check_matmul_bounds(a, bufs);
    if (nb == 0 || a.m == 0 || a.n == 0) return nullptr;
    auto by4 = [](int64_t v) { return v % 4 == 0; };
    if (!form.tiled && !form.trans_b && by4(a.n) &&
        std::all_of(a.b_offsets.begin(), a.b_offsets.end(), by4) &&
        std::all_of(a.c_offsets.begin(), a.c_offsets.end(), by4))
      form.width = 4;
    const MatmulPipeline& mp = matmul_pipeline(ctx_, a.dtype, form);
    const Pipeline& pipe = *mp.pipe;
    std::vector<int64_t> words = {a.m, a.n, a.k, static_cast<int64_t>(nb)};
    for (const auto* offs : {&a.a_offsets, &a.b_offsets, &a.c_offsets})
      words.insert(words.end(), offs->begin(), offs->end());
    std::vector<VkBuffer> bound;
    for (VulkanBuffer* b : bufs) {
      if (form.by_address)
        words.push_back(static_cast<int64_t>(b->address()));
      else
        bound.push_back(b->handle());
    }
    auto res = std::make_shared<LaunchResources>(lane_);
    write_params(words, *res);
    bound.push_back(res->params.back()->buffer);
    res->sets.push_back(std::make_shared<vulkan::DescriptorSet>(ctx_, pipe.set_layout, bound));
    const uint32_t* lim = ctx_->info().max_groups;
    int64_t gx = (a.n + mp.shader.cols_per_group - 1) / mp.shader.cols_per_group;
    int64_t gy = (a.m + mp.shader.rows_per_group - 1) / mp.shader.rows_per_group;
    if (gx > lim[0] || gy > lim[1])
      throw_error("vulkan: matmul of ", a.m, " x ", a.n, " needs ", gy, " x ", gx,
                  " workgroups, more than ", ctx_->label(), " launches");
    // Along k in parts that keep the shader's loop far from the driver's limit (on a GPU, and
    // on lavapipe below 16384, one part).
    int64_t kpart = a.k;
    if (int64_t limit = ctx_->info().loop_limit) kpart = std::min<int64_t>(kpart, limit / 4);
    return submit(res, [&](VkCommandBuffer cb) {
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline);
      VkDescriptorSet set = res->sets[0]->handle();
      vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1, &set, 0,
                              nullptr);
      int64_t k0 = 0;
      do {
        if (k0) full_barrier(cb);  // this part adds to what the previous one stored
        vulkan::MatmulPush push;
        push.k0 = static_cast<int32_t>(k0);
        push.k1 = static_cast<int32_t>(std::min(a.k, k0 + kpart));
        push.accumulate = k0 > 0;
        for (size_t b0 = 0; b0 < nb; b0 += lim[2]) {  // batches past the z limit: more dispatches
          push.batch0 = static_cast<uint32_t>(b0);
          vkCmdPushConstants(cb, pipe.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
          vkCmdDispatch(cb, static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                        static_cast<uint32_t>(std::min<size_t>(nb - b0, lim[2])));
        }
        k0 += kpart;
      } while (k0 < a.k);
    });
  }

  void finish() override {
    uint64_t target = lane_->flush();
    std::vector<std::shared_ptr<GpuEvent>> deferred;
    {
      std::lock_guard<std::mutex> lock(lane_->mu);
      deferred.swap(lane_->deferred);
    }
    for (const auto& e : deferred) {
      try {
        e->wait();
      } catch (...) {  // a failed transfer's error reached the executor through its event
      }
    }
    VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    wi.semaphoreCount = 1;
    VkSemaphore timeline = lane_->timeline();
    wi.pSemaphores = &timeline;
    wi.pValues = &target;
    check(vkWaitSemaphores(ctx_->device(), &wi, UINT64_MAX), "vkWaitSemaphores");
  }

  bool runs_inline() const override { return false; }
  size_t bytes_ahead() const override { return bytes_ahead_; }

  // Device-side waits need host writes into device buffers to be plain stores: a staged
  // device (memory the host cannot map) transfers through this same queue, which would then
  // sit behind a submission waiting for the transfer.
  bool waits_on_device() const override { return !ctx_->staged(); }
  std::shared_ptr<Signal> create_signal() override {
    if (ctx_->staged()) return nullptr;
    return std::make_shared<vulkan::HostSignal>(ctx_);
  }

  // All or nothing: every event must be a timeline value of this device, else the caller
  // orders the work on the host.
  bool enqueue_wait(const std::vector<EventPtr>& events) override {
    std::vector<std::shared_ptr<GpuEvent>> ours;
    for (const EventPtr& ev : events) {
      auto g = std::dynamic_pointer_cast<GpuEvent>(ev);
      if (!g || g->context() != ctx_.get() || !g->semaphore()) return false;
      ours.push_back(std::move(g));
    }
    // Submitted work must never wait for work still held in a batch: submission order is then
    // an order the device can run in.
    for (const auto& g : ours)
      if (g->semaphore() != lane_->timeline()) g->ensure_submitted();
    std::lock_guard<std::mutex> lock(lane_->mu);
    lane_->host_waits.clear();
    for (const auto& g : ours) {
      if (g->semaphore() != lane_->timeline())  // this lane's own work is in order already
        lane_->waits.push_back({g->semaphore(), g->value(), g->keep()});
      if (g->host_signaled()) lane_->host_waits.push_back(g);
    }
    return true;
  }

 private:
  // A host-to-device transfer whose source a cpu task is still producing: it runs on the host
  // once `after` completes (the executor keeps both buffers until the call ends), and the
  // lane's next submission waits for it on the device.
  EventPtr deferred_upload(Buffer& src, Buffer& dst, size_t bytes,
                           const std::vector<std::shared_ptr<GpuEvent>>& after) {
    Buffer* from = &src;
    Buffer* to = &dst;
    auto done = vulkan::run_after(ctx_, after,
                                  [from, to, bytes] { to->write(from->host_ptr(), 0, bytes); });
    std::shared_ptr<GpuEvent> ev = done->gpu_event();
    std::lock_guard<std::mutex> lock(lane_->mu);
    std::erase_if(lane_->deferred, [](const auto& e) { return e->completed(); });
    lane_->deferred.push_back(ev);
    lane_->waits.push_back({ev->semaphore(), ev->value(), ev->keep()});
    return ev;
  }

  EventPtr enqueue_gather(const NativeArgs& a) {
    check_native_buffers(a);
    const int64_t total = a.out_elements();
    if (total == 0) return nullptr;
    std::string what = native_name(a);
    VulkanBuffer* bufs[3] = {own(a.buffers[0], what), own(a.buffers[1], what),
                             own(a.buffers[2], what)};
    bool by_address = false;
    for (VulkanBuffer* b : bufs) by_address = beyond_binding_range(*b, what) || by_address;
    // Below 2^31 elements each: own() bounds every buffer to 2^31 bytes.
    vulkan::GatherPush push;
    push.outer = static_cast<uint32_t>(a.outer), push.n = static_cast<uint32_t>(a.n);
    push.inner = static_cast<uint32_t>(a.inner), push.m = static_cast<uint32_t>(a.m);
    push.total = static_cast<uint32_t>(total);
    int64_t per_word = vulkan::gather_elements_per_word(a.dtype.size());
    push.words = static_cast<uint32_t>((total + per_word - 1) / per_word);
    push.shared_index = a.shared_index ? 1 : 0;
    const GatherPipeline& gp = gather_pipeline(ctx_, a.dtype.size(), by_address);
    auto res = std::make_shared<LaunchResources>(lane_);
    if (by_address) {
      for (int i = 0; i < 3; ++i) push.address[i] = bufs[i]->address();
      res->sets.push_back(nullptr);
    } else {
      std::vector<VkBuffer> bound;
      std::vector<uint64_t> ids;
      for (VulkanBuffer* b : bufs) bound.push_back(b->handle()), ids.push_back(b->id());
      res->sets.push_back(gp.sets->get(ctx_, gp.pipe->set_layout, bound, ids));
    }
    uint32_t g[3];
    gather_grid(push.words, g);
    const Pipeline& pipe = *gp.pipe;
    return submit(res, [&](VkCommandBuffer cb) {
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline);
      if (res->sets[0]) {
        VkDescriptorSet set = res->sets[0]->handle();
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1, &set, 0,
                                nullptr);
      }
      vkCmdPushConstants(cb, pipe.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), &push);
      vkCmdDispatch(cb, g[0], g[1], g[2]);
    });
  }

  // 64-bit types need shaderBufferInt64Atomics, float64 also shaderFloat64; without them
  // scatter_add runs as Kernel IR reductions (correct, O(n m)).
  bool has_scatter_add_shader(Dtype d) const {
    const vulkan::PhysicalInfo& info = ctx_->info();
    if (d.size() < 8) return true;
    return info.int64_atomics && (d != float64 || info.float64);
  }

  // scatter_add (scatter_shader.h): the base copied to the output, or widened into a 32-bit
  // temporary; the updates added into it; the temporary rounded into the output. One command
  // buffer, its passes between barriers.
  EventPtr enqueue_scatter_add(const NativeArgs& a) {
    check_native_buffers(a);
    const int64_t total = a.out_elements(), updates = a.outer * a.m * a.inner;
    if (total == 0) return nullptr;
    std::string what = native_name(a);
    VulkanBuffer *base = own(a.buffers[0], what), *ix = own(a.buffers[1], what),
                 *up = own(a.buffers[2], what), *out = own(a.buffers[3], what);
    const bool wide = vulkan::scatter_add_is_wide(a.dtype);
    std::shared_ptr<Buffer> tmp;
    VulkanBuffer* acc = out;
    if (wide) {
      tmp = backend_.allocate(device_, static_cast<size_t>(total) * 4);
      acc = own(tmp.get(), what);
    }
    bool by_address = false;
    for (VulkanBuffer* b : {base, ix, up, out, acc})
      by_address = beyond_binding_range(*b, what) || by_address;
    // The passes, each with its buffers in binding order and the positions it steps over.
    struct Pass {
      vulkan::ScatterPass kind;
      std::vector<VulkanBuffer*> bufs;
      int64_t words;
    };
    std::vector<Pass> passes;
    int64_t per_word = vulkan::gather_elements_per_word(a.dtype.size());
    if (wide) passes.push_back({vulkan::ScatterPass::Widen, {base, acc}, total});
    if (updates > 0) passes.push_back({vulkan::ScatterPass::Add, {ix, up, acc}, updates});
    if (wide)
      passes.push_back(
          {vulkan::ScatterPass::Narrow, {acc, out}, (total + per_word - 1) / per_word});
    auto res = std::make_shared<LaunchResources>(lane_);
    std::vector<const Pipeline*> pipes;
    std::vector<vulkan::ScatterPush> pushes;
    std::vector<std::array<uint32_t, 3>> grids;
    for (const Pass& p : passes) {
      const GatherPipeline& sp = scatter_pipeline(ctx_, a.dtype, p.kind, by_address);
      vulkan::ScatterPush push;
      push.outer = static_cast<uint32_t>(a.outer), push.n = static_cast<uint32_t>(a.n);
      push.inner = static_cast<uint32_t>(a.inner), push.m = static_cast<uint32_t>(a.m);
      push.count = static_cast<uint32_t>(p.kind == vulkan::ScatterPass::Add ? updates : total);
      push.words = static_cast<uint32_t>(p.words);
      push.shared_index = a.shared_index ? 1 : 0;
      if (by_address) {
        for (size_t i = 0; i < p.bufs.size(); ++i) push.address[i] = p.bufs[i]->address();
        res->sets.push_back(nullptr);
      } else {
        std::vector<VkBuffer> bound;
        std::vector<uint64_t> ids;
        for (VulkanBuffer* b : p.bufs) bound.push_back(b->handle()), ids.push_back(b->id());
        res->sets.push_back(sp.sets->get(ctx_, sp.pipe->set_layout, bound, ids));
      }
      std::array<uint32_t, 3> g;
      gather_grid(p.words, g.data(), "scatter_add");
      pipes.push_back(sp.pipe.get());
      pushes.push_back(push);
      grids.push_back(g);
    }
    const bool copy = !wide && base != out;
    EventPtr ev = submit(res, [&](VkCommandBuffer cb) {
      if (copy) {
        VkBufferCopy region{0, 0, static_cast<VkDeviceSize>(total) * a.dtype.size()};
        vkCmdCopyBuffer(cb, base->handle(), out->handle(), 1, &region);
      }
      for (size_t i = 0; i < passes.size(); ++i) {
        if (i > 0 || copy) full_barrier(cb);  // each pass reads what the one before wrote
        const Pipeline& pipe = *pipes[i];
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline);
        if (res->sets[i]) {
          VkDescriptorSet set = res->sets[i]->handle();
          vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1, &set, 0,
                                  nullptr);
        }
        vkCmdPushConstants(cb, pipe.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           sizeof(vulkan::ScatterPush), &pushes[i]);
        vkCmdDispatch(cb, grids[i][0], grids[i][1], grids[i][2]);
      }
    });
    if (ev && tmp) ev->on_complete([tmp](std::exception_ptr) {});  // the temporary lives until then
    return ev;
  }

  // The gather's grid: one workgroup per kGatherLanes words (a CPU device at most max_groups_,
  // as element-wise kernels), folded into 2-D past the per-dimension limit; the shader loops
  // over the words past it.
  void gather_grid(int64_t words, uint32_t g[3], const char* what = "gather") const {
    int64_t needed = (words + vulkan::kGatherLanes - 1) / vulkan::kGatherLanes;
    int64_t total = max_groups_ > 0 ? std::min<int64_t>(needed, max_groups_) : needed;
    const uint32_t* lim = ctx_->info().max_groups;
    int64_t gx = std::min<int64_t>(total, lim[0]);
    int64_t gy = std::min<int64_t>((total + gx - 1) / gx, lim[1]);
    int64_t steps = (needed + gx * gy - 1) / (gx * gy);
    if (int64_t limit = ctx_->info().loop_limit; limit && steps > limit / 2)
      throw_error("vulkan: ", what, " of ", words, " words would loop ", steps,
                  " times in a shader on ", ctx_->label(),
                  ", whose driver ends shader loops after ", limit,
                  " iterations (llvmpipe); raise KILN_VULKAN_MAX_GROUPS or run it on cpu");
    g[0] = static_cast<uint32_t>(gx), g[1] = static_cast<uint32_t>(gy), g[2] = 1;
  }

  // Sort and argsort: keys, the bitonic passes of backends/sort_passes.h and the output, in one
  // submission (full barriers between the dispatches); keys and indices from the buffer pool.
  EventPtr enqueue_sort(const NativeArgs& a) {
    check_native_buffers(a);
    const int64_t total = a.out_elements();
    if (total == 0) return nullptr;
    std::string what = native_name(a);
    VulkanBuffer* in = own(a.buffers[0], what);
    VulkanBuffer* out = own(a.buffers[1], what);
    const int64_t lanes = vulkan::kSortLanes;
    SortPlan plan = plan_sort(a.outer * a.inner, a.n, 2 * lanes);
    const size_t key_bytes = a.dtype.size() == 8 ? 8 : 4;
    auto res = std::make_shared<LaunchResources>(lane_);
    auto keys = pooled(static_cast<size_t>(plan.slots) * key_bytes, what);
    auto idx = pooled(static_cast<size_t>(plan.slots) * 4, what);
    res->temps = {keys, idx};
    bool by_address = beyond_binding_range(*in, what) || beyond_binding_range(*out, what) ||
                      temp_beyond_binding_range(*keys, what);
    const SortPipelines& sp = sort_pipelines(ctx_, a.dtype, by_address);

    vulkan::SortPush base;
    base.n = static_cast<uint32_t>(a.n), base.inner = static_cast<uint32_t>(a.inner);
    while ((int64_t{1} << base.plog) < plan.padded) ++base.plog;
    base.used = static_cast<uint32_t>(a.outer * a.inner * plan.padded);
    base.slots = static_cast<uint32_t>(plan.slots), base.total = static_cast<uint32_t>(total);
    base.total_order = a.op == Op::Sort ? 1 : 0, base.desc = a.descending ? 1 : 0;
    base.argsort = a.op == Op::Argsort ? 1 : 0;
    if (by_address) {
      VkDeviceAddress addr[4] = {in->address(), keys->address, idx->address, out->address()};
      for (int i = 0; i < 4; ++i) base.address[i] = addr[i];
    }
    struct Dispatch {
      int stage;
      vulkan::SortPush push;
      uint32_t g[3];
    };
    std::vector<Dispatch> ds;
    auto add = [&](vulkan::SortStage stage, int64_t count, int64_t groups, int64_t per_item) {
      Dispatch d{static_cast<int>(stage), base, {}};
      d.push.count = static_cast<uint32_t>(count);
      sort_grid(groups, per_item, d.g);
      ds.push_back(d);
    };
    add(vulkan::SortStage::Keys, plan.slots, (plan.slots + lanes - 1) / lanes, 1);
    const int64_t blocks = plan.slots / plan.block;
    for (const SortPass& p : plan.passes) {
      if (p.local)
        add(vulkan::SortStage::Local, blocks, blocks, 64);
      else
        add(vulkan::SortStage::Global, plan.slots / (2 * p.steps),
            (plan.slots / (2 * p.steps) + lanes - 1) / lanes, 1);
      vulkan::SortPush& push = ds.back().push;
      push.k0 = p.k0, push.k1 = p.k1, push.j0 = p.j0, push.steps = p.steps;
    }
    int64_t per_word = a.op == Op::Sort ? vulkan::gather_elements_per_word(a.dtype.size()) : 1;
    int64_t words = (total + per_word - 1) / per_word;
    add(vulkan::SortStage::Out, words, (words + lanes - 1) / lanes, per_word);

    std::shared_ptr<const vulkan::DescriptorSet> sets[4];
    if (!by_address) {
      std::vector<VkBuffer> bound = {in->handle(), keys->buffer, idx->buffer, out->handle()};
      std::vector<uint64_t> ids = {in->id(), keys->id, idx->id, out->id()};
      for (int s = 0; s < 4; ++s)
        sets[s] = sp.sets[s]->get(ctx_, sp.pipe[s]->set_layout, bound, ids);
      res->sets.assign(std::begin(sets), std::end(sets));
    }
    return submit(res, [&](VkCommandBuffer cb) {
      for (size_t i = 0; i < ds.size(); ++i) {
        if (i) full_barrier(cb);  // each pass reads what the one before wrote
        const Pipeline& pipe = *sp.pipe[ds[i].stage];
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.pipeline);
        if (sets[ds[i].stage]) {
          VkDescriptorSet set = sets[ds[i].stage]->handle();
          vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pipe.layout, 0, 1, &set, 0,
                                  nullptr);
        }
        vkCmdPushConstants(cb, pipe.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                           sizeof(vulkan::SortPush), &ds[i].push);
        vkCmdDispatch(cb, ds[i].g[0], ds[i].g[1], ds[i].g[2]);
      }
    });
  }

  // A pooled buffer allocation of `bytes`, given back to the pool when the last holder lets go
  // (a launch's resources: after the GPU is done with it).
  std::shared_ptr<Allocation> pooled(size_t bytes, const std::string& what) const {
    if (bytes > static_cast<size_t>(INT32_MAX))
      throw_error("vulkan: ", what, " needs a temporary of ", bytes,
                  " bytes, beyond the backend's 32-bit addressing");
    return std::shared_ptr<Allocation>(
        vulkan::take_buffer(ctx_, bytes).release(),
        [](Allocation* p) { vulkan::give_back_buffer(std::unique_ptr<Allocation>(p)); });
  }
  bool temp_beyond_binding_range(const Allocation& t, const std::string& what) const {
    if (t.bytes <= ctx_->info().max_storage_range) return false;
    if (!ctx_->info().device_address)
      throw_error("vulkan: ", what, " on ", ctx_->label(), " needs a temporary of ", t.bytes,
                  " bytes, beyond the device's maxStorageBufferRange of ",
                  ctx_->info().max_storage_range,
                  " bytes, and the device lacks bufferDeviceAddress to reach it");
    return true;
  }

  // A sort pass's grid: `needed` workgroups (a CPU device at most max_groups_), folded into 2-D
  // past the per-dimension limit; the shaders loop over the rest, each step taking up to
  // `per_item` loop iterations of llvmpipe's per-invocation budget.
  void sort_grid(int64_t needed, int64_t per_item, uint32_t g[3]) const {
    int64_t total = max_groups_ > 0 ? std::min<int64_t>(needed, max_groups_) : needed;
    total = std::max<int64_t>(total, 1);
    const uint32_t* lim = ctx_->info().max_groups;
    int64_t gx = std::min<int64_t>(total, lim[0]);
    int64_t gy = std::min<int64_t>((total + gx - 1) / gx, lim[1]);
    int64_t steps = (needed + gx * gy - 1) / (gx * gy);
    if (int64_t limit = ctx_->info().loop_limit; limit && steps * (per_item + 1) > limit / 2)
      throw_error("vulkan: a sort pass would loop ", steps * (per_item + 1),
                  " times in a shader on ", ctx_->label(),
                  ", whose driver ends shader loops after ", limit,
                  " iterations (llvmpipe); raise KILN_VULKAN_MAX_GROUPS or run it on cpu");
    g[0] = static_cast<uint32_t>(gx), g[1] = static_cast<uint32_t>(gy), g[2] = 1;
  }

  // Per-launch objects, released on the completion thread once the GPU is done with them.
  struct LaunchResources {
    std::shared_ptr<Lane> lane;
    std::vector<std::unique_ptr<Allocation>> params;  // params buffers, when not pushed
    // Per dispatch (null: nothing bound); cached sets stay cached after the launch.
    std::vector<std::shared_ptr<const vulkan::DescriptorSet>> sets;
    std::shared_ptr<Allocation> scratch;       // partials of a split reduction
    std::vector<std::shared_ptr<void>> temps;  // pooled temporaries (a sort's keys and indices,
                                               // a scan's totals)
    explicit LaunchResources(std::shared_ptr<Lane> l) : lane(std::move(l)) {}
    ~LaunchResources() {  // on the completion thread, after the GPU is done with them
      sets.clear();
      std::lock_guard<std::mutex> lock(lane->mu);
      for (auto& a : params)
        if (a->bytes == Lane::kParamBytes) lane->free_params.push_back(std::move(a));
    }
  };

  // One dispatch of a scan (scan_shader.h): its pipeline, set (null: by address) and grid.
  struct ScanDispatch {
    const ScanPipeline* pipe;
    std::shared_ptr<const vulkan::DescriptorSet> set;
    vulkan::ScanPush push;
    uint32_t g[2];
  };

  EventPtr enqueue_scan(const NativeArgs& a) {
    check_native_buffers(a);
    std::string what = native_name(a);
    if (a.scan == ScanOp::LogAddExp && !a.dtype.is_float())
      throw_error("vulkan: ", what, " is not defined (valid: float dtypes)");
    if (a.out_elements() == 0) return nullptr;
    VulkanBuffer* bufs[2] = {own(a.buffers[0], what), own(a.buffers[1], what)};
    bool by_address = false;
    for (VulkanBuffer* b : bufs) by_address = beyond_binding_range(*b, what) || by_address;
    ScanOp op = a.scan;  // bool sums are "or" and products "and": max and min of 0 and 1
    if (a.dtype == bool_ && op == ScanOp::Sum) op = ScanOp::Max;
    if (a.dtype == bool_ && op == ScanOp::Prod) op = ScanOp::Min;
    auto res = std::make_shared<LaunchResources>(lane_);
    std::vector<ScanDispatch> dispatches;
    uint32_t flags =
        (a.reverse ? vulkan::kScanReverse : 0u) | (a.inclusive ? vulkan::kScanInclusive : 0u);
    scan_level(a.dtype, false, bufs[0], bufs[1], by_address, a.outer * a.inner, a.n, a.inner,
               static_cast<uint32_t>(op), flags, *res, dispatches);
    for (const ScanDispatch& d : dispatches) res->sets.push_back(d.set);
    return submit(res, [&](VkCommandBuffer cb) {
      for (size_t i = 0; i < dispatches.size(); ++i) {
        const ScanDispatch& d = dispatches[i];
        if (i) full_barrier(cb);  // each pass reads what the one before wrote
        const Pipeline& p = *d.pipe->pipe;
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
        if (d.set) {
          VkDescriptorSet set = d.set->handle();
          vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &set, 0,
                                  nullptr);
        }
        vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(d.push), &d.push);
        vkCmdDispatch(cb, d.g[0], d.g[1], 1);
      }
    });
  }

  // The dispatches of one level (scan_shader.h): one when a row fits a tile (a chunk), else
  // the tiles' totals into a temporary, its exclusive scan one level up, and the tiles from
  // their carries. A CPU device takes the chunked form (KILN_VULKAN_SCAN_TILES=1: the tile form,
  // for tests): a few hundred chunks in all, each at most half of lavapipe's loop limit.
  void scan_level(Dtype d, bool acc_stage, VulkanBuffer* src, VulkanBuffer* dst, bool by_address,
                  int64_t rows, int64_t n, int64_t inner, uint32_t op, uint32_t flags,
                  LaunchResources& res, std::vector<ScanDispatch>& out) {
    static const bool tiles_on_cpu = [] {
      const char* v = std::getenv("KILN_VULKAN_SCAN_TILES");
      return v && std::strcmp(v, "1") == 0;
    }();
    const bool chunked = ctx_->info().cpu && !tiles_on_cpu;
    int64_t per = int64_t{vulkan::kScanLanes} * vulkan::kScanRun, parts = (n + per - 1) / per;
    int64_t lanes = vulkan::kScanLanes;
    if (chunked) {
      constexpr int64_t kWant = 256, kMinChunk = 1024;
      int64_t most = ctx_->info().loop_limit ? ctx_->info().loop_limit / 2 : int64_t{1} << 30;
      parts = std::clamp<int64_t>((kWant + rows - 1) / rows, 1, (n + kMinChunk - 1) / kMinChunk);
      parts = std::max(parts, (n + most - 1) / most);
      per = (n + parts - 1) / parts;
      lanes = vulkan::kScanChunkLanes;
    }
    VulkanBuffer* aux = dst;  // bound but unused in a one-pass scan
    if (parts > 1) {
      std::shared_ptr<Buffer> totals = backend_.allocate(
          device_, static_cast<size_t>(rows * parts) * vulkan::scan_accumulator_bytes(d));
      aux = own(totals.get(), "scan");
      res.temps.push_back(totals);
    }
    // 4- and 8-byte dtypes accumulate in their own type: the same shader for both stages.
    const ScanPipeline& sp =
        scan_pipeline(ctx_, d, op, acc_stage && d.size() < 4, chunked, by_address);
    auto dispatch = [&](uint32_t extra) {
      ScanDispatch sd{&sp, nullptr, {}, {1, 1}};
      vulkan::ScanPush& p = sd.push;
      // Below 2^31 elements: own() bounds every buffer to 2^31 bytes.
      p.n = static_cast<uint32_t>(n), p.inner = static_cast<uint32_t>(inner);
      p.tiles = static_cast<uint32_t>(parts), p.groups = static_cast<uint32_t>(rows * parts);
      p.flags = flags | extra, p.chunk = static_cast<uint32_t>(per);
      int64_t groups = chunked ? (rows * parts + lanes - 1) / lanes : rows * parts;
      const uint32_t* lim = ctx_->info().max_groups;
      int64_t gx = std::min<int64_t>(groups, lim[0]);
      int64_t gy = (groups + gx - 1) / gx;
      if (gy > lim[1])
        throw_error("vulkan: ", groups, " scan workgroups exceed the device's grid of ", lim[0],
                    " x ", lim[1], " on ", ctx_->label());
      p.gx = static_cast<uint32_t>(gx), sd.g[0] = p.gx, sd.g[1] = static_cast<uint32_t>(gy);
      VulkanBuffer* bound[3] = {src, dst, aux};
      if (by_address) {
        for (int i = 0; i < 3; ++i) p.address[i] = bound[i]->address();
      } else {
        std::vector<VkBuffer> handles;
        std::vector<uint64_t> ids;
        for (VulkanBuffer* b : bound) handles.push_back(b->handle()), ids.push_back(b->id());
        sd.set = sp.sets->get(ctx_, sp.pipe->set_layout, handles, ids);
      }
      out.push_back(sd);
    };
    if (parts == 1) return dispatch(0);
    dispatch(vulkan::kScanTotals);
    scan_level(d, true, aux, aux, by_address, rows, parts, 1, op, 0, res, out);
    dispatch(vulkan::kScanCarried);
  }
  // Workgroups per launch at most (0: one per point or per 64 points); shaders loop over the
  // rest. On a CPU device 16384: measured on lavapipe (x + 1 over 32M floats), 64 groups were
  // ~4x slower (each grid-stride iteration another stream of accesses far from the last) and
  // one group per 256 points ~2x slower (its per-group overhead); shaders whose steps go in
  // subgroup runs set their own cap (Shader::max_groups). KILN_VULKAN_MAX_GROUPS overrides (tests
  // use 0 to launch grids past 65535 groups on lavapipe).
  static int64_t max_groups(const Context& ctx) {
    if (const char* v = std::getenv("KILN_VULKAN_MAX_GROUPS"); v && *v) return std::atoll(v);
    return ctx.info().cpu ? 16384 : 0;
  }

  VulkanBuffer* own(Buffer* b, const std::string& kernel) const {
    auto* vb = dynamic_cast<VulkanBuffer*>(b);
    if (!vb || vb->context() != ctx_.get())
      throw_error("vulkan: kernel ", kernel, " on ", ctx_->label(), " got a buffer of ",
                  b ? b->device().str() : std::string("nothing"),
                  " (plans copy inputs to the kernel's device)");
    if (vb->bytes() > static_cast<size_t>(INT32_MAX))
      throw_error("vulkan: ", kernel, " binds a buffer of ", vb->bytes(),
                  " bytes, beyond the backend's 32-bit addressing");
    return vb;
  }

  // True when `b` is too large for a storage-buffer binding, so the kernel must reach it by
  // address; raises kiln::Error when the device cannot.
  bool beyond_binding_range(const VulkanBuffer& b, const std::string& kernel) const {
    if (b.bytes() <= ctx_->info().max_storage_range) return false;
    if (!ctx_->info().device_address)
      throw_error("vulkan: ", kernel, " on ", ctx_->label(), " uses a buffer of ", b.bytes(),
                  " bytes, beyond the device's maxStorageBufferRange of ",
                  ctx_->info().max_storage_range,
                  " bytes; larger tensors need the device feature bufferDeviceAddress, which "
                  "this device does not offer");
    return true;
  }

  // Workgroups for a launch, folded into 2-D/3-D grids past the per-dimension limit.
  bool grid(const Kernel& ir, const vulkan::Shader& sh, const std::vector<int64_t>& params,
            uint32_t g[3]) const {
    std::vector<int64_t> e = ir.extents(params);
    int kept = ir.kept_axes();
    int64_t points = 1;
    for (int a = 0; a < kept; ++a) points *= e[a];
    if (points <= 0) return false;
    if (points > INT32_MAX)
      throw_error("vulkan: kernel ", ir.name, " has ", points,
                  " output points, beyond the backend's 32-bit addressing");
    int64_t reduced = 1;
    for (int a = kept; a < ir.ndim(); ++a) reduced *= std::max<int64_t>(e[a], 1);
    if (reduced > INT32_MAX)
      throw_error("vulkan: kernel ", ir.name, " reduces ", reduced,
                  " elements per output, beyond the backend's 32-bit addressing");
    int64_t per_group = int64_t{sh.local_size} * sh.points_per_invocation;
    int64_t needed = sh.per_group ? points : (points + per_group - 1) / per_group;
    int64_t total = needed;
    // Shaders loop over points past the grid: a CPU device gets a few groups per core (each
    // workgroup is a task switch there); a GPU one group per point or per 64 points.
    // Reductions keep one workgroup per kept point: on lavapipe, 7 groups each looping over
    // 10,000 rows (a barrier-separated tree per row) gave wrong sums for some rows, while one
    // group per row is right; their loop only serves grids past the device's limits.
    // A shader's own cap (subgroup runs) gives way to KILN_VULKAN_MAX_GROUPS only.
    int64_t cap = sh.max_groups > 0 && !max_groups_set_ ? sh.max_groups : max_groups_;
    if (cap > 0 && !sh.per_group) total = std::min<int64_t>(total, cap);
    const uint32_t* lim = ctx_->info().max_groups;
    int64_t gx = std::min<int64_t>(total, lim[0]);
    int64_t gy = std::min<int64_t>((total + gx - 1) / gx, lim[1]);
    int64_t gz = (total + gx * gy - 1) / (gx * gy);
    if (gz > lim[2])
      throw_error("vulkan: kernel ", ir.name, " needs ", total, " workgroups, more than ",
                  ctx_->label(), " can launch (", lim[0], " x ", lim[1], " x ", lim[2], ")");
    g[0] = static_cast<uint32_t>(gx), g[1] = static_cast<uint32_t>(gy);
    g[2] = static_cast<uint32_t>(gz);
    // The longest loop of an invocation: the grid-stride loop, or a reduction's loop along its
    // row. Kernels are built to stay far below the driver's limit (kMaxPart); one that would
    // come near it (a row with runtime extents, several reduced axes that do not merge, grids
    // forced small) raises instead of giving a result the driver cut short.
    if (int64_t limit = ctx_->info().loop_limit) {
      int64_t steps = (needed + gx * gy * gz - 1) / (gx * gy * gz);
      if (sh.per_group) steps = std::max(steps, (reduced + sh.local_size - 1) / sh.local_size);
      if (steps > limit / 2)
        throw_error("vulkan: kernel ", ir.name, " would loop ", steps, " times in a shader on ",
                    ctx_->label(), ", whose driver ends shader loops after ", limit,
                    " iterations (llvmpipe), so its result would be wrong. Reductions with "
                    "constant shapes are split into parts that fit; this one cannot be (runtime "
                    "extents, or reduced axes that do not merge): run it on cpu");
    }
    return true;
  }

  static void check_matmul_bounds(const MatmulArgs& a, VulkanBuffer* const bufs[3]) {
    const std::vector<int64_t>* offs[3] = {&a.a_offsets, &a.b_offsets, &a.c_offsets};
    int64_t sizes[3] = {a.m * a.k, a.k * a.n, a.m * a.n};
    int64_t elems[3];
    for (int i = 0; i < 3; ++i) elems[i] = static_cast<int64_t>(bufs[i]->bytes() / a.dtype.size());
    for (int i = 0; i < 3; ++i)
      for (int64_t o : *offs[i])
        if (o < 0 || o + sizes[i] > elems[i])
          throw_error("vulkan: matmul operand ", "ABC"[i], " at element offset ", o, " needs ",
                      sizes[i], " elements, its buffer holds ", elems[i]);
  }

  // Params as 64-bit words, then the float32 bits of each float launch scalar (FloatSlot).
  static std::vector<int64_t> launch_words(const vulkan::Shader& sh,
                                           const std::vector<int64_t>& params) {
    std::vector<int64_t> words(params.begin(), params.end());
    words.resize(static_cast<size_t>(sh.nparams) + sh.float_slots.size(), 0);
    for (const vulkan::FloatSlot& s : sh.float_slots) {
      double d;
      std::memcpy(&d, &params.at(s.param), 8);
      float f = static_cast<float>(d);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      words[s.slot] = bits;
    }
    return words;
  }

  void write_params(std::vector<int64_t> words, LaunchResources& res) const {
    if (words.empty()) words.push_back(0);
    size_t bytes = words.size() * 8;
    std::unique_ptr<Allocation> a;
    if (bytes <= Lane::kParamBytes) {
      std::lock_guard<std::mutex> lock(lane_->mu);
      if (!lane_->free_params.empty()) {
        a = std::move(lane_->free_params.back());
        lane_->free_params.pop_back();
      }
    }
    if (!a) a = std::make_unique<Allocation>(ctx_, std::max(bytes, size_t{Lane::kParamBytes}));
    res.params.push_back(std::move(a));
    std::memcpy(res.params.back()->mapped, words.data(), words.size() * 8);
  }

  // A launch's buffers: handles and allocation ids (the kernel's, then the scratch buffer), and
  // their device addresses when they are reached by address.
  struct Operands {
    const std::vector<VkBuffer>& handles;
    const std::vector<uint64_t>& ids;
    const std::vector<VkDeviceAddress>& addresses;
    bool wide;
  };

  // The descriptor set of one stage's dispatch (appended to res.sets; cached when its params
  // are push constants) and the push-constant words it needs (none with a params buffer).
  std::vector<int64_t> bind_stage(const Stage& st, const Operands& ops,
                                  const std::vector<int64_t>& params, LaunchResources& res) const {
    auto nb = static_cast<long>(st.ir.buffers.size());
    std::vector<int64_t> words = launch_words(st.shader, params);
    std::vector<VkBuffer> bound;
    std::vector<uint64_t> bound_ids;
    if (ops.wide) {  // the addresses follow the params; no buffer is bound
      words.resize(static_cast<size_t>(st.shader.address_slot));
      for (long b = 0; b < nb; ++b) words.push_back(static_cast<int64_t>(ops.addresses[b]));
    } else {
      bound.assign(ops.handles.begin(), ops.handles.begin() + nb);
      bound_ids.assign(ops.ids.begin(), ops.ids.begin() + nb);
    }
    if (st.shader.push_words) {
      words.resize(static_cast<size_t>(st.shader.push_words), 0);
      res.sets.push_back(bound.empty() ? nullptr
                                       : st.sets->get(ctx_, st.pipe->set_layout, bound, bound_ids,
                                                      st.shader.texel));
      return words;
    }
    write_params(words, res);  // bound after the buffers; the set is this launch's alone
    bound.push_back(res.params.back()->buffer);
    res.sets.push_back(
        std::make_shared<vulkan::DescriptorSet>(ctx_, st.pipe->set_layout, bound, st.shader.texel));
    return {};
  }

  // The lane's scratch buffer for split-reduction partials, at least `bytes` large.
  std::shared_ptr<Allocation> lane_scratch(size_t bytes) const {
    std::lock_guard<std::mutex> lock(lane_->mu);
    if (!lane_->scratch || lane_->scratch->bytes < bytes)
      lane_->scratch = std::make_shared<Allocation>(ctx_, bytes, Allocation::Kind::Buffer);
    return lane_->scratch;
  }

  // Records the call into the lane's batch (lane.h) and returns the Event the completion
  // thread completes once its batch has run.
  template <typename Record>
  EventPtr submit(std::shared_ptr<LaunchResources> res, Record record) {
    return lane_->record(std::move(res), record);
  }

  std::shared_ptr<Context> ctx_;
  std::shared_ptr<Lane> lane_;
  size_t bytes_ahead_ = bytes_ahead_limit(ctx_->info());
  Backend& backend_;  // immortal (the registry's), for the kernels of native primitives
  int device_;
  int64_t max_groups_ = max_groups(*ctx_);
  bool max_groups_set_ = std::getenv("KILN_VULKAN_MAX_GROUPS") != nullptr;
};

class VulkanBackend : public Backend {
 public:
  std::string name() const override { return "vulkan"; }

  std::vector<DeviceInfo> devices() override {
    std::vector<DeviceInfo> out;
    const auto& all = vulkan::physical_devices();
    for (size_t i = 0; i < all.size(); ++i)
      out.push_back(DeviceInfo{Device{"vulkan", static_cast<int>(i)}, all[i].description,
                               all[i].usable, all[i].reason});
    if (out.empty())
      out.push_back(DeviceInfo{Device{"vulkan", 0}, "vulkan", false,
                               "the Vulkan loader reports no physical device (Debian: "
                               "mesa-vulkan-drivers provides lavapipe)"});
    return out;
  }

  bool uses_host_memory() const override { return false; }

  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    return std::make_shared<VulkanBuffer>(vulkan::context(device), bytes);
  }

  std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) override {
    k.validate();
    auto ctx = vulkan::context(device);
    uint64_t h = k.hash();
    std::string canon = k.canonical();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [c, kern] : cache_[{device, h}])
        if (c == canon) return kern;
    }
    auto kern = build_kernel(ctx, k);  // outside the lock: compiles run concurrently
    std::lock_guard<std::mutex> lock(mu_);
    cache_[{device, h}].push_back({canon, kern});
    return kern;
  }

  std::unique_ptr<Queue> create_queue(int device) override {
    return std::make_unique<VulkanQueue>(vulkan::context(device), *this, device);
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, uint64_t>,
           std::vector<std::pair<std::string, std::shared_ptr<const VulkanKernel>>>>
      cache_;
};

}  // namespace

std::shared_ptr<Backend> make_vulkan_backend() { return std::make_shared<VulkanBackend>(); }

int64_t vulkan_validation_messages() { return vulkan::validation_message_count(); }

}  // namespace kiln
