#include "backends/cpu/disk_cache.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "graph/hash.h"

namespace kiln::cpu {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '2'};

// Fixed-size part of an entry's header; followed by the env key bytes, the kernel's canonical
// text, then the object.
struct Header {
  char magic[8];
  uint64_t kernel_hash;
  uint64_t key_bytes;
  uint64_t kernel_bytes;
  uint64_t object_bytes;
  uint64_t checksum;  // over the key bytes, the kernel text and the object
};

// An entry of the writer's queue.
struct Queued {
  std::vector<char> object;
  std::string kernel;
};

}  // namespace

// Entries waiting to be written, by path (the folder is read when an entry is queued), and the
// thread writing them.
struct DiskCache::Writer {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<std::pair<uint64_t, std::string>> queue;  // kernel hash, path
  std::unordered_map<std::string, std::shared_ptr<const Queued>> pending;
  bool writing = false, stop = false;
  std::thread thread;
};

DiskCache::DiskCache(std::string env_key)
    : env_key_(std::move(env_key)),
      env_hash_(fnv1a(env_key_.data(), env_key_.size())),
      writer_(std::make_unique<Writer>()) {}

DiskCache::~DiskCache() {
  {
    std::lock_guard<std::mutex> lock(writer_->mu);
    writer_->stop = true;
  }
  writer_->wake.notify_all();
  if (writer_->thread.joinable()) writer_->thread.join();  // writes what is queued first
}

void DiskCache::store_later(uint64_t kernel_hash, std::vector<char> object, std::string kernel) {
  Writer& w = *writer_;
  std::string path = path_for(kernel_hash);
  if (path.empty()) return;
  std::lock_guard<std::mutex> lock(w.mu);
  w.pending[path] = std::make_shared<const Queued>(Queued{std::move(object), std::move(kernel)});
  w.queue.emplace_back(kernel_hash, std::move(path));
  if (!w.thread.joinable()) w.thread = std::thread([this] { write_queued(); });
  w.wake.notify_one();
}

void DiskCache::write_queued() {
  // Background work: at the lowest priority it takes no CPU time from compiles and kernels
  // when the cores are busy (on Linux a thread's nice value is its own).
  setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
  Writer& w = *writer_;
  std::unique_lock<std::mutex> lock(w.mu);
  for (;;) {
    w.wake.wait(lock, [&] { return w.stop || !w.queue.empty(); });
    if (w.queue.empty()) return;  // stopping, nothing left
    auto [hash, path] = std::move(w.queue.front());
    w.queue.pop_front();
    std::shared_ptr<const Queued> object = w.pending[path];
    w.writing = true;
    lock.unlock();
    write(hash, path, object->object, object->kernel);
    lock.lock();
    w.writing = false;
    if (w.pending[path] == object) w.pending.erase(path);  // unless queued again meanwhile
    if (w.queue.empty()) w.idle.notify_all();
  }
}

void DiskCache::flush() {
  Writer& w = *writer_;
  std::unique_lock<std::mutex> lock(w.mu);
  w.idle.wait(lock, [&] { return w.queue.empty() && !w.writing; });
}

namespace {

// Creates `dir` (and its parents) for this user only; objects loaded from it become code in
// this process, so it must be the user's own and writable by nobody else. Returns why not.
std::string make_private_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create it (" + ec.message() + ")";
  // Every folder from `dir` up to the first one root owns must be the user's; none on the way,
  // root's included, may be writable by others unless sticky (as /tmp is).
  struct stat st;
  for (std::filesystem::path p = dir; !p.empty(); p = p.parent_path()) {
    if (::lstat(p.c_str(), &st) != 0) return "cannot stat " + p.string();
    if (st.st_uid != ::geteuid() && st.st_uid != 0)
      return p.string() + " belongs to uid " + std::to_string(st.st_uid);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
      return p.string() + " is writable by other users";
    if (st.st_uid == 0 || p == p.root_path()) break;
  }
  return "";
}

}  // namespace

std::string DiskCache::directory() {
  std::string dir;
  if (const char* d = std::getenv("KILN_CACHE_DIR"); d && *d) {
    dir = std::string(d) + "/cpu";
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/kiln/cpu";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::string(home) + "/.cache/kiln/cpu";
  } else {  // no home: a folder of this user's own, never one shared with others
    dir = "/tmp/kiln-" + std::to_string(::geteuid()) + "/cpu";
    ::mkdir(("/tmp/kiln-" + std::to_string(::geteuid())).c_str(), 0700);
  }
  static std::mutex mu;
  static std::unordered_map<std::string, std::string> checked;  // dir -> why refused ("" = ok)
  std::lock_guard<std::mutex> lock(mu);
  auto it = checked.find(dir);
  if (it == checked.end()) {
    it = checked.emplace(dir, make_private_directory(dir)).first;
    if (!it->second.empty())
      std::fprintf(stderr,
                   "kiln: not using the kernel disk cache in %s: %s (set KILN_CACHE_DIR to a "
                   "folder of your own); kernels are compiled in memory only\n",
                   dir.c_str(), it->second.c_str());
  }
  return it->second.empty() ? dir : "";
}

std::string DiskCache::path_for(uint64_t kernel_hash) const {
  std::string dir = directory();
  if (dir.empty()) return "";  // refused: no disk cache
  return dir + "/" + hex64(kernel_hash) + "-" + hex64(env_hash_) + ".kobj";
}

DiskCache::Lookup DiskCache::load(uint64_t kernel_hash, const std::string& kernel) const {
  Lookup r;
  auto reject = [&](const char* why) {
    r.status = Status::Rejected;
    r.why = why;
    return r;
  };
  std::string path = path_for(kernel_hash);
  if (path.empty()) return r;
  {
    std::lock_guard<std::mutex> lock(writer_->mu);
    auto it = writer_->pending.find(path);
    if (it != writer_->pending.end()) {  // queued by this process: not on disk yet
      if (it->second->kernel != kernel) return reject("another kernel with the same hash");
      r.status = Status::Hit;
      r.object = it->second->object;
      return r;
    }
  }
  std::vector<char> bytes;
  try {  // a directory, a socket, a file that vanishes or will not read: a miss, never an error
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return r;
    if (!std::filesystem::is_regular_file(path, ec)) return reject("not a regular file");
    std::ifstream f(path, std::ios::binary);
    if (!f) return reject("unreadable");
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (f.bad()) return reject("unreadable");
  } catch (const std::exception&) {
    return reject("unreadable");
  }
  Header h;
  if (bytes.size() < sizeof h) return reject("truncated header");
  std::memcpy(&h, bytes.data(), sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return reject("wrong magic");
  if (h.kernel_hash != kernel_hash) return reject("kernel hash mismatch");
  size_t rest = bytes.size() - sizeof h;
  if (h.key_bytes != env_key_.size() || rest < h.key_bytes)
    return reject("environment key mismatch");
  const char* key = bytes.data() + sizeof h;
  if (std::memcmp(key, env_key_.data(), env_key_.size()) != 0)
    return reject("environment key mismatch");
  if (h.kernel_bytes > rest - h.key_bytes || h.object_bytes != rest - h.key_bytes - h.kernel_bytes)
    return reject("size mismatch");
  if (fnv1a(key, rest) != h.checksum) return reject("checksum mismatch");
  const char* text = key + h.key_bytes;
  if (std::string_view(text, h.kernel_bytes) != kernel)
    return reject("another kernel with the same hash");
  r.status = Status::Hit;
  const char* object = text + h.kernel_bytes;
  r.object.assign(object, object + h.object_bytes);
  return r;
}

bool DiskCache::store(uint64_t kernel_hash, const std::vector<char>& object,
                      const std::string& kernel) const {
  return write(kernel_hash, path_for(kernel_hash), object, kernel);
}

bool DiskCache::write(uint64_t kernel_hash, const std::string& path,
                      const std::vector<char>& object, const std::string& kernel) const {
  if (path.empty()) return false;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return false;
  std::vector<char> body(env_key_.begin(), env_key_.end());
  body.insert(body.end(), kernel.begin(), kernel.end());
  body.insert(body.end(), object.begin(), object.end());
  Header h;
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.kernel_hash = kernel_hash;
  h.key_bytes = env_key_.size();
  h.kernel_bytes = kernel.size();
  h.object_bytes = object.size();
  h.checksum = fnv1a(body.data(), body.size());
  // Write a private temporary and rename it over the entry: readers in other processes see
  // the old entry or the new one, never half of one.
  // Unique per process and per store: threads of one process may store at the same time.
  static std::atomic<uint64_t> serial{0};
  std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(serial++);
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
