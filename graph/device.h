// Devices, streams and placement as users see them: plain values plus the calling thread's
// defaults. How ops resolve their stream, and the hooks higher layers install (device checks,
// synchronisation), are the library's own: graph/device_hooks.h.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <variant>

namespace kiln {

// A device, optionally on another rank of the world group: "rank1/cpu" is rank 1's cpu. Every
// rank runs the same program (SPMD); ops placed on rank r (compute_on) run on rank r only, and
// values cross ranks as messages (DESIGN.md, "Placement on ranks"). rank -1, the default: the
// device of whichever rank runs the op, so every rank runs it.
struct Device {
  std::string backend = "cpu";
  int index = 0;
  int rank = -1;
  bool operator==(const Device& o) const {
    return backend == o.backend && index == o.index && rank == o.rank;
  }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool operator<(const Device& o) const {
    if (rank != o.rank) return rank < o.rank;
    return backend != o.backend ? backend < o.backend : index < o.index;
  }
  std::string str() const;                                     // "opencl:0", "rank1/cpu:0"
  Device local() const { return Device{backend, index, -1}; }  // the same device, any rank
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

// "cpu", "opencl:1", "rank1/cpu": checked against the registered backends (and a rank against
// the world group's size); raises kiln::Error naming the valid devices or ranks when unknown or
// unavailable.
Device device(const std::string& spec);

Device default_device();
void set_default_device(const Device& d);

// The calling thread's default stream on `d`: stream 0 unless set_default_stream chose another.
Stream default_stream(const Device& d);
// Makes `s` the calling thread's default stream on its device (MLX's set_default_stream; the
// default device stays). Other threads keep theirs.
void set_default_stream(const Stream& s);
// Every device's default stream on the calling thread back to stream 0.
void reset_default_streams();
Stream new_stream(const Device& d);
void synchronize(const Stream& s);  // waits for all work submitted to `s`
void synchronize();                 // the default stream of the default device

// The last argument of every op, as in MLX: nothing (the caller's default), a stream or a device.
using StreamOrDevice = std::variant<std::monostate, Stream, Device>;

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

}  // namespace kiln
