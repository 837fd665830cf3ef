#include "backends/opencl/program_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "graph/error.h"
#include "graph/hash.h"
#include "graph/log.h"

namespace kiln::opencl {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'L', '0', '1'};

// The folder exists (created 0700 if missing), is ours and nobody else may write to it.
bool safe_folder(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ::chmod(dir.c_str(), 0700);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  return st.st_uid == ::getuid() && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

struct Header {
  char magic[8];
  uint64_t source_hash, identity_hash, payload_bytes, checksum;
};

cl_program from_binary(ClDevice& dev, const std::vector<unsigned char>& bin) {
  const unsigned char* ptr = bin.data();
  size_t n = bin.size();
  cl_int status = CL_SUCCESS, err = CL_SUCCESS;
  cl_program p = clCreateProgramWithBinary(dev.context, 1, &dev.id, &n, &ptr, &status, &err);
  if (err != CL_SUCCESS || status != CL_SUCCESS) {
    if (p) clReleaseProgram(p);
    return nullptr;
  }
  if (clBuildProgram(p, 1, &dev.id, dev.build_options().c_str(), nullptr, nullptr) != CL_SUCCESS) {
    clReleaseProgram(p);
    return nullptr;
  }
  return p;
}

std::vector<unsigned char> read_entry(const std::string& path, const Header& want) {
  std::ifstream in(path, std::ios::binary);
  Header h;
  if (!in.read(reinterpret_cast<char*>(&h), sizeof h)) return {};
  if (std::memcmp(h.magic, kMagic, 8) != 0 || h.source_hash != want.source_hash ||
      h.identity_hash != want.identity_hash || h.payload_bytes > (uint64_t{1} << 30))
    return {};
  std::vector<unsigned char> bin(h.payload_bytes);
  if (!in.read(reinterpret_cast<char*>(bin.data()), static_cast<std::streamsize>(bin.size())))
    return {};
  if (fnv1a(bin.data(), bin.size()) != h.checksum) return {};
  return bin;
}

void write_entry(const std::string& path, Header h, const std::vector<unsigned char>& bin) {
  std::memcpy(h.magic, kMagic, 8);
  h.payload_bytes = bin.size();
  h.checksum = fnv1a(bin.data(), bin.size());
  std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" +
                    std::to_string(reinterpret_cast<uintptr_t>(&h));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&h), sizeof h);
    out.write(reinterpret_cast<const char*>(bin.data()), static_cast<std::streamsize>(bin.size()));
    if (!out) {
      std::remove(tmp.c_str());
      return;  // best effort: a read-only cache must not break compilation
    }
  }
  std::rename(tmp.c_str(), path.c_str());  // atomic: readers see the old entry or the new one
}

std::vector<unsigned char> program_binary(const ClDevice& dev, cl_program p) {
  size_t size = 0;
  if (clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) != CL_SUCCESS ||
      size == 0)
    return {};
  std::vector<unsigned char> bin(size);
  unsigned char* ptr = bin.data();
  if (clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS) return {};
  return bin;
}

Header key_of(const ClDevice& dev, const std::string& source) {
  Header h{};
  h.source_hash = fnv1a(source);
  h.identity_hash = fnv1a(dev.identity());
  return h;
}

}  // namespace

std::string kiln_cache_dir() {
  std::string dir;
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) {
    dir = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/kiln";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::string(home) + "/.cache/kiln";
  } else {
    dir = "/tmp/kiln-" + std::to_string(::getuid());
  }
  return safe_folder(dir) ? dir : "";
}

void place_pocl_cache() {
  if (std::getenv("POCL_CACHE_DIR")) return;
  std::string dir = kiln_cache_dir();
  if (dir.empty()) return;
  dir += "/pocl";
  if (safe_folder(dir)) ::setenv("POCL_CACHE_DIR", dir.c_str(), 0);
}

std::string program_cache_path(const ClDevice& dev, const std::string& source) {
  std::string dir = kiln_cache_dir();
  if (dir.empty()) return "";
  dir += "/opencl";
  if (!safe_folder(dir)) return "";
  Header h = key_of(dev, source);
  char name[48];
  std::snprintf(name, sizeof name, "/%016llx.clbin",
                static_cast<unsigned long long>(h.source_hash ^ (h.identity_hash * 31)));
  return dir + name;
}

BuiltProgram build_program(ClDevice& dev, const std::string& source, const std::string& name) {
  std::string path = program_cache_path(dev, source);
  Header key = key_of(dev, source);
  if (!path.empty()) {
    std::vector<unsigned char> bin = read_entry(path, key);
    if (!bin.empty())
      if (cl_program p = from_binary(dev, bin)) {
        logging::debug("opencl: kernel ", name, " on ", dev.label(), " loaded from ", path);
        return {p, true};
      }
  }
  const char* src = source.c_str();
  cl_int err = CL_SUCCESS;
  cl_program p = clCreateProgramWithSource(dev.context, 1, &src, nullptr, &err);
  cl_check(err, "clCreateProgramWithSource");
  err = clBuildProgram(p, 1, &dev.id, dev.build_options().c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log = program_build_log(dev.id, p);
    clReleaseProgram(p);
    throw_error("opencl: kernel ", name, " failed to build on ", dev.label(), ": ",
                cl_error_name(err), "\nbuild log:\n", log, "\nsource:\n", source);
  }
  if (logging::enabled(logging::Level::debug)) {
    std::string log = program_build_log(dev.id, p);
    logging::debug("opencl: built kernel ", name, " on ", dev.label(), " (", dev.build_options(),
                   ")", log.empty() ? std::string(", empty build log") : ", build log:\n" + log);
  }
  if (!path.empty()) {
    std::vector<unsigned char> bin = program_binary(dev, p);
    if (!bin.empty()) write_entry(path, key, bin);
  }
  return {p, false};
}

}  // namespace kiln::opencl
