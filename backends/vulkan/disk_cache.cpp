#include "backends/vulkan/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/vulkan/glsl_compiler.h"
#include "graph/hash.h"

namespace kiln::vulkan {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'V', 'K', '0', '1'};

std::atomic<int64_t> g_hits{0}, g_misses{0}, g_rejected{0};

// File layout: magic, u64 payload size, u64 checksum of the payload, payload.
bool write_file(const std::string& path, const std::string& payload) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "-" +
                    std::to_string(fnv1a(&payload, sizeof payload));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    uint64_t size = payload.size(), sum = fnv1a(payload.data(), payload.size());
    out.write(kMagic, sizeof kMagic);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(reinterpret_cast<const char*>(&sum), 8);
    out.write(payload.data(), static_cast<std::streamsize>(payload.size()));
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

enum class Read { Ok, Missing, Corrupt };

Read read_file(const std::string& path, std::string& payload) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Read::Missing;
  char magic[8];
  uint64_t size = 0, sum = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char*>(&size), 8);
  in.read(reinterpret_cast<char*>(&sum), 8);
  if (!in || std::memcmp(magic, kMagic, 8) != 0 || size > (uint64_t{1} << 30)) return Read::Corrupt;
  payload.resize(size);
  in.read(payload.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<uint64_t>(in.gcount()) != size) return Read::Corrupt;
  if (fnv1a(payload.data(), payload.size()) != sum) return Read::Corrupt;
  return Read::Ok;
}

}  // namespace

std::string cache_directory() {
  std::string dir;
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d)
    dir = std::string(d) + "/vulkan";
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    dir = std::string(x) + "/kiln/vulkan";
  else if (const char* home = std::getenv("HOME"); home && *home)
    dir = std::string(home) + "/.cache/kiln/vulkan";
  else
    dir = "/tmp/kiln-" + std::to_string(::geteuid()) + "/vulkan";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  return std::filesystem::is_directory(dir, ec) ? dir : "";
}

SpirvCacheStats spirv_cache_stats() { return {g_hits.load(), g_misses.load(), g_rejected.load()}; }

std::string spirv_path(uint64_t kernel_hash, const std::string& glsl) {
  std::string dir = cache_directory();
  if (dir.empty()) return "";
  return dir + "/" + hex64(kernel_hash) + "-" + hex64(fnv1a(glsl.data(), glsl.size())) + ".spv";
}

std::vector<uint32_t> cached_spirv(uint64_t kernel_hash, const std::string& glsl,
                                   const std::string& name) {
  std::string path = spirv_path(kernel_hash, glsl);
  if (!path.empty()) {
    std::string payload;
    Read r = read_file(path, payload);
    // Payload: u64 GLSL length, the GLSL, the SPIR-V words.
    if (r == Read::Ok && payload.size() >= 8) {
      uint64_t n = 0;
      std::memcpy(&n, payload.data(), 8);
      if (n <= payload.size() - 8 && payload.compare(8, n, glsl) == 0 &&
          (payload.size() - 8 - n) % 4 == 0 && payload.size() - 8 - n > 0) {
        std::vector<uint32_t> spirv((payload.size() - 8 - n) / 4);
        std::memcpy(spirv.data(), payload.data() + 8 + n, spirv.size() * 4);
        g_hits.fetch_add(1);
        return spirv;
      }
      r = Read::Corrupt;  // another kernel's GLSL under this name, or a short payload
    }
    if (r == Read::Corrupt) g_rejected.fetch_add(1);
  }
  g_misses.fetch_add(1);
  std::vector<uint32_t> spirv = compile_glsl(glsl, name);
  if (!path.empty()) {
    std::string payload(8, '\0');
    uint64_t n = glsl.size();
    std::memcpy(payload.data(), &n, 8);
    payload += glsl;
    payload.append(reinterpret_cast<const char*>(spirv.data()), spirv.size() * 4);
    write_file(path, payload);  // best effort
  }
  return spirv;
}

std::optional<std::vector<char>> load_pipeline_cache(const std::string& device_key) {
  std::string dir = cache_directory();
  if (dir.empty()) return std::nullopt;
  std::string payload;
  if (read_file(dir + "/pipelines-" + device_key + ".bin", payload) != Read::Ok)
    return std::nullopt;
  return std::vector<char>(payload.begin(), payload.end());
}

void store_pipeline_cache(const std::string& device_key, const std::vector<char>& data) {
  std::string dir = cache_directory();
  if (dir.empty() || data.empty()) return;
  write_file(dir + "/pipelines-" + device_key + ".bin", std::string(data.begin(), data.end()));
}

}  // namespace kiln::vulkan
