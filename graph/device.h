// Devices, streams and placement as the graph layer sees them: plain values plus the calling
// thread's defaults. Which backends exist is the backends layer's business; it installs a checker
// here (set_device_checker) so that device("foo") can be rejected with the list of valid names.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <variant>

namespace kiln {

struct Device {
  std::string backend = "cpu";
  int index = 0;
  bool operator==(const Device& o) const { return backend == o.backend && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool operator<(const Device& o) const {
    return backend != o.backend ? backend < o.backend : index < o.index;
  }
  std::string str() const;  // "opencl:0"
};
std::ostream& operator<<(std::ostream& os, const Device& d);

// An ordered lane of work on one device. Index 0 is the device's default stream.
struct Stream {
  int index = 0;
  Device device;
  bool operator==(const Stream& o) const { return index == o.index && device == o.device; }
  bool operator!=(const Stream& o) const { return !(*this == o); }
  bool operator<(const Stream& o) const {
    return device != o.device ? device < o.device : index < o.index;
  }
  std::string str() const;  // "stream 2 on opencl:0"
};
std::ostream& operator<<(std::ostream& os, const Stream& s);

// "cpu", "opencl:1": checked against the registered backends; raises kiln::Error naming the valid
// devices when unknown or unavailable.
Device device(const std::string& spec);

Device default_device();
void set_default_device(const Device& d);

Stream default_stream(const Device& d);
Stream new_stream(const Device& d);
void synchronize(const Stream& s);  // waits for all work submitted to `s`
void synchronize();                 // the default stream of the default device

// The last argument of every op, as in MLX: nothing (the caller's default), a stream or a device.
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;

// How an op's stream was chosen. A compiled function keeps Explicit and Placement and resolves
// Default again at every call; that is what keeps streams from freezing at the first trace.
enum class StreamOrigin { Default, Explicit, Placement };

struct ResolvedStream {
  Stream stream;
  StreamOrigin origin = StreamOrigin::Default;
};

// Resolves an op's StreamOrDevice against the calling thread's scopes.
ResolvedStream resolve_stream(const StreamOrDevice& s);

// The calling thread's current default stream: innermost StreamScope, else the innermost
// PlacementScope's device's default stream, else the default device's default stream.
Stream current_stream();

// RAII: sets the calling thread's default stream, like MLX's `with mx.stream(s)`.
class StreamScope {
 public:
  explicit StreamScope(const Stream& s);
  explicit StreamScope(const Device& d) : StreamScope(default_stream(d)) {}
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;
};

// RAII: pins the ops created inside to a device (JAX's compute_on). Unlike StreamScope, the pin
// is recorded on every op, so a compiled function keeps it on every call and through AOT.
class PlacementScope {
 public:
  explicit PlacementScope(const Device& d);
  ~PlacementScope();
  PlacementScope(const PlacementScope&) = delete;
  PlacementScope& operator=(const PlacementScope&) = delete;
};

std::optional<Device> current_placement();

// Wraps `f` so that every call runs under PlacementScope(d).
template <typename F>
auto compute_on(Device d, F f) {
  return [d = std::move(d), f = std::move(f)](auto&&... args) {
    PlacementScope scope(d);
    return f(std::forward<decltype(args)>(args)...);
  };
}

// Hooks installed by higher layers (graph cannot include them).
using DeviceChecker = void (*)(const Device&);       // throws kiln::Error if unusable
using StreamSynchronizer = void (*)(const Stream&);  // waits for a stream's work
void set_device_checker(DeviceChecker f);
void set_stream_synchronizer(StreamSynchronizer f);
void check_device(const Device& d);
// check_device, and that `s` is a device's default stream or was made by new_stream.
void check_stream(const Stream& s);

}  // namespace kiln
