// Process-lifetime state that is never destroyed. Work can still be running when `main`
// returns (a lane worker's job, a driver's completion callback), and static destructors run in
// reverse order of construction, so anything such work touches (lanes, pools, the JIT, the
// backend registry, caches) must outlive every destructor: it is built on first use in static
// storage and its destructor never runs. The memory stays reachable, so leak checkers are quiet.
#pragma once

#include <new>
#include <utility>

namespace kiln {

template <class T>
class Immortal {
 public:
  template <class... Args>
  explicit Immortal(Args&&... args) {
    ::new (static_cast<void*>(storage_)) T(std::forward<Args>(args)...);
  }
  Immortal(const Immortal&) = delete;
  Immortal& operator=(const Immortal&) = delete;

  T& get() { return *std::launder(reinterpret_cast<T*>(storage_)); }
  T* operator->() { return &get(); }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace kiln
