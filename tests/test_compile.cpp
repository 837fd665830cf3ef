// kiln::compile: when it traces, what it caches, how it fuses, streams resolved at call time,
// captured state, nesting, purity errors and memory.
#include <oneapi/tbb/info.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "compile/lower.h"
#include "compile/passes.h"
#include "test_backends.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::expect_near;

namespace {

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

// Kernel (not copy) tasks recorded while running f.
template <typename F>
std::vector<TaskEvent> kernels_of(F&& f) {
  ProfileScope prof;
  f();
  std::vector<TaskEvent> out;
  for (const TaskEvent& e : prof.events())
    if (e.name != "copy") out.push_back(e);
  return out;
}

Device ref() { return device("reference"); }

// A compiled function, the kernels it runs on the reference backend (by name, in any order:
// independent ones may run either way; "" is a kernel of any name) and its values on every
// backend against eager evaluation.
struct PlanCase {
  const char* name;
  Fn fn;
  std::vector<std::string> kernels;
};

void expect_kernels_and_values(const PlanCase& c, const std::vector<Array>& args, double tol) {
  SCOPED_TRACE(c.name);
  auto f = compile(c.fn);
  std::vector<TaskEvent> ev;
  {
    StreamScope scope(ref());
    ev = kernels_of([&] { eval(f(args)); });
  }
  std::vector<std::string> ran;
  for (const TaskEvent& e : ev) ran.push_back(e.name);
  EXPECT_EQ(ran.size(), c.kernels.size());
  for (const std::string& want : c.kernels) {
    if (want.empty()) continue;
    auto it = std::find(ran.begin(), ran.end(), want);
    EXPECT_NE(it, ran.end()) << "no kernel " << want;
    if (it != ran.end()) ran.erase(it);
  }
  std::vector<Array> want = c.fn(args);
  for (const char* dev : {"reference", "cpu", "opencl", "vulkan"}) {
    if (!test::backend_available(dev)) continue;
    StreamScope scope(device(dev));
    std::vector<Array> got = f(args);
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].shape(), want[k].shape()) << dev;
      std::vector<float> g = got[k].to_vector<float>(), e = want[k].to_vector<float>();
      expect_near(g, std::vector<double>(e.begin(), e.end()), tol);
    }
  }
}

}  // namespace

TEST(Compile, TracesOncePerSignature) {
  int traces = 0;
  auto f = compile([&](const std::vector<Array>& in) {
    ++traces;
    return std::vector<Array>{exp(in[0]) + in[1]};
  });
  Array x = array<float>({0, 1}, {2}, ref()), y = array<float>({1, 1}, {2}, ref());
  StreamScope scope(ref());
  expect_near(f({x, y})[0].to_vector<float>(), {2, std::exp(1.0) + 1});
  f({x, y});
  f({y, x});
  EXPECT_EQ(traces, 1);
  f({astype(x, float64), y});  // dtype change
  EXPECT_EQ(traces, 2);
  f({array<float>({1, 2, 3}, {3}), array<float>({1, 2, 3}, {3})});  // shape change
  EXPECT_EQ(traces, 3);
  f({reshape(x, {1, 2}), y});  // rank change
  EXPECT_EQ(traces, 4);
  f({x, y});  // back to the first signature: cached
  EXPECT_EQ(traces, 4);
  EXPECT_EQ(f.cache_size(), 4u);
  auto g = compile([&](const std::vector<Array>& in) {
    ++traces;
    return std::vector<Array>{in[0] * 2.0f};
  });
  g({x});
  g({x});
  EXPECT_EQ(traces, 5);
}

TEST(Compile, StreamChangeNeverRetraces) {
  test::register_test_backends();
  int traces = 0;
  auto f = compile([&](const std::vector<Array>& in) {
    ++traces;
    return std::vector<Array>{tanh(in[0]) * 3.0f};
  });
  Array x = array<float>({0.5f, -1}, {2}, ref());
  std::vector<Stream> streams = {default_stream(ref()), new_stream(ref()),
                                 default_stream(device("mirror")), new_stream(device("amirror"))};
  for (const DeviceInfo& d : devices())  // and both streams of the cpu backend when built
    if (d.available && d.device.backend == "cpu") {
      streams.push_back(default_stream(d.device));
      streams.push_back(new_stream(d.device));
    }
  for (const Stream& s : streams) {
    StreamScope scope(s);
    auto events = kernels_of([&] {
      Array r = f({x})[0];
      EXPECT_EQ(r.stream(), s);
      expect_near(r.to_vector<float>(), {3 * std::tanh(0.5), 3 * std::tanh(-1.0)});
    });
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].stream, s) << "ran on " << events[0].stream << ", caller's is " << s;
  }
  EXPECT_EQ(traces, 1);
}

TEST(Compile, ExplicitStreamsAndPlacementsInsideAreKept) {
  test::register_test_backends();
  Stream inner = new_stream(ref());
  Device mirror = device("mirror");
  auto f = compile([&](const std::vector<Array>& in) {
    Array a = exp(in[0], inner);                                               // explicit stream
    Array b = compute_on(mirror, [](const Array& v) { return v * 2.0f; })(a);  // placement
    Array c = b + 1.0f;                                                        // caller's stream
    return std::vector<Array>{c};
  });
  Array x = array<float>({0, 1}, {2}, ref());
  Stream caller = new_stream(ref());
  StreamScope scope(caller);
  auto events = kernels_of([&] {
    expect_near(f({x})[0].to_vector<float>(), {3, 2 * std::exp(1.0) + 1});
  });
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].stream, inner);
  EXPECT_EQ(events[1].stream, default_stream(mirror));
  EXPECT_EQ(events[2].stream, caller);
}

TEST(Compile, PlacementAroundACompiledFunctionFollowsTheCall) {
  test::register_test_backends();
  int traces = 0;
  auto f = compile([&](const std::vector<Array>& in) {
    ++traces;
    return std::vector<Array>{sqrt(in[0])};
  });
  Array x = array<float>({4, 9}, {2}, ref());
  auto on_mirror = compute_on(device("mirror"), [&](const Array& a) { return f({a})[0]; });
  auto ev1 = kernels_of([&] { expect_near(on_mirror(x).to_vector<float>(), {2, 3}); });
  StreamScope scope(ref());
  auto ev2 = kernels_of([&] { expect_near(f({x})[0].to_vector<float>(), {2, 3}); });
  ASSERT_EQ(ev1.size(), 1u);
  ASSERT_EQ(ev2.size(), 1u);
  EXPECT_EQ(ev1[0].device, device("mirror"));
  EXPECT_EQ(ev2[0].device, ref());
  EXPECT_EQ(traces, 1);
}

TEST(Compile, FusionDecisions) {
  StreamScope scope(ref());
  Array x = random::normal({4, 8}, float32, random::key(1));
  eval(x);
  auto g = compile([](const std::vector<Array>& in) { return std::vector<Array>{gelu(in[0])}; });
  auto ev = kernels_of([&] { eval(g({x})[0]); });
  ASSERT_EQ(ev.size(), 1u) << "gelu should be one kernel";
  EXPECT_NE(ev[0].name.find("erf"), std::string::npos) << ev[0].name;
  auto want_g = gelu(x).to_vector<float>();
  expect_near(g({x})[0].to_vector<float>(), std::vector<double>(want_g.begin(), want_g.end()),
              1e-5);

  auto sm =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], -1)}; });
  ev = kernels_of([&] { eval(sm({x})[0]); });
  EXPECT_LE(ev.size(), 3u) << "softmax";
  auto want = softmax(x, -1).to_vector<float>();
  expect_near(sm({x})[0].to_vector<float>(), std::vector<double>(want.begin(), want.end()), 1e-5);

  auto ln = compile([](const std::vector<Array>& in) {
    Array mu = mean(in[0], -1, true);
    Array var = mean((in[0] - mu) * (in[0] - mu), -1, true);
    return std::vector<Array>{(in[0] - mu) * rsqrt(var + 1e-5f)};
  });
  ev = kernels_of([&] { eval(ln({x})[0]); });
  EXPECT_LE(ev.size(), 3u) << "layer norm";

  // Two outputs of one shape from one region: one kernel.
  auto two = compile([](const std::vector<Array>& in) {
    Array e = exp(in[0]);
    return std::vector<Array>{e * 2.0f, e + in[0]};
  });
  ev = kernels_of([&] { eval(two({x})); });
  EXPECT_EQ(ev.size(), 1u) << "two outputs";

  // Fusion stops at matmul.
  auto mm = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{exp(matmul(in[0] * 2.0f, transpose(in[0])))};
  });
  ev = kernels_of([&] { eval(mm({x})[0]); });
  // x*2 is materialised for the library call, which reads x's transpose in place (no kernel
  // stores it), then exp.
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[1].name, "matmul");
  EXPECT_EQ(ev[2].name, "exp");
}

// A reshape that merges axes is no view: before compile/sink_reshapes.cpp its element-wise input
// was stored by one kernel and copied by another. Now the reshape moves below element-wise
// nodes read by nothing else, down to the stored arrays (read row-major in place).
TEST(Compile, MergeReshapesSinkBelowElementWiseNodes) {
  Array x = random::normal({4, 8, 16}, float32, random::key(2)),
        w = random::normal({16, 8}, float32, random::key(3)),
        b = random::normal({16}, float32, random::key(4));
  eval({x, w, b});
  std::vector<PlanCase> cases = {
      {"matmul operand",
       [](const std::vector<Array>& in) {
         return std::vector<Array>{matmul(reshape(in[0] * 2.0f, {32, 16}), in[1])};
       },
       {"multiply", "matmul"}},
      {"reduction",
       [](const std::vector<Array>& in) {
         return std::vector<Array>{sum(reshape(exp(in[0]) - in[0], {32, 16}), 1)};
       },
       {"fused_exp_subtract"}},  // the reduction reads x row-major
      {"read twice: stored once",
       [](const std::vector<Array>& in) {
         Array y = in[0] * 2.0f;
         return std::vector<Array>{reshape(y, {32, 16}) + 1.0f, y};
       },
       {"multiply", "add"}},
      {"a broadcast input stops it",
       [](const std::vector<Array>& in) {
         return std::vector<Array>{reshape(in[0] * in[2], {-1}) + 1.0f};
       },
       {"multiply", "add"}},
      {"a long chain",
       [](const std::vector<Array>& in) {
         Array y = in[0];
         for (int i = 0; i < 300; ++i) y = y * 0.999f + 0.001f;
         return std::vector<Array>{reshape(y, {-1, 16}) * 2.0f};
       },
       {""}},
  };
  for (const PlanCase& c : cases) expect_kernels_and_values(c, {x, w, b}, 1e-5);
}

TEST(Compile, MatmulReadsAReshapedOperandInPlace) {
  Array x = random::normal({4, 8, 16}, float32, random::key(5)),
        w = random::normal({16, 8}, float32, random::key(6)),
        v = random::normal({16, 16}, float32, random::key(7));
  eval({x, w, v});
  std::vector<PlanCase> cases = {
      {"after a row reduction",
       [](const std::vector<Array>& in) {
         Array y = in[0] - mean(in[0], -1, true);
         return std::vector<Array>{matmul(reshape(y, {32, 16}), in[1])};
       },
       {"rows_sum_count_divide_subtract", "matmul"}},
      {"after a matmul, both operands",
       [](const std::vector<Array>& in) {
         Array h = matmul(in[0], in[2]);
         return std::vector<Array>{matmul(reshape(h, {32, 16}), reshape(in[2] * 2.0f, {16, 16}))};
       },
       {"matmul", "multiply", "matmul"}},
      {"a reshaped transpose",
       [](const std::vector<Array>& in) {
         return std::vector<Array>{
             matmul(reshape(transpose(matmul(in[0], in[2]), {1, 0, 2}), {32, 16}), in[1])};
       },
       {"matmul", "transpose", "matmul"}},
  };
  for (const PlanCase& c : cases) expect_kernels_and_values(c, {x, w, v}, 1e-4);
}

TEST(Compile, KernelArgumentsAreBounded) {
  // 40 inputs summed: more buffers than one kernel takes, so fusion splits the tree.
  std::vector<Array> in;
  for (int i = 0; i < 40; ++i) in.push_back(full({16}, static_cast<double>(i), float32, ref()));
  eval(in);
  auto f = compile([](const std::vector<Array>& xs) {
    Array acc = xs[0];
    for (size_t i = 1; i < xs.size(); ++i) acc = acc + xs[i] * 2.0f;
    return std::vector<Array>{acc};
  });
  StreamScope scope(ref());
  auto ev =
      kernels_of([&] { expect_near(f(in)[0].to_vector<float>(), std::vector<double>(16, 1560)); });
  EXPECT_GE(ev.size(), 2u);  // 40 inputs do not fit one kernel (24 buffers)...
  EXPECT_LE(ev.size(), 3u);  // ...but a long chain is cut in few places, not at every node
}

TEST(Compile, CapturedStateIsReadAndWrittenEveryCall) {
  StreamScope scope(ref());
  std::vector<Array> state = {array<float>({0, 0}, {2})};
  int traces = 0;
  auto step = compile(
      [&](const std::vector<Array>& in) {
        ++traces;
        state[0] = state[0] + in[0];
        return std::vector<Array>{state[0] * 10.0f};
      },
      {false, {&state}, {&state}});
  Array one = array<float>({1, 2}, {2});
  for (int i = 1; i <= 3; ++i) {
    Array r = step({one})[0];
    expect_near(state[0].to_vector<float>(), {1.0 * i, 2.0 * i});
    expect_near(r.to_vector<float>(), {10.0 * i, 20.0 * i});
  }
  EXPECT_EQ(traces, 1);
  // Arrays captured but not listed are constants of the trace.
  Array w = array<float>({5, 5}, {2});
  auto add_w = compile([w](const std::vector<Array>& in) { return std::vector<Array>{in[0] + w}; });
  expect_near(add_w({one})[0].to_vector<float>(), {6, 7});
}

TEST(Compile, OutputStateContainersGetWhatTheTraceWrote) {
  // An outputs-only container that the caller resizes between calls: each call writes back
  // exactly the traced outputs (it used to index past them when the container grew).
  StreamScope scope(ref());
  std::vector<Array> last;
  auto f = compile(
      [&](const std::vector<Array>& in) {
        last = {in[0] * 2.0f};
        return std::vector<Array>{in[0] + 1.0f};
      },
      {false, {}, {&last}});
  Array x = array<float>({1, 2}, {2});
  f({x});
  ASSERT_EQ(last.size(), 1u);
  last.assign(5, zeros({2}));
  expect_near(f({x})[0].to_vector<float>(), {2, 3});
  ASSERT_EQ(last.size(), 1u);
  expect_near(last[0].to_vector<float>(), {2, 4});
  last.clear();
  f({x});
  ASSERT_EQ(last.size(), 1u);
}

TEST(Compile, DisableCompileRunsEagerly) {
  int calls = 0;
  auto f = compile([&](const std::vector<Array>& in) {
    ++calls;
    return std::vector<Array>{in[0] + 1.0f};
  });
  Array x = array<float>({1}, {1}, ref());
  disable_compile();
  EXPECT_FALSE(compile_enabled());
  f({x});
  f({x});
  EXPECT_EQ(calls, 2);
  enable_compile();
  f({x});
  f({x});
  EXPECT_EQ(calls, 3);
}

TEST(Compile, NestedCompileFusesAcross) {
  int inner_traces = 0, outer_traces = 0;
  auto inner = compile([&](const std::vector<Array>& in) {
    ++inner_traces;
    return std::vector<Array>{in[0] * 2.0f};
  });
  auto outer = compile([&](const std::vector<Array>& in) {
    ++outer_traces;
    return std::vector<Array>{exp(inner({in[0]})[0]) + inner({in[0] + 1.0f})[0]};
  });
  StreamScope scope(ref());
  Array x = array<float>({0, 1}, {2});
  std::vector<TaskEvent> ev;
  ev = kernels_of([&] {
    expect_near(outer({x})[0].to_vector<float>(), {1 + 2, std::exp(2.0) + 4});
  });
  EXPECT_EQ(ev.size(), 1u) << "the outer compile should fuse through the inner calls";
  outer({x});
  EXPECT_EQ(outer_traces, 1);
  EXPECT_EQ(inner_traces, 2);  // inlined into the outer trace, twice
  expect_near(inner({x})[0].to_vector<float>(), {0, 2});
}

TEST(Compile, ReadingPlaceholdersWhileTracingRaises) {
  auto bad = compile([](const std::vector<Array>& in) {
    float v = in[0].item<float>();  // not available while tracing
    return std::vector<Array>{in[0] * v};
  });
  Array x = array<float>({2}, {1}, ref());
  expect_error([&] { bad({x}); }, {"traced", "placeholder"});
  auto bad_eval = compile([](const std::vector<Array>& in) {
    eval(in[0] + 1.0f);
    return in;
  });
  expect_error([&] { bad_eval({x}); }, {"eval", "traced"});
  // Nothing is left broken: the same inputs work eagerly and in other compiled functions.
  EXPECT_FLOAT_EQ((x * 3.0f).item<float>(), 6);
  auto good =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 3.0f}; });
  EXPECT_FLOAT_EQ(good({x})[0].item<float>(), 6);
}

TEST(Compile, ManyThreadsCallOneFunction) {
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{sum(in[0] * in[0])}; });
  std::atomic<int> wrong{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      StreamScope scope(new_stream(ref()));
      for (int i = 0; i < 50; ++i) {
        float v = static_cast<float>(t + i % 3);
        Array x = full({2, 3}, v, float32);
        if (f({x})[0].item<float>() != 6 * v * v) wrong++;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.cache_size(), 1u);
}

namespace {
size_t resident_kib() { return test::memory_in_use_bytes() / 1024; }
}  // namespace

TEST(Compile, DroppedFunctionsReleaseMemory) {
  StreamScope scope(ref());
  Array x = ones({256, 256});
  eval(x);
  auto cycle = [&] {
    auto f = compile(
        [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0] * 2.0f, -1)}; });
    eval(f({x}));
  };
  for (int i = 0; i < 20; ++i) cycle();  // warm up allocator and caches
  size_t before = resident_kib();
  for (int i = 0; i < 200; ++i) cycle();
  size_t after = resident_kib();
  // Each cycle allocates ~1 MiB of outputs; 200 cycles leaking would add ~200 MiB.
  EXPECT_LT(after, before + 16 * 1024) << before << " KiB -> " << after << " KiB";
}

namespace {
// A backend whose compile() waits (up to 10 s) until two compiles are in flight at once: a plan
// whose kernels compile one after another makes its first compile time out.
class RendezvousBackend : public test::MirrorBackend {
 public:
  RendezvousBackend() : MirrorBackend("rendezvous", false) {}
  std::shared_ptr<const CompiledKernel> compile(int device, const Kernel& k) override {
    if (++in_flight_ >= 2) met_ = true;
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!met_ && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    --in_flight_;
    return MirrorBackend::compile(device, k);
  }
  bool met() const { return met_; }

 private:
  std::atomic<int> in_flight_{0};
  std::atomic<bool> met_{false};
};
}  // namespace

TEST(Compile, PlanKernelsCompileConcurrently) {
  if (oneapi::tbb::info::default_concurrency() < 2) GTEST_SKIP() << "one hardware thread";
  static auto backend = std::make_shared<RendezvousBackend>();
  static bool registered = (register_backend(backend), true);
  (void)registered;
  auto body = [](const std::vector<Array>& in) {  // two reductions: two kernels that cannot fuse
    return std::vector<Array>{sum(exp(in[0]), -1), max(sin(in[0]), -1)};
  };
  Array x = random::uniform({8, 16}, float32, random::key(5), ref());
  eval(x);
  auto f = compile(body);
  std::vector<Array> got, want;
  {
    StreamScope scope(device("rendezvous"));
    got = f({x});
  }
  EXPECT_TRUE(backend->met()) << "the plan's kernels were compiled one after another";
  {
    StreamScope scope(ref());
    want = body({x});
  }
  for (size_t k = 0; k < 2; ++k) {
    auto w = want[k].to_vector<float>();
    expect_near(got[k].to_vector<float>(), std::vector<double>(w.begin(), w.end()), 1e-5);
  }
}

TEST(Compile, ShapelessOneTraceEveryShape) {
  static auto backend = std::make_shared<test::MirrorBackend>("shapes", false);
  static bool registered = (register_backend(backend), true);
  (void)registered;
  int traces = 0;
  auto body = [&](const std::vector<Array>& in) {
    ++traces;
    Array y = exp(in[0]) * 2.0f;
    return std::vector<Array>{sum(y, -1), flatten(in[0]) + 1.0f, mean(in[0] * in[1], 0)};
  };
  auto f = compile(body, {true, {}, {}});
  std::vector<Shape> shapes = {{2, 3}, {4, 5}, {1, 7}, {3, 1}};
  size_t kernels_after_first = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Array x = random::uniform(shapes[i], float32, random::key(i), device("reference"));
    Array w = random::uniform({shapes[i].back()}, float32, random::key(i + 9), device("reference"));
    std::vector<Array> got, want;
    {
      StreamScope scope(device("shapes"));
      got = f({x, w});
    }
    {
      StreamScope scope(ref());
      want = body({x, w});
      --traces;  // the eager run of the body is not a trace
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      ASSERT_EQ(got[k].shape(), want[k].shape()) << "shape " << to_string(shapes[i]);
      auto wv = want[k].to_vector<float>();
      expect_near(got[k].to_vector<float>(), std::vector<double>(wv.begin(), wv.end()), 1e-5);
    }
    if (i == 0) kernels_after_first = backend->distinct_kernels();
  }
  EXPECT_EQ(traces, 1) << "one trace serves every shape";
  EXPECT_GT(kernels_after_first, 0u);
  EXPECT_EQ(backend->distinct_kernels(), kernels_after_first)
      << "kernels take runtime extents: no new kernel for a new shape";
  // A new rank is a new signature.
  {
    StreamScope scope(ref());
    f({ones({2, 2, 3}), ones({3})});
  }
  EXPECT_EQ(traces, 2);
}

TEST(Compile, ShapelessBakedShapesRaise) {
  auto g = compile(
      [](const std::vector<Array>& in) {
        return std::vector<Array>{reshape(in[0], {2, 3}) * 2.0f};
      },
      {true, {}, {}});
  StreamScope scope(ref());
  expect_near(g({arange(0.0, 6.0, 1.0)})[0].to_vector<float>(), {0, 2, 4, 6, 8, 10});
  EXPECT_EQ(g({ones({3, 2})})[0].shape(), (Shape{2, 3}));  // same size: still valid
  expect_error([&] { g({ones({8})}); }, {"shapeless", "reshape", "(2, 3)", "(8,)"});
  // A reshape that was a no-op at trace time is still checked.
  auto h = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{reshape(in[0], {4}) + 1.0f}; },
      {true, {}, {}});
  EXPECT_EQ(h({ones({4})})[0].shape(), (Shape{4}));
  expect_error([&] { h({ones({5})}); }, {"shapeless", "reshape"});
  // The function stays usable for fitting shapes afterwards.
  expect_near(g({ones({6})})[0].to_vector<float>(), {2, 2, 2, 2, 2, 2});
}

// MLX's own example: abs(x + y) compiled shapeless, called with 0-d and then 1-d inputs, traces
// once. An element-wise graph replays for any rank; one that names axes retraces quietly.
TEST(Compile, ShapelessElementwiseServesEveryRank) {
  int traces = 0;
  auto f = compile(
      [&](const std::vector<Array>& in) {
        ++traces;
        return std::vector<Array>{abs(in[0] + in[1])};
      },
      {true, {}, {}});
  StreamScope scope(ref());
  EXPECT_EQ(f({array(1.0f), array(-3.0f)})[0].item<float>(), 2.0f);
  Array x = array({1.0f, -2.0f, 3.0f}, {3}), y = array({-4.0f, 1.0f, 0.5f}, {3});
  expect_near(f({x, y})[0].to_vector<float>(), {3, 1, 3.5});
  Array m = reshape(arange(0.0, 6.0, 1.0, float32), {2, 3});
  expect_near(f({m, y})[0].to_vector<float>(), {4, 2, 2.5, 1, 5, 5.5});  // broadcasting
  EXPECT_EQ(traces, 1);
  EXPECT_EQ(f.cache_size(), 1u);
  // A contradiction in sizes is an error, and the function stays usable.
  expect_error([&] { f({ones({2, 3}), ones({4})}); }, {"(2, 3)", "(4,)"});
  EXPECT_EQ(f({ones({2}), ones({2})})[0].to_vector<float>(), (std::vector<float>{2, 2}));
  EXPECT_EQ(traces, 1);

  // A graph whose meaning depends on the rank (an axis) retraces for a new rank, quietly.
  int axis_traces = 0;
  auto g = compile(
      [&](const std::vector<Array>& in) {
        ++axis_traces;
        return std::vector<Array>{sum(in[0] * 2.0f, -1)};
      },
      {true, {}, {}});
  EXPECT_EQ(g({ones({3})})[0].item<float>(), 6.0f);
  EXPECT_EQ(g({ones({2, 4})})[0].to_vector<float>(), (std::vector<float>{8, 8}));
  EXPECT_EQ(axis_traces, 2);
  EXPECT_EQ(g({ones({5, 4})})[0].shape(), (Shape{5}));
  EXPECT_EQ(axis_traces, 2);
}

TEST(Passes, SimplifyGraph) {
  Array x = make_array({4}, float32, Op::Placeholder, {}, {},
                       ResolvedStream{default_stream(ref()), StreamOrigin::Default});
  PassStats st;
  // CSE. Two constants of equal value, made as separate nodes (an eager loop's repeated C++
  // scalar would share one node: graph/ops.cpp's scalar_operand).
  auto two = [] { return scalar_constant(Scalar::of(2.0f), default_stream(ref())); };
  Array a = x * two(), b = x * two();
  auto out = simplify({a + b}, {x}, &st);
  EXPECT_EQ(st.cse, 2);  // the constant 2 and the product
  EXPECT_TRUE(out[0].node()->inputs[0].same(out[0].node()->inputs[1]));

  st = {};
  out = simplify({(x * 1.0f) + 0.0f, -(-x), astype(astype(x, float64), float32)}, {x}, &st);
  EXPECT_TRUE(out[0].same(x));
  EXPECT_TRUE(out[1].same(x));
  EXPECT_TRUE(out[2].same(x));
  EXPECT_EQ(st.simplified, 4);

  // Not simplified when the rule would change the shape or dtype.
  out = simplify({x * ones({3, 4}), astype(astype(x, int32), float32)}, {x});
  EXPECT_EQ(out[0].shape(), (Shape{3, 4}));
  EXPECT_FALSE(out[1].same(x));

  st = {};
  Array c = array<float>({1, 2}, {2}, ref()) * 3.0f + 1.0f;  // folded to a constant
  out = simplify({x + sum(c)}, {x}, &st);
  EXPECT_EQ(st.folded, 3);
  const ArrayNode& folded = *out[0].node()->inputs[1].node();
  ASSERT_TRUE(folded.data != nullptr);
  EXPECT_FLOAT_EQ(out[0].node()->inputs[1].item<float>(), 11);

  // Dead code is not in the result graph.
  Array dead = exp(x);
  out = simplify({x + 1.0f}, {x});
  EXPECT_EQ(out[0].node()->inputs.size(), 2u);
  (void)dead;
}

// Each rule of the primitives' simplify entries (compile/rules/) fires where it holds, and only
// the rules that hold for every shape fire under shapeless.
TEST(Passes, EachAlgebraRuleFires) {
  ResolvedStream st_ref{default_stream(ref()), StreamOrigin::Default};
  auto placeholder = [&](Shape s) {
    return make_array(s, float32, Op::Placeholder, {}, {}, st_ref);
  };
  // Built as nodes: the ops themselves drop some of these (reshape to the same shape) eagerly.
  auto node = [&](Op op, Params p, const Array& in, Shape s) {
    return make_array(s, in.dtype(), op, p, {in}, st_ref);
  };
  auto perm = [](std::vector<int> axes) {
    Params p;
    p.axes = std::move(axes);
    return p;
  };
  Array x = placeholder({4}), y = placeholder({3, 4}), z = placeholder({2, 3, 4});
  Array zero = array(0.0f, ref()), one = array(1.0f, ref());
  Params same;
  same.shape = {3, 4};
  Params to12;
  to12.shape = {12};
  Params to34;
  to34.shape = {3, 4};
  Params to234;
  to234.shape = {2, 3, 4};
  Params whole;
  whole.start = {0, 0}, whole.stop = {3, 4}, whole.step = {1, 1};

  PassStats st;
  std::vector<Array> out = simplify(
      {one * x, zero + x, x - zero, x / one,
       node(Op::Transpose, perm({1, 0}), node(Op::Transpose, perm({1, 0}), y, {4, 3}), {3, 4}),
       node(Op::Reshape, same, y, {3, 4}), node(Op::Broadcast, same, y, {3, 4}),
       node(Op::Slice, whole, y, {3, 4})},
      {x, y}, &st);
  EXPECT_EQ(st.simplified, 8);
  for (size_t i = 0; i < 4; ++i) EXPECT_TRUE(out[i].same(x)) << i;
  for (size_t i = 4; i < out.size(); ++i) EXPECT_TRUE(out[i].same(y)) << i;

  // Pairs compose into one node reading the innermost input.
  st = {};
  out = simplify({node(Op::Transpose, perm({1, 2, 0}),
                       node(Op::Transpose, perm({1, 2, 0}), z, {3, 4, 2}), {4, 2, 3}),
                  node(Op::Reshape, to34, node(Op::Reshape, to12, y, {12}), {3, 4}),
                  node(Op::Broadcast, to234, node(Op::Broadcast, same, x, {3, 4}), {2, 3, 4})},
                 {x, y, z}, &st);
  EXPECT_EQ(st.simplified, 3);
  EXPECT_EQ(out[0].node()->op, Op::Transpose);
  EXPECT_EQ(out[0].node()->params.axes, (std::vector<int>{2, 0, 1}));
  EXPECT_TRUE(out[0].node()->inputs[0].same(z));
  EXPECT_EQ(out[1].node()->op, Op::Reshape);
  EXPECT_TRUE(out[1].node()->inputs[0].same(y));
  EXPECT_EQ(out[2].node()->op, Op::Broadcast);
  EXPECT_TRUE(out[2].node()->inputs[0].same(x));

  // a @ w^T stays as written: the matmul reads w transposed in place (matmul_operands.h), so no
  // rewrite moves the transpose elsewhere, shapeless or not.
  Array a = placeholder({2, 3}), w = placeholder({1000, 3});
  Array m = matmul(a, node(Op::Transpose, perm({1, 0}), w, {3, 1000}));
  for (bool shapeless : {false, true}) {
    st = {};
    out = simplify({m}, {a, w}, &st, shapeless);
    EXPECT_EQ(st.simplified, 0);
    ASSERT_EQ(out[0].node()->op, Op::Matmul);
    EXPECT_TRUE(out[0].node()->inputs[0].same(a));
    EXPECT_EQ(out[0].node()->inputs[1].node()->op, Op::Transpose);
  }

  // Shapeless: 0-d identities, -(-x), casts and transpose pairs hold for every shape; a 1 of
  // shape (4,), a no-op reshape, broadcast or whole slice, and nested reshapes do not.
  st = {};
  out = simplify(
      {x * 1.0f, -(-x), astype(astype(x, float64), float32),
       node(Op::Transpose, perm({1, 0}), node(Op::Transpose, perm({1, 0}), y, {4, 3}), {3, 4})},
      {x, y}, &st, true);
  EXPECT_EQ(st.simplified, 4);
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(out[i].same(x)) << i;
  EXPECT_TRUE(out[3].same(y));
  st = {};
  Array ones4 = array<float>({1, 1, 1, 1}, {4}, ref());
  out = simplify({x * ones4, node(Op::Reshape, same, y, {3, 4}),
                  node(Op::Broadcast, same, y, {3, 4}), node(Op::Slice, whole, y, {3, 4}),
                  node(Op::Reshape, to34, node(Op::Reshape, to12, y, {12}), {3, 4})},
                 {x, y}, &st, true);
  EXPECT_EQ(st.simplified, 0);
  EXPECT_EQ(out[0].node()->op, Op::Binary);
  EXPECT_EQ(out[4].node()->inputs[0].node()->op, Op::Reshape);
  // Without shapeless the (4,) ones qualify.
  out = simplify({x * ones4}, {x});
  EXPECT_TRUE(out[0].same(x));
}

TEST(Lowering, TemporariesShareStorageByLiveness) {
  Array x = ones({1000}, float32, ref());
  eval(x);
  Array y = sqrt(sqrt(sqrt(sqrt(x * 16.0f))));  // eagerly: 5 kernels, 4 temporaries
  LoweredGraph lg = lower({y}, {}, LowerOptions{});
  int temps = 0;
  for (const Slot& s : lg.plan.slots()) temps += s.kind == SlotKind::Temp;
  EXPECT_EQ(temps, 4);
  EXPECT_EQ(lg.plan.storage_groups(), 2u);  // a chain needs only two buffers in turn
  EXPECT_NEAR(y.to_vector<float>()[999], std::pow(16.0, 1.0 / 16), 1e-6);
  // Independent branches that may run at the same time must not share: values stay right.
  Array a = exp(x), b = log(x + 1.0f);
  Array z = a * 2.0f + b * 3.0f;
  EXPECT_NEAR(z.to_vector<float>()[0], 2 * std::exp(1.0) + 3 * std::log(2.0), 1e-5);
}

TEST(Compile, EnvironmentDisablesCompile) {
#ifdef KILN_CLI_PATH
  // `kiln demo` counts the calls of its compiled function's body: once when compiled, at every
  // call when KILN_DISABLE_COMPILE=1.
  auto traces = [](const std::string& env) {
    std::string cmd = env + " " + KILN_CLI_PATH + " demo 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (p && fgets(buf, sizeof buf, p)) out += buf;
    if (p) pclose(p);
    auto at = out.find("traces of the user function: ");
    return at == std::string::npos ? -1 : std::atoi(out.c_str() + at + 29);
  };
  EXPECT_EQ(traces("KILN_DISABLE_COMPILE=0"), 1);
  EXPECT_GT(traces("KILN_DISABLE_COMPILE=1"), 10);
#else
  GTEST_SKIP() << "the kiln command is not built";
#endif
}
