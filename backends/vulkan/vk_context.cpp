#include "backends/vulkan/vk_context.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "backends/vulkan/disk_cache.h"
#include "graph/at_exit.h"
#include "graph/env.h"
#include "graph/error.h"
#include "graph/log.h"

namespace kiln::vulkan {

namespace {

std::atomic<int64_t> g_validation_messages{0};

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                             VkDebugUtilsMessageTypeFlagsEXT,
                                             const VkDebugUtilsMessengerCallbackDataEXT* data,
                                             void*) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    g_validation_messages.fetch_add(1);
    logging::warn("vulkan validation: ", data->pMessage);
  }
  return VK_FALSE;
}

bool validation_requested() {
  const char* v = std::getenv("KILN_VULKAN_VALIDATION");
  return v && std::strcmp(v, "0") != 0 && *v;
}

bool has_layer(const char* name) {
  uint32_t n = 0;
  vkEnumerateInstanceLayerProperties(&n, nullptr);
  std::vector<VkLayerProperties> layers(n);
  vkEnumerateInstanceLayerProperties(&n, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

// Mesa's drivers (lavapipe from Mesa 23) print "WARNING: lavapipe is not a conformant Vulkan
// implementation" to stderr when loaded unless this is set; the user asked for nothing, so it
// stays off the terminal unless KILN_LOG=debug. Set before the instance loads any driver, and
// never over the user's own value.
void quiet_drivers() {
  if (!logging::enabled(logging::Level::debug))
    ::setenv("MESA_VK_IGNORE_CONFORMANCE_WARNING", "1", 0);
}

// The process's instance; never destroyed (devices and their threads may outlive static
// destructors elsewhere).
struct Instance {
  VkInstance handle = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;

  Instance() {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "kiln";
    app.pEngineName = "kiln";
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    const char* layer = "VK_LAYER_KHRONOS_validation";
    const char* ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    bool validate = validation_requested();
    if (validate) {
      if (!has_layer(layer))
        throw_error("KILN_VULKAN_VALIDATION is set but ", layer,
                    " is not installed (Debian: vulkan-validationlayers)");
      ci.enabledLayerCount = 1;
      ci.ppEnabledLayerNames = &layer;
      ci.enabledExtensionCount = 1;
      ci.ppEnabledExtensionNames = &ext;
    }
    quiet_drivers();
    VkResult r = vkCreateInstance(&ci, nullptr, &handle);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
      throw_error(
          "vulkan: no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER):"
          " install one, e.g. Debian's mesa-vulkan-drivers (lavapipe) or a GPU vendor's");
    check(r, "vkCreateInstance");
    if (validate) {
      VkDebugUtilsMessengerCreateInfoEXT mi{
          VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
      mi.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
      mi.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
      mi.pfnUserCallback = on_validation;
      auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
          vkGetInstanceProcAddr(handle, "vkCreateDebugUtilsMessengerEXT"));
      if (!create) throw_error("vulkan: vkCreateDebugUtilsMessengerEXT is missing");
      check(create(handle, &mi, nullptr, &messenger), "vkCreateDebugUtilsMessengerEXT");
    }
  }
};

VkInstance instance() {
  static Instance inst;
  return inst.handle;
}

std::string mib(uint64_t bytes) {
  std::ostringstream os;
  if (bytes >= (uint64_t{1} << 30))
    os << static_cast<double>(bytes) / (1 << 30) << " GiB";
  else
    os << bytes / (1 << 20) << " MiB";
  return os.str();
}

// Where Context puts buffers (its constructor says why), for the description.
const char* buffer_placement(const VkPhysicalDeviceMemoryProperties& mem) {
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  bool local = false, mapped_local = false;
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    VkMemoryPropertyFlags f = mem.memoryTypes[t].propertyFlags;
    local = local || (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    mapped_local =
        mapped_local || ((f & host) == host && (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT));
  }
  return mapped_local ? "device-local, mapped" : local ? "device-local, staged" : "host, mapped";
}

PhysicalInfo describe(VkPhysicalDevice pd) {
  PhysicalInfo info;
  info.handle = pd;
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  subgroup.pNext = &driver;
  VkPhysicalDeviceFloatControlsProperties floats{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  driver.pNext = &floats;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(pd, &props);
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &f12;
  uint32_t api = props.properties.apiVersion;
  if (api >= VK_API_VERSION_1_2) vkGetPhysicalDeviceFeatures2(pd, &feats);
  const VkPhysicalDeviceLimits& lim = props.properties.limits;
  info.name = props.properties.deviceName;
  info.driver = std::string(driver.driverName) + " " + driver.driverInfo;
  info.float64 = feats.features.shaderFloat64;
  info.int64 = feats.features.shaderInt64;
  info.int64_atomics = info.int64 && f12.shaderBufferInt64Atomics;
  info.device_address = f12.bufferDeviceAddress;
  if (api >= VK_API_VERSION_1_2) {
    info.keep_nan32 = floats.shaderSignedZeroInfNanPreserveFloat32;
    info.keep_denorm32 = floats.shaderDenormPreserveFloat32;
    info.keep_nan64 = floats.shaderSignedZeroInfNanPreserveFloat64;
    info.keep_denorm64 = floats.shaderDenormPreserveFloat64;
  }
  const VkSubgroupFeatureFlags ops = VK_SUBGROUP_FEATURE_BASIC_BIT |
                                     VK_SUBGROUP_FEATURE_ARITHMETIC_BIT |
                                     VK_SUBGROUP_FEATURE_SHUFFLE_BIT;
  info.subgroup_size = subgroup.subgroupSize;
  info.subgroups = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                   (subgroup.supportedOperations & ops) == ops;
  for (int i = 0; i < 3; ++i) info.max_groups[i] = lim.maxComputeWorkGroupCount[i];
  info.max_local_size =
      std::min(lim.maxComputeWorkGroupSize[0], lim.maxComputeWorkGroupInvocations);
  info.max_storage_range = lim.maxStorageBufferRange;
  info.max_texel_elements = lim.maxTexelBufferElements;
  // Lowered (never raised) by KILN_VULKAN_STORAGE_RANGE, so that tests reach the by-address
  // forms of the shaders with small buffers.
  if (std::optional<uint64_t> r =
          env_count("KILN_VULKAN_STORAGE_RANGE", "the largest buffer bound as a storage buffer"))
    info.max_storage_range = std::min<uint64_t>(info.max_storage_range, *r);
  info.max_push_bytes = lim.maxPushConstantsSize;
  // llvmpipe (lavapipe) ends every shader loop after 65535 iterations in all, per invocation
  // (Mesa's LP_MAX_TGSI_LOOP_ITERATIONS, shared between the loops of a shader): a longer loop
  // silently stops early.
  if (driver.driverID == VK_DRIVER_ID_MESA_LLVMPIPE) info.loop_limit = 65535;
  info.driver_version = props.properties.driverVersion;
  info.vendor_id = props.properties.vendorID;
  info.cpu = props.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  info.device_id = props.properties.deviceID;
  std::memcpy(info.cache_uuid, props.properties.pipelineCacheUUID, VK_UUID_SIZE);

  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  std::ostringstream os;
  os << info.name << "; driver " << info.driver << "; Vulkan " << VK_API_VERSION_MAJOR(api) << "."
     << VK_API_VERSION_MINOR(api) << "; heaps";
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes =
          std::max<uint64_t>(info.device_local_bytes, mem.memoryHeaps[h].size);
  for (uint32_t h = 0; h < mem.memoryHeapCount; ++h)
    os << (h ? "," : "") << " " << mib(mem.memoryHeaps[h].size)
       << (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ? " device-local" : "");
  os << "; subgroup " << subgroup.subgroupSize << (info.subgroups ? " (arithmetic, shuffle)" : "")
     << "; shaderFloat64 " << (info.float64 ? "yes" : "no") << ", shaderInt64 "
     << (info.int64 ? "yes" : "no") << "; maxStorageBufferRange " << mib(info.max_storage_range)
     << "; bufferDeviceAddress " << (info.device_address ? "yes" : "no") << "; buffers "
     << buffer_placement(mem) << "; DenormPreserve float32 " << (info.keep_denorm32 ? "yes" : "no")
     << ", float64 " << (info.keep_denorm64 ? "yes" : "no");
  info.description = os.str();

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> qf(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf.data());
  bool compute = false;
  for (uint32_t q = 0; q < nq && !compute; ++q)
    if (qf[q].queueFlags & VK_QUEUE_COMPUTE_BIT) compute = true, info.queue_family = q;
  if (api < VK_API_VERSION_1_2)
    info.reason = "Vulkan 1.2 is required (the device offers " +
                  std::to_string(VK_API_VERSION_MAJOR(api)) + "." +
                  std::to_string(VK_API_VERSION_MINOR(api)) + ")";
  else if (!f12.timelineSemaphore)
    info.reason = "the device lacks timelineSemaphore";
  else if (!compute)
    info.reason = "the device has no compute queue";
  info.usable = info.reason.empty();
  if (!info.usable) info.reason = info.name + ": " + info.reason;
  return info;
}

}  // namespace

void check(VkResult r, const char* what) {
  if (r != VK_SUCCESS)
    throw_error("vulkan: ", what, " failed (VkResult ", static_cast<int>(r), ")");
}

int64_t validation_message_count() { return g_validation_messages.load(); }

const std::vector<PhysicalInfo>& physical_devices() {
  static const std::vector<PhysicalInfo> all = [] {
    VkInstance inst = instance();
    uint32_t n = 0;
    check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
    std::vector<VkPhysicalDevice> pds(n);
    check(vkEnumeratePhysicalDevices(inst, &n, pds.data()), "vkEnumeratePhysicalDevices");
    std::vector<PhysicalInfo> out;
    for (VkPhysicalDevice pd : pds) out.push_back(describe(pd));
    return out;
  }();
  return all;
}

// ---- context --------------------------------------------------------------------------------

Context::Context(int index) : index_(index), info_(physical_devices().at(index)) {
  // Tests: the error of a device without bufferDeviceAddress on one that has it.
  if (const char* v = std::getenv("KILN_VULKAN_DEVICE_ADDRESS"); v && std::strcmp(v, "0") == 0)
    info_.device_address = false;
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qi{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qi.queueFamilyIndex = info_.queue_family;
  qi.queueCount = 1;
  qi.pQueuePriorities = &priority;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.timelineSemaphore = VK_TRUE;
  f12.bufferDeviceAddress = info_.device_address;
  f12.shaderBufferInt64Atomics = info_.int64_atomics;
  VkPhysicalDeviceFeatures2 feats{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  feats.pNext = &f12;
  feats.features.shaderFloat64 = info_.float64;
  feats.features.shaderInt64 = info_.int64;
  VkDeviceCreateInfo ci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  ci.pNext = &feats;
  ci.queueCreateInfoCount = 1;
  ci.pQueueCreateInfos = &qi;
  check(vkCreateDevice(info_.handle, &ci, nullptr, &device_), "vkCreateDevice");
  vkGetDeviceQueue(device_, info_.queue_family, 0, &queue_);

  // Memory: one host-visible coherent type for params and staging (device-local too where a
  // type is both: lavapipe, integrated GPUs, resizable BAR). Buffers use it directly when it is
  // device-local or the device has no other device-local type; otherwise they live in
  // device-local memory and transfers are staged.
  VkPhysicalDeviceMemoryProperties mem;
  vkGetPhysicalDeviceMemoryProperties(info_.handle, &mem);
  const VkMemoryPropertyFlags host =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags local = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  int best = -1, device_local = -1;
  for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
    VkMemoryPropertyFlags f = mem.memoryTypes[t].propertyFlags;
    if ((f & local) && device_local < 0) device_local = static_cast<int>(t);
    if ((f & host) != host) continue;
    if (best < 0 || ((f & local) && !(mem.memoryTypes[best].propertyFlags & local)))
      best = static_cast<int>(t);
  }
  if (best < 0) throw_error("vulkan: ", label(), " has no host-visible coherent memory type");
  host_type_ = buffer_type_ = static_cast<uint32_t>(best);
  if (!(mem.memoryTypes[best].propertyFlags & local) && device_local >= 0) {
    buffer_type_ = static_cast<uint32_t>(device_local);
    staged_ = true;
  }
  if (const char* v = std::getenv("KILN_VULKAN_STAGING"); v && std::strcmp(v, "1") == 0)
    staged_ = true;  // tests: the staged path on a device whose memory is all host-visible
  // Measurements: buffers in a device-local type the host cannot map (where the device has
  // one), as a discrete GPU without resizable BAR would give them.
  if (const char* v = std::getenv("KILN_VULKAN_DEVICE_MEMORY"); v && std::strcmp(v, "1") == 0)
    for (uint32_t t = 0; t < mem.memoryTypeCount; ++t) {
      VkMemoryPropertyFlags f = mem.memoryTypes[t].propertyFlags;
      if ((f & local) && !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
        buffer_type_ = t, staged_ = true;
        break;
      }
    }

  // The driver checks the blob's header (device, driver, UUID) and ignores one that does not
  // match; the disk cache's checksum keeps a damaged file from reaching it at all.
  VkPipelineCacheCreateInfo pci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  std::optional<std::vector<char>> blob = load_pipeline_cache(cache_key());
  if (blob) pci.initialDataSize = blob->size(), pci.pInitialData = blob->data();
  if (vkCreatePipelineCache(device_, &pci, nullptr, &cache_) != VK_SUCCESS) {
    pci.initialDataSize = 0, pci.pInitialData = nullptr;  // a blob the driver refused
    check(vkCreatePipelineCache(device_, &pci, nullptr, &cache_), "vkCreatePipelineCache");
  }
  thread_ = std::thread([this] { completion_loop(); });
}

Context::~Context() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  vkDeviceWaitIdle(device_);
  if (transfer_pool_) {
    vkDestroyFence(device_, transfer_fence_, nullptr);
    vkDestroyCommandPool(device_, transfer_pool_, nullptr);
  }
  vkDestroyPipelineCache(device_, cache_, nullptr);
  vkDestroyDevice(device_, nullptr);
}

std::string Context::cache_key() const {
  std::ostringstream os;
  os << std::hex << info_.vendor_id << "-" << info_.device_id << "-" << info_.driver_version << "-";
  for (uint8_t b : info_.cache_uuid) os << static_cast<int>(b);
  return os.str();
}

void Context::persist_pipeline_cache() {
  std::lock_guard<std::mutex> lock(cache_mu_);
  size_t n = 0;
  if (vkGetPipelineCacheData(device_, cache_, &n, nullptr) != VK_SUCCESS || n == 0) return;
  std::vector<char> data(n);
  if (vkGetPipelineCacheData(device_, cache_, &n, data.data()) != VK_SUCCESS) return;
  data.resize(n);
  store_pipeline_cache(cache_key(), data);
}

std::string Context::label() const {
  return "vulkan:" + std::to_string(index_) + " (" + info_.name + ")";
}

VkSemaphore Context::new_timeline() {
  VkSemaphoreTypeCreateInfo ti{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  ti.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo si{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  si.pNext = &ti;
  VkSemaphore s;
  check(vkCreateSemaphore(device_, &si, nullptr, &s), "vkCreateSemaphore");
  return s;
}

namespace {
std::atomic<int64_t> g_submissions_to_failure{0};
}  // namespace

void fail_nth_submission(int64_t n) { g_submissions_to_failure.store(n); }

void Context::submit(const VkSubmitInfo& info, VkFence fence) {
  int64_t left = g_submissions_to_failure.load(std::memory_order_relaxed);
  while (left > 0 && !g_submissions_to_failure.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 1) check(VK_ERROR_OUT_OF_DEVICE_MEMORY, "vkQueueSubmit (failed by a test hook)");
  std::lock_guard<std::mutex> lock(queue_mu_);
  check(vkQueueSubmit(queue_, 1, &info, fence), "vkQueueSubmit");
}

void Context::transfer(VkBuffer src, size_t src_offset, VkBuffer dst, size_t dst_offset, size_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(transfer_mu_);
  if (!transfer_pool_) {
    VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pi.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pi.queueFamilyIndex = info_.queue_family;
    check(vkCreateCommandPool(device_, &pi, nullptr, &transfer_pool_), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    ai.commandPool = transfer_pool_;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(device_, &ai, &transfer_cb_), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    check(vkCreateFence(device_, &fi, nullptr, &transfer_fence_), "vkCreateFence");
  }
  check(vkResetCommandBuffer(transfer_cb_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(vkBeginCommandBuffer(transfer_cb_, &bi), "vkBeginCommandBuffer");
  VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  mb.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT;
  mb.dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT;
  vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
  VkBufferCopy region{src_offset, dst_offset, n};
  vkCmdCopyBuffer(transfer_cb_, src, dst, 1, &region);
  mb.dstAccessMask |= VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(transfer_cb_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                       VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb,
                       0, nullptr, 0, nullptr);
  check(vkEndCommandBuffer(transfer_cb_), "vkEndCommandBuffer");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &transfer_cb_;
  submit(si, transfer_fence_);
  check(vkWaitForFences(device_, 1, &transfer_fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
  check(vkResetFences(device_, 1, &transfer_fence_), "vkResetFences");
}

void Context::watch(VkSemaphore sem, uint64_t value, std::vector<std::shared_ptr<GpuEvent>> events,
                    std::function<void()> cleanup) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({sem, value, std::move(events), std::move(cleanup), nullptr});
  }
  cv_.notify_one();
}

void Context::fail(std::vector<std::shared_ptr<GpuEvent>> events, std::exception_ptr error,
                   std::function<void()> cleanup) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({VK_NULL_HANDLE, 0, std::move(events), std::move(cleanup), error});
  }
  cv_.notify_one();
}

// Sleeps on a condition variable while nothing is pending, else waits for the oldest pending
// submission's semaphore (one semaphore, wait-all: lavapipe busy-polls a wait-any over several
// semaphores, which cost a whole core), then completes everything that has finished.
void Context::completion_loop() {
  for (;;) {
    VkSemaphore sem;
    uint64_t value;
    bool failed;
    {
      std::unique_lock<std::mutex> lock(mu_);
      processing_ = false;
      idle_cv_.notify_all();
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, nothing left
      processing_ = true;
      sem = pending_.front().sem, value = pending_.front().value;
      failed = pending_.front().error != nullptr;
    }
    VkResult r = VK_SUCCESS;
    if (!failed) {
      VkSemaphoreWaitInfo wi{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
      wi.semaphoreCount = 1;
      wi.pSemaphores = &sem;
      wi.pValues = &value;
      r = vkWaitSemaphores(device_, &wi, 1000000000ull);
      if (r == VK_TIMEOUT) continue;
    }
    std::exception_ptr err;
    if (r != VK_SUCCESS) {
      try {
        check(r, "vkWaitSemaphores (device lost?)");
      } catch (...) {
        err = std::current_exception();
      }
    }
    std::vector<Pending> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < pending_.size();) {
        uint64_t v = 0;
        if (!pending_[i].error) vkGetSemaphoreCounterValue(device_, pending_[i].sem, &v);
        if (pending_[i].error || v >= pending_[i].value || err) {
          done.push_back(std::move(pending_[i]));
          pending_.erase(pending_.begin() + static_cast<long>(i));
        } else {
          ++i;
        }
      }
    }
    for (Pending& p : done) {
      if (p.cleanup) p.cleanup();
      for (const auto& ev : p.events) ev->complete(p.error ? p.error : err);
    }
  }
}

bool Context::quiesce(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool idle = pending_.empty() && !processing_;
  if (!idle_cv_.wait_for(lock, limit, [&] { return pending_.empty() && !processing_; }))
    return false;
  stop_ = true;
  lock.unlock();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // A CPU device (lavapipe) runs submitted work on driver threads inside this process: wait for
  // them (nothing waits on the host any more, so this cannot block for long). A GPU with
  // nothing in flight is not called at all: at exit NVIDIA's driver may already be torn down
  // (an H100 crashed here in vkDeviceWaitIdle when OpenCL and Vulkan had both been used).
  if (info_.cpu || !idle) vkDeviceWaitIdle(device_);
  return true;
}

namespace {
std::mutex& contexts_mutex() {
  static std::mutex& mu = *new std::mutex;
  return mu;
}
std::map<int, std::shared_ptr<Context>>& contexts() {
  static auto& all = *new std::map<int, std::shared_ptr<Context>>;
  return all;
}
// At exit, before the libraries' own finalisers run (the driver's among them: lavapipe's code
// was torn down under a thread still inside it, 1 exit in ~100), every device finishes its work
// and the completion thread stops. Lanes and queues live for the process, so nothing else waits.
void idle_at_exit() {
  std::lock_guard<std::mutex> lock(contexts_mutex());
  for (auto& [index, c] : contexts())
    if (c) c->quiesce(std::chrono::seconds(2));
}
}  // namespace

std::shared_ptr<Context> context(int index) {
  // Contexts live until the process ends, never destroyed by a static destructor: otherwise the
  // last reference could be dropped on the completion thread itself (a finished launch's
  // clean-up outliving its queue at exit), whose join would then fail. Their threads sleep on
  // a condition variable when idle, so exit does not wait for them.
  std::mutex& mu = contexts_mutex();
  auto& contexts = kiln::vulkan::contexts();
  std::lock_guard<std::mutex> lock(mu);
  auto& c = contexts[index];
  if (!c) {
    const auto& all = physical_devices();
    if (index < 0 || index >= static_cast<int>(all.size()))
      throw_error("vulkan: device vulkan:", index, " does not exist (", all.size(),
                  " Vulkan device(s))");
    if (!all[index].usable)
      throw_error("vulkan: device vulkan:", index, " is not usable: ", all[index].reason);
    c = std::make_shared<Context>(index);
    // Armed once the device exists, so idle_at_exit runs before the finalisers of the
    // libraries the instance and device loaded (the driver, validation layers; graph/at_exit.h).
    // Registered earlier, it called into NVIDIA's validation-layer chain after that was torn
    // down; and lavapipe's finaliser ran while PoCL was still compiling an enqueued kernel.
    at_exit_finish(ExitStage::Devices, idle_at_exit);
    arm_exit_finish();
  }
  return c;
}

}  // namespace kiln::vulkan
