// A backend written as a plugin author writes one: only kiln.h and backends/extension.h. It
// registers through register_backend (as the built-ins do), shows up in devices(), and runs
// eager and compiled work. It forwards the work to the reference backend's device, reached
// through the same extension API, and counts what it was asked to do.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/extension.h"
#include "kiln.h"

namespace {

using namespace kiln;

struct Counts {
  std::atomic<int> compiles{0}, kernels{0}, allocations{0};
};

class CountingQueue : public Queue {
 public:
  CountingQueue(std::unique_ptr<Queue> inner, Counts& counts)
      : inner_(std::move(inner)), counts_(counts) {}
  EventPtr enqueue_kernel(const CompiledKernel& k, const KernelArgs& args) override {
    counts_.kernels++;
    return inner_->enqueue_kernel(k, args);
  }
  EventPtr enqueue_copy(Buffer& src, Buffer& dst, size_t bytes) override {
    return inner_->enqueue_copy(src, dst, bytes);
  }
  EventPtr enqueue_matmul(const MatmulArgs& args) override { return inner_->enqueue_matmul(args); }
  void finish() override { inner_->finish(); }
  bool runs_inline() const override { return inner_->runs_inline(); }

 private:
  std::unique_ptr<Queue> inner_;
  Counts& counts_;
};

class PluginBackend : public Backend {
 public:
  PluginBackend(std::string name, Counts& counts)
      : name_(std::move(name)), counts_(counts), inner_(backend_for(device("reference"))) {}
  std::string name() const override { return name_; }
  std::vector<DeviceInfo> devices() override {
    return {DeviceInfo{Device{name_, 0}, "a test plugin over the reference interpreter", true, ""}};
  }
  bool uses_host_memory() const override { return true; }
  std::shared_ptr<Buffer> allocate(int, size_t bytes) override {
    counts_.allocations++;
    return inner_.allocate(0, bytes);
  }
  std::shared_ptr<const CompiledKernel> compile(int, const Kernel& k) override {
    counts_.compiles++;
    k.validate();  // the Kernel IR API is part of the extension header
    return inner_.compile(0, k);
  }
  std::unique_ptr<Queue> create_queue(int) override {
    return std::make_unique<CountingQueue>(inner_.create_queue(0), counts_);
  }

 private:
  std::string name_;
  Counts& counts_;
  Backend& inner_;
};

Counts& plugin_counts() {
  static Counts counts;
  static bool registered =
      (register_backend(std::make_shared<PluginBackend>("plugin", counts)), true);
  (void)registered;
  return counts;
}

TEST(PluginBackend, RegistersAndIsListed) {
  plugin_counts();
  bool listed = false;
  for (const DeviceInfo& d : devices())
    if (d.device == Device{"plugin", 0}) listed = d.available;
  EXPECT_TRUE(listed);
  EXPECT_EQ(device("plugin:0"), (Device{"plugin", 0}));
}

TEST(PluginBackend, RunsEagerAndCompiledWork) {
  Counts& c = plugin_counts();
  int kernels = c.kernels;
  StreamScope scope(device("plugin"));  // ops without a stream argument run on the caller's
  Array x = arange(8, float32);
  Array y = exp(x) * 2.0f + 1.0f;
  EXPECT_EQ(y.device(), device("plugin"));
  std::vector<float> v = y.to_vector<float>();
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(v[i], std::exp(float(i)) * 2 + 1, 1e-3 * v[i]);
  EXPECT_GT(c.kernels, kernels);

  auto f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{sum(tanh(in[0]) * in[0], -1)};
  });
  int compiles = c.compiles;
  Array r = f({reshape(arange(6, float32), {2, 3})})[0];
  EXPECT_EQ(r.device(), device("plugin"));
  EXPECT_NEAR(r.to_vector<float>()[1],
              3 * std::tanh(3.0f) + 4 * std::tanh(4.0f) + 5 * std::tanh(5.0f), 1e-4);
  EXPECT_GT(c.compiles, compiles);
}

TEST(PluginBackend, BuiltinsShareTheRegistrationPath) {
  plugin_counts();
  // The built-ins were registered with register_backend: their names are taken like a plugin's.
  for (const char* taken : {"reference", "plugin"}) {
    try {
      register_backend(std::make_shared<PluginBackend>(taken, plugin_counts()));
      ADD_FAILURE() << "registering '" << taken << "' twice was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
    }
  }
  for (const char* bad : {"", "a:b"}) {
    try {
      register_backend(std::make_shared<PluginBackend>(bad, plugin_counts()));
      ADD_FAILURE() << "the name '" << bad << "' was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("invalid backend name"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(register_backend(nullptr), Error);
}

}  // namespace
