// The Vulkan backend's disk cache under $KILN_CACHE_DIR/vulkan (default $XDG_CACHE_HOME/kiln/
// vulkan or ~/.cache/kiln/vulkan): SPIR-V per kernel and the VkPipelineCache data per device,
// so a second process skips glslang and most of the driver's compile.
//  - SPIR-V entries are keyed by the kernel hash and a hash of the generated GLSL (which carries
//    the device features it was generated for and Kiln's code generator); an entry stores the
//    GLSL itself, so a collision is a miss, never another kernel's code.
//  - Pipeline cache data is keyed by the device (vendor, device id, pipelineCacheUUID) and its
//    driver version; the driver validates its own header too.
// Every file carries a magic, its size and an FNV-1a checksum: anything that does not verify is a
// miss (reported in `rejected`), rebuilt and overwritten. Writes go to a temporary file renamed
// into place. Best effort: an unwritable folder only costs the cache. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::vulkan {

// The folder in use now ($KILN_CACHE_DIR is read on every call), created 0700; "" when it cannot
// be created.
std::string cache_directory();

struct SpirvCacheStats {
  int64_t hits = 0, misses = 0, rejected = 0;
};
SpirvCacheStats spirv_cache_stats();

// The SPIR-V of `glsl` (kernel `name`, hash `kernel_hash`) from the disk cache or compiled now
// (and stored).
std::vector<uint32_t> cached_spirv(uint64_t kernel_hash, const std::string& glsl,
                                   const std::string& name);
// The path cached_spirv uses for this kernel and GLSL ("" without a cache folder).
std::string spirv_path(uint64_t kernel_hash, const std::string& glsl);

// Pipeline-cache blobs; `device_key` names device and driver version.
std::optional<std::vector<char>> load_pipeline_cache(const std::string& device_key);
void store_pipeline_cache(const std::string& device_key, const std::vector<char>& data);

}  // namespace kiln::vulkan
