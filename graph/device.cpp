#include "graph/device.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "graph/device_hooks.h"
#include "graph/error.h"
#include "graph/trace_state.h"

namespace kiln {

std::string Device::str() const {
  std::string d = backend + ":" + std::to_string(index);
  return rank < 0 ? d : "rank" + std::to_string(rank) + "/" + d;
}
std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }
std::string Stream::str() const {
  return "stream " + std::to_string(index) + " on " + device.str();
}
std::ostream& operator<<(std::ostream& os, const Stream& s) { return os << s.str(); }

namespace {

std::atomic<DeviceChecker> g_checker{nullptr};
std::atomic<StreamSynchronizer> g_synchronizer{nullptr};
std::atomic<RankChecker> g_rank_checker{nullptr};

struct Defaults {
  std::mutex mu;
  std::optional<Device> device;
  std::map<Device, int> stream_counts;
};
Defaults& defaults() {
  static Defaults d;
  return d;
}

// One entry per live StreamScope/PlacementScope on this thread, innermost last.
struct ScopeEntry {
  Stream stream;
  bool placement;
};
thread_local std::vector<ScopeEntry> t_scopes;
// set_default_stream's choices on this thread, per device (streams are per-thread defaults, as
// MLX's are: another thread still starts on each device's stream 0).
thread_local std::map<Device, int> t_default_streams;

// A rank or device index written in `spec`: a non-negative integer (bounded, so no overflow).
int parse_index(const std::string& idx, const std::string& spec, const char* what,
                const char* example) {
  char* end = nullptr;
  long v = idx.empty() ? -1 : std::strtol(idx.c_str(), &end, 10);
  if (idx.empty() || *end != '\0' || v < 0 || v > 1 << 20)
    throw_error("device: '", spec, "' has a bad ", what, " '", idx,
                "' (expected a non-negative integer, e.g. \"", example, "\")");
  return static_cast<int>(v);
}

// "rank3/" in front of a device: the rank's index, removed from `spec`.
int parse_rank(std::string& spec) {
  if (spec.rfind("rank", 0) != 0) return -1;
  auto slash = spec.find('/');
  if (slash == std::string::npos) return -1;
  int rank = parse_index(spec.substr(4, slash - 4), spec, "rank", "rank1/cpu");
  spec = spec.substr(slash + 1);
  return rank;
}

Device parse_device(std::string spec) {
  const std::string whole = spec;  // errors name what the user wrote, rank included
  Device d;
  d.rank = parse_rank(spec);
  auto colon = spec.find(':');
  d.backend = spec.substr(0, colon);
  if (d.backend.empty())
    throw_error("device: '", whole,
                "' has no backend name (expected e.g. \"cpu\" or \"opencl:0\")");
  if (colon != std::string::npos)
    d.index = parse_index(spec.substr(colon + 1), whole, "index", "opencl:0");
  return d;
}

}  // namespace

void set_device_checker(DeviceChecker f) { g_checker.store(f); }
void set_stream_synchronizer(StreamSynchronizer f) { g_synchronizer.store(f); }
void set_rank_checker(RankChecker f) { g_rank_checker.store(f); }

void check_device(const Device& d) {
  if (auto f = g_checker.load()) f(d.local());
  if (d.rank < 0) return;
  if (auto f = g_rank_checker.load()) return f(d);
  throw_error("device ", d, ": this program has no distributed layer to place work on ranks");
}

Device device(const std::string& spec) {
  Device d = parse_device(spec);
  check_device(d);
  return d;
}

namespace {
// Published defaults are immutable and never freed, so readers need no lock (a handful of
// set_default_device calls per process at most).
std::atomic<const Device*> g_default{nullptr};

const Device* publish(Device d) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<Device>> all;
  std::lock_guard<std::mutex> lock(mu);
  all.push_back(std::make_unique<Device>(std::move(d)));
  return all.back().get();
}
}  // namespace

Device default_device() {
  if (const Device* d = g_default.load(std::memory_order_acquire)) return *d;
  auto& s = defaults();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.device) {
    const char* env = std::getenv("KILN_DEVICE");
    if (env && *env) {
      try {
        s.device = device(env);
      } catch (const Error& e) {
        throw_error("KILN_DEVICE='", env, "' is not a usable device: ", e.what());
      }
    } else {
      // Kiln's default is the LLVM-JIT cpu backend; a build without it uses the interpreter.
      try {
        s.device = device("cpu");
      } catch (const Error&) {
        s.device = Device{"reference", 0};
      }
    }
  }
  if (!g_default.load()) g_default.store(publish(*s.device), std::memory_order_release);
  return *s.device;
}

void set_default_device(const Device& d) {
  check_device(d);
  auto& s = defaults();
  std::lock_guard<std::mutex> lock(s.mu);
  s.device = d;
  g_default.store(publish(d), std::memory_order_release);
}

Stream default_stream(const Device& d) {
  check_device(d);
  auto it = t_default_streams.find(d);
  return Stream{it == t_default_streams.end() ? 0 : it->second, d};
}

void set_default_stream(const Stream& s) {
  check_stream(s);
  t_default_streams[s.device] = s.index;
}

void reset_default_streams() { t_default_streams.clear(); }

Stream new_stream(const Device& d) {
  check_device(d);
  auto& s = defaults();
  std::lock_guard<std::mutex> lock(s.mu);
  return Stream{++s.stream_counts[d], d};
}

void check_stream(const Stream& s) {
  check_device(s.device);
  if (s.index == 0) return;
  auto& d = defaults();
  std::lock_guard<std::mutex> lock(d.mu);
  auto it = d.stream_counts.find(s.device);
  int count = it == d.stream_counts.end() ? 0 : it->second;
  if (s.index < 0 || s.index > count)
    throw_error(s, " does not exist: ", s.device, " has streams 0 to ", count,
                " (make streams with new_stream(device); 0 is default_stream(device))");
}

void synchronize(const Stream& s) {
  check_stream(s);
  if (auto f = g_synchronizer.load()) f(s);
}
void synchronize() { synchronize(default_stream(default_device())); }

Stream current_stream() {
  if (!t_scopes.empty()) return t_scopes.back().stream;
  return default_stream(default_device());
}

std::optional<Device> current_placement() {
  for (auto it = t_scopes.rbegin(); it != t_scopes.rend(); ++it)
    if (it->placement) return it->stream.device;
  return std::nullopt;
}

ResolvedStream resolve_stream(const StreamOrDevice& s) {
  if (auto* st = std::get_if<Stream>(&s)) {
    check_stream(*st);
    return {*st, StreamOrigin::Explicit};
  }
  if (auto* d = std::get_if<Device>(&s)) return {default_stream(*d), StreamOrigin::Explicit};
  if (t_scopes.empty()) return {default_stream(default_device()), StreamOrigin::Default};
  // Scopes opened outside the function being traced are the caller's: the compiled function
  // must resolve them again at each call, so they count as Default.
  const ScopeEntry& e = t_scopes.back();
  if (static_cast<int>(t_scopes.size()) <= trace_scope_base())
    return {e.stream, StreamOrigin::Default};
  return {e.stream, e.placement ? StreamOrigin::Placement : StreamOrigin::Explicit};
}

int scope_depth() { return static_cast<int>(t_scopes.size()); }

StreamScope::StreamScope(const Stream& s) {
  check_stream(s);
  t_scopes.push_back({s, false});
}
StreamScope::~StreamScope() { t_scopes.pop_back(); }

PlacementScope::PlacementScope(const Device& d) { t_scopes.push_back({default_stream(d), true}); }
PlacementScope::~PlacementScope() { t_scopes.pop_back(); }

}  // namespace kiln
