#include "backends/cpu/disk_cache.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace kiln::cpu {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '1'};

// Fixed-size part of an entry's header; followed by the env key bytes, then the object.
struct Header {
  char magic[8];
  uint64_t kernel_hash;
  uint64_t key_bytes;
  uint64_t object_bytes;
  uint64_t checksum;  // over the key bytes and the object
};

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  auto* c = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 0x100000001b3ULL;
  return h;
}

DiskCache::DiskCache(std::string env_key)
    : env_key_(std::move(env_key)), env_hash_(fnv1a(env_key_.data(), env_key_.size())) {}

std::string DiskCache::directory() {
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) return std::string(d) + "/cpu";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/kiln/cpu";
}

std::string DiskCache::path_for(uint64_t kernel_hash) const {
  return directory() + "/" + hex(kernel_hash) + "-" + hex(env_hash_) + ".kobj";
}

DiskCache::Lookup DiskCache::load(uint64_t kernel_hash) const {
  Lookup r;
  std::ifstream f(path_for(kernel_hash), std::ios::binary);
  if (!f) return r;
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto reject = [&](const char* why) {
    r.status = Status::Rejected;
    r.why = why;
    return r;
  };
  Header h;
  if (bytes.size() < sizeof h) return reject("truncated header");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("wrong magic");
  if (h.kernel_hash != kernel_hash) return reject("kernel hash mismatch");
  if (h.key_bytes != env_key_.size() || bytes.size() - sizeof h < h.key_bytes)
    return reject("environment key mismatch");
  const char* key = bytes.data() + sizeof h;
  if (std::memcmp(key, env_key_.data(), env_key_.size()) != 0)
    return reject("environment key mismatch");
  if (bytes.size() - sizeof h - h.key_bytes != h.object_bytes) return reject("size mismatch");
  if (fnv1a(key, h.key_bytes + h.object_bytes) != h.checksum) return reject("checksum mismatch");
  r.status = Status::Hit;
  r.object.assign(key + h.key_bytes, key + h.key_bytes + h.object_bytes);
  return r;
}

bool DiskCache::store(uint64_t kernel_hash, const std::vector<char>& object) const {
  std::error_code ec;
  std::filesystem::create_directories(directory(), ec);
  if (ec) return false;
  std::vector<char> body(env_key_.begin(), env_key_.end());
  body.insert(body.end(), object.begin(), object.end());
  Header h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.kernel_hash = kernel_hash;
  h.key_bytes = env_key_.size();
  h.object_bytes = object.size();
  h.checksum = fnv1a(body.data(), body.size());
  // Write a private temporary and rename it over the entry: readers in other processes see
  // the old entry or the new one, never half of one.
  std::string path = path_for(kernel_hash);
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return false;
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    f.write(body.data(), static_cast<std::streamsize>(body.size()));
    if (!f) return false;
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

}  // namespace kiln::cpu
