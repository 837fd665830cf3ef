// Test doubles for the backend interface. MirrorBackend runs the reference interpreter under
// another name, with memory it declares non-host (so plans must insert copies), optionally with
// asynchronous queues (work finishes on a helper thread and completes an Event, like a GPU
// queue), and optionally failing to build kernels whose name contains a given string.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "backends/backend.h"
#include "backends/host_event.h"
#include "backends/reference/reference.h"
#include "backends/registry.h"
#include "graph/error.h"

namespace kiln::test {

using ManualEvent = HostEvent;  // completed by the test or a Worker

// Runs submitted closures in order on one thread: a stand-in for a device queue.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void submit(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      work_.push_back(std::move(f));
    }
    cv_.notify_all();
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !work_.empty(); });
        if (work_.empty()) return;
        f = std::move(work_.front());
        work_.pop_front();
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> work_;
  bool stop_ = false;
  std::thread thread_;
};

// Device memory of the mirror: not addressable from the host (like a GPU buffer), so other
// backends reach it only through read/write and plans must copy.
class MirrorBuffer : public Buffer {
 public:
  MirrorBuffer(size_t bytes, Device d) : inner(std::make_shared<HostBuffer>(bytes, d)) {}
  size_t bytes() const override { return inner->bytes(); }
  Device device() const override { return inner->device(); }
  void read(void* dst, size_t offset, size_t n) const override { inner->read(dst, offset, n); }
  void write(const void* src, size_t offset, size_t n) override { inner->write(src, offset, n); }
  std::shared_ptr<HostBuffer> inner;
};

inline Buffer* unwrap(Buffer* b) {
  auto* m = dynamic_cast<MirrorBuffer*>(b);
  if (!m)
    throw_error("mirror backend: a kernel got a buffer of another device (", b->device(), ")");
  return m->inner.get();
}

class MirrorBackend : public Backend {
 public:
  MirrorBackend(std::string name, bool async, std::string fail_kernels = "")
      : name_(std::move(name)),
        async_(async),
        fail_(std::move(fail_kernels)),
        ref_(make_reference_backend()) {}

  std::string name() const override { return name_; }
  std::vector<DeviceInfo> devices() override {
    return {DeviceInfo{Device{name_, 0}, "test mirror of the reference backend", true, ""}};
  }
  bool uses_host_memory() const override { return false; }
  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    return std::make_shared<MirrorBuffer>(bytes, Device{name_, device});
  }
  std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) override {
    if (!fail_.empty() && k.name.find(fail_) != std::string::npos)
      throw_error("kernel ", k.name, " failed to build on ", name_, " (test double)");
    {
      std::lock_guard<std::mutex> lock(mu_);
      hashes_.insert(k.hash());
    }
    return ref_->compile(0, k);
  }
  std::unique_ptr<Queue> create_queue(int) override {
    return std::make_unique<MirrorQueue>(ref_->create_queue(0), async_);
  }
  // Distinct kernels (by content hash) this backend was asked to compile.
  size_t distinct_kernels() {
    std::lock_guard<std::mutex> lock(mu_);
    return hashes_.size();
  }

 private:
  class MirrorQueue : public Queue {
   public:
    MirrorQueue(std::unique_ptr<Queue> q, bool async) : q_(std::move(q)), async_(async) {}
    EventPtr enqueue_kernel(const CompiledKernel& k, const KernelArgs& args) override {
      KernelArgs inner = args;
      for (Buffer*& b : inner.buffers) b = unwrap(b);
      return run([this, &k, inner] { q_->enqueue_kernel(k, inner); });
    }
    // Into this device's memory, or out of it into host memory (backend.h).
    EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) override {
      Buffer* d = dynamic_cast<MirrorBuffer*>(&dst) || !dst.host_ptr() ? unwrap(&dst) : &dst;
      return run([&src, d, bytes] { src.read(d->host_ptr(), 0, bytes); });
    }
    EventPtr enqueue_matmul(const MatmulArgs& a) override {
      MatmulArgs inner = a;
      inner.a = unwrap(a.a), inner.b = unwrap(a.b), inner.c = unwrap(a.c);
      return run([this, inner] { q_->enqueue_matmul(inner); });
    }
    void finish() override {
      if (async_) {
        auto ev = std::make_shared<ManualEvent>();
        worker_.submit([ev] { ev->complete(nullptr); });
        ev->wait();
      }
    }
    bool runs_inline() const override { return !async_; }

   private:
    EventPtr run(std::function<void()> f) {
      if (!async_) {
        f();
        return nullptr;
      }
      auto ev = std::make_shared<ManualEvent>();
      worker_.submit([ev, f = std::move(f)] {
        try {
          f();
          ev->complete(nullptr);
        } catch (...) {
          ev->complete(std::current_exception());
        }
      });
      return ev;
    }
    std::unique_ptr<Queue> q_;
    bool async_;
    Worker worker_;
  };

  std::string name_;
  bool async_;
  std::string fail_;
  std::shared_ptr<Backend> ref_;
  std::mutex mu_;
  std::set<uint64_t> hashes_;
};

// Registered once per process: "mirror" (synchronous, non-host memory), "amirror" (asynchronous
// queues), "broken" (fails to build kernels whose name contains erf).
inline void register_test_backends() {
  static bool done = [] {
    register_backend(std::make_shared<MirrorBackend>("mirror", false));
    register_backend(std::make_shared<MirrorBackend>("amirror", true));
    register_backend(std::make_shared<MirrorBackend>("broken", false, "erf"));
    return true;
  }();
  (void)done;
}

}  // namespace kiln::test
