// Memory bounds of the cpu backend: the in-memory kernel cache stays within its byte budget and
// evicted kernels come back correct; code a compiled kernel still holds is never freed under
// it; a dropped compiled function releases its plan, kernels and buffers; and RSS stays flat
// over many compile/call/drop cycles. (Part of test_cpu_backend: uses the JIT's own header.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backends/cpu/jit.h"
#include "backends/extension.h"
#include "graph/array_node.h"
#include "graph/env.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

// Every test here uses a private disk cache, removed at exit.
const std::string g_dir =
    (std::filesystem::temp_directory_path() / ("kiln_memory_test_" + std::to_string(::getpid())))
        .string();
struct RemoveDirAtExit {
  ~RemoveDirAtExit() {
    std::error_code ec;
    std::filesystem::remove_all(g_dir, ec);
  }
} g_remove_dir_at_exit;

// Points the disk cache at a private folder and sets the JIT's budget for one test; restores
// both after it (tests of one binary may share a process).
class BudgetScope {
 public:
  explicit BudgetScope(int64_t bytes) : before_(cpu::Jit::instance().stats().budget_bytes) {
    setenv("KILN_CACHE_DIR", g_dir.c_str(), 1);
    cpu::Jit::instance().set_cache_budget(bytes);
  }
  ~BudgetScope() { cpu::Jit::instance().set_cache_budget(before_); }

 private:
  int64_t before_;
};

// y = x * a + b over 256 floats; distinct (a, b) make distinct kernels (immediates are hashed).
Kernel affine_kernel(float a, float b) {
  Kernel k;
  k.name = "affine";
  k.domain = {Dim::constant(256)};
  k.buffers.push_back({float32, false, IndexMap{{Dim::constant(1)}, Dim::constant(0)}});
  k.buffers.push_back({float32, true, IndexMap{{Dim::constant(1)}, Dim::constant(0)}});
  auto push = [&](Value v) {
    k.body.push_back(v);
    return static_cast<int>(k.body.size()) - 1;
  };
  Value load;
  load.kind = ValueKind::Load, load.dtype = float32, load.buffer = 0;
  int x = push(load);
  auto constant = [&](float c) {
    Value v;
    v.kind = ValueKind::Constant, v.dtype = float32, v.constant = Scalar::of(c);
    return push(v);
  };
  auto binary = [&](BinaryOp op, int l, int r) {
    Value v;
    v.kind = ValueKind::Binary, v.binary = op, v.dtype = float32, v.a = l, v.b = r;
    return push(v);
  };
  int y = binary(BinaryOp::Add, binary(BinaryOp::Multiply, x, constant(a)), constant(b));
  k.stores.push_back({1, y});
  return k;
}

struct AffineRun {
  std::shared_ptr<Buffer> in, out;
  std::unique_ptr<Queue> queue = backend_for(device("cpu")).create_queue(0);
  AffineRun() {
    Backend& be = backend_for(device("cpu"));
    in = be.allocate(0, 256 * 4);
    out = be.allocate(0, 256 * 4);
    auto* x = static_cast<float*>(in->host_ptr());
    for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i) - 100.0f;
  }
  // Runs `ck` and checks every element of x * a + b (exact: one rounding per op, as in C++).
  void expect(const CompiledKernel& ck, float a, float b) {
    queue->enqueue_kernel(ck, KernelArgs{{in.get(), out.get()}, {}});
    auto* x = static_cast<const float*>(in->host_ptr());
    auto* y = static_cast<const float*>(out->host_ptr());
    for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], x[i] * a + b) << "element " << i;
  }
};

float a_of(int i) { return 1.0f + 0.125f * static_cast<float>(i); }
float b_of(int i) { return static_cast<float>(::getpid() % 1000) + 0.5f * static_cast<float>(i); }

TEST(KernelCache, TinyBudgetStaysBoundedAndEvictedKernelsComeBack) {
  cpu::Jit& jit = cpu::Jit::instance();
  Backend& be = backend_for(device("cpu"));
  AffineRun run;
  BudgetScope scope(int64_t{1} << 30);
  // Size one kernel (alone in the cache), then allow about three.
  jit.clear_memory_cache();
  be.compile(0, affine_kernel(a_of(0), b_of(0)));
  int64_t one = jit.stats().cached_bytes;
  ASSERT_GT(one, 0);
  int64_t budget = 3 * one + one / 2;
  jit.set_cache_budget(budget);

  cpu::JitStats s0 = jit.stats();
  // Kernels other tests of this process left in use (the eager kernel cache holds some).
  int64_t held_elsewhere = s0.loaded_kernels - s0.cached_kernels;
  const int kKernels = 24;
  for (int i = 0; i < kKernels; ++i) {
    run.expect(*be.compile(0, affine_kernel(a_of(i), b_of(i))), a_of(i), b_of(i));
    cpu::JitStats s = jit.stats();
    EXPECT_LE(s.cached_bytes, budget);
    EXPECT_LE(s.cached_kernels, 4);
    // Nothing else holds these kernels: evicted ones were freed, not merely forgotten.
    EXPECT_EQ(s.loaded_kernels - s.cached_kernels, held_elsewhere);
  }
  cpu::JitStats s1 = jit.stats();
  EXPECT_GE(s1.evicted - s0.evicted, kKernels - 4);
  EXPECT_GE(s1.freed - s0.freed, kKernels - 4);

  // The first kernels were evicted: they come back from the disk cache, without LLVM.
  run.expect(*be.compile(0, affine_kernel(a_of(1), b_of(1))), a_of(1), b_of(1));
  cpu::JitStats s2 = jit.stats();
  EXPECT_EQ(s2.disk_hits, s1.disk_hits + 1);
  EXPECT_EQ(s2.compiled, s1.compiled);

  // With the disk cache gone too, LLVM compiles it again, and it still computes the same.
  jit.flush_disk_cache();
  std::filesystem::remove_all(g_dir);
  jit.clear_memory_cache();
  run.expect(*be.compile(0, affine_kernel(a_of(2), b_of(2))), a_of(2), b_of(2));
  EXPECT_EQ(jit.stats().compiled, s2.compiled + 1);
  EXPECT_LE(jit.stats().cached_bytes, budget);
}

TEST(KernelCache, KernelInUseIsNeverFreed) {
  cpu::Jit& jit = cpu::Jit::instance();
  Backend& be = backend_for(device("cpu"));
  AffineRun run;
  BudgetScope scope(0);  // nothing stays cached: every kernel lives only as long as its users
  std::shared_ptr<const CompiledKernel> held = be.compile(0, affine_kernel(-3.0f, b_of(100)));
  cpu::JitStats s0 = jit.stats();
  EXPECT_EQ(s0.cached_kernels, 0);
  EXPECT_GE(s0.loaded_kernels, 1);
  // Churn: load and drop kernels, each freed as soon as its handle goes.
  for (int i = 0; i < 12; ++i)
    run.expect(*be.compile(0, affine_kernel(a_of(i), b_of(200 + i))), a_of(i), b_of(200 + i));
  cpu::JitStats s1 = jit.stats();
  EXPECT_EQ(s1.freed - s0.freed, 12);
  EXPECT_EQ(s1.loaded_kernels, s0.loaded_kernels);
  run.expect(*held, -3.0f, b_of(100));  // its code was never unmapped

  // Asking for it again shares the loaded code: no disk load, no LLVM.
  auto again = be.compile(0, affine_kernel(-3.0f, b_of(100)));
  cpu::JitStats s2 = jit.stats();
  EXPECT_EQ(s2.memory_hits, s1.memory_hits + 1);
  EXPECT_EQ(s2.disk_hits, s1.disk_hits);
  EXPECT_EQ(s2.compiled, s1.compiled);
  EXPECT_EQ(s2.loaded_kernels, s1.loaded_kernels);
  held.reset();
  run.expect(*again, -3.0f, b_of(100));
  EXPECT_EQ(jit.stats().freed, s2.freed);
  again.reset();  // the last user: now it goes
  EXPECT_EQ(jit.stats().freed, s2.freed + 1);
  EXPECT_EQ(jit.stats().loaded_kernels, s2.loaded_kernels - 1);
}

TEST(KernelCache, ConcurrentRequestsBuildOnce) {
  cpu::Jit& jit = cpu::Jit::instance();
  Backend& be = backend_for(device("cpu"));
  BudgetScope scope(int64_t{1} << 30);
  jit.flush_disk_cache();
  std::filesystem::remove_all(g_dir);
  cpu::JitStats s0 = jit.stats();
  // 4 threads x 6 kernels, every kernel asked for by every thread at about the same time.
  std::vector<std::shared_ptr<const CompiledKernel>> got(24);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) got[t * 6 + i] = be.compile(0, affine_kernel(a_of(i), -7.0f));
    });
  for (auto& th : threads) th.join();
  cpu::JitStats s1 = jit.stats();
  EXPECT_EQ(s1.compiled + s1.disk_hits - s0.compiled - s0.disk_hits, 6);
  EXPECT_EQ(s1.memory_hits - s0.memory_hits, 18);
  AffineRun run;
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 6; ++i) run.expect(*got[t * 6 + i], a_of(i), -7.0f);
}

// Sizes and counts from the environment (graph/env.h; the pools' KILN_*_POOL_BYTES): digits
// alone, else kiln::Error naming the variable and its value.
TEST(Environment, CountsAreDigitsOrRaise) {
  const char* name = "KILN_TEST_ENV_COUNT";
  unsetenv(name);
  EXPECT_FALSE(env_count(name, "a test count").has_value());
  setenv(name, "", 1);
  EXPECT_FALSE(env_count(name, "a test count").has_value());
  setenv(name, "0", 1);
  EXPECT_EQ(env_count(name, "a test count"), 0u);
  setenv(name, "536870912", 1);
  EXPECT_EQ(env_count(name, "a test count"), 536870912u);
  for (const char* bad : {"lots", "-1", "1e9", "512M", " 5", "5 ", "1234567890123456789"}) {
    setenv(name, bad, 1);
    test::expect_error([&] { env_count(name, "a test count"); },
                       {std::string(name) + "='" + bad + "'", "a test count", "whole number"});
  }
  unsetenv(name);
}

TEST(KernelCache, BadBudgetInTheEnvironmentRaises) {
  setenv("KILN_KERNEL_CACHE_MB", "lots", 1);
  try {
    cpu::kernel_cache_budget_from_env();
    ADD_FAILURE() << "no error for KILN_KERNEL_CACHE_MB=lots";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KILN_KERNEL_CACHE_MB='lots'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("non-negative integer"), std::string::npos);
  }
  setenv("KILN_KERNEL_CACHE_MB", "3", 1);
  EXPECT_EQ(cpu::kernel_cache_budget_from_env(), 3 << 20);
  unsetenv("KILN_KERNEL_CACHE_MB");
  EXPECT_EQ(cpu::kernel_cache_budget_from_env(), cpu::kDefaultKernelCacheMB << 20);
}

// ---- compiled functions -------------------------------------------------------------------

TEST(CompiledMemory, DroppedFunctionFreesItsPlanKernelsAndBuffers) {
  cpu::Jit& jit = cpu::Jit::instance();
  BudgetScope scope(0);  // kernels live only as long as the plans holding them
  StreamScope stream(device("cpu"));
  Array x = array(std::vector<float>{1, 2, 3, 4}, {4});
  int64_t loaded_before = jit.stats().loaded_kernels;
  std::weak_ptr<Buffer> captured, output;
  {
    auto f = [&] {  // the function's copy of c is the only one left
      Array c = array(std::vector<float>{10, 20, 30, 40}, {4});
      captured = array_buffer(c);
      return compile(
          [c](const std::vector<Array>& in) { return std::vector<Array>{tanh(in[0]) * c + c}; });
    }();
    Array y = f({x})[0];
    eval(y);
    output = array_buffer(y);
    std::vector<float> want = {10 * std::tanh(1.0f) + 10, 20 * std::tanh(2.0f) + 20,
                               30 * std::tanh(3.0f) + 30, 40 * std::tanh(4.0f) + 40};
    std::vector<float> got = y.to_vector<float>();
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1e-4f * std::abs(want[i]));
    EXPECT_GT(jit.stats().loaded_kernels, loaded_before) << "the plan holds its kernel";
    EXPECT_FALSE(captured.expired());
  }
  EXPECT_TRUE(captured.expired()) << "the captured constant outlived its function";
  EXPECT_TRUE(output.expired()) << "the output buffer outlived its array";
  EXPECT_EQ(jit.stats().loaded_kernels, loaded_before) << "the plan's kernel outlived it";
}

size_t resident_bytes() { return test::memory_in_use_bytes(); }  // live heap under ASan

// kiln::compile of a lambda capturing a fresh 4096-float array; call once; drop.
void compile_call_drop(int i) {
  Array c = array(std::vector<float>(4096, static_cast<float>(i % 7)), {4096});
  auto f =
      compile([c](const std::vector<Array>& in) { return std::vector<Array>{in[0] * c + 1.0f}; });
  Array x = ones({4096});
  Array y = f({x})[0];
  eval(y);
  if (y.to_vector<float>()[4095] != static_cast<float>(i % 7) + 1.0f)
    throw std::runtime_error("wrong result in cycle " + std::to_string(i));
}

TEST(CompiledMemory, RssStaysFlatOverCompileCallDropCycles) {
  StreamScope stream(device("cpu"));
  for (int i = 0; i < 100; ++i) compile_call_drop(i);  // warm: JIT, pools, allocator arenas
  size_t before = resident_bytes();
  const int kCycles = 1000;
  for (int i = 0; i < kCycles; ++i) compile_call_drop(i);
  size_t after = resident_bytes();
  double grown_mb = (static_cast<double>(after) - static_cast<double>(before)) / (1 << 20);
  // Leaking the captured array alone would add 16 KB a cycle: 16 MB over 1000 cycles.
  RecordProperty("rss_growth_kib", static_cast<int>(grown_mb * 1024));
  EXPECT_LT(grown_mb, 8.0) << "RSS " << before / 1024 << " KiB -> " << after / 1024 << " KiB";
}

}  // namespace
}  // namespace kiln
