// Ahead of time: lower/as_text/compile/Executable give the placements and results of a direct
// call in every nesting of compute_on and compile (the JAX #27825 class of bug), on every device
// this machine has; the text shows placements; cost and memory analyses add up; misuse raises.
#include <algorithm>
#include <map>

#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;

namespace {

// The device of every non-copy task a call ran, by task name, in order.
using Placements = std::vector<std::pair<std::string, std::string>>;

template <typename F>
std::pair<std::vector<float>, Placements> run_profiled(F&& f) {
  ProfileScope prof;
  std::vector<Array> out = f();
  eval(out);
  Placements p;
  for (const TaskEvent& e : prof.events())
    if (e.name.rfind("copy", 0) != 0) p.emplace_back(e.name, e.device.str());
  return {out[0].to_vector<float>(), p};
}

std::vector<Device> available_devices() {
  std::vector<Device> d;
  for (const DeviceInfo& i : devices())
    if (i.available) d.push_back(i.device);
  return d;
}

Array input() {
  Array x = random::normal({4, 8}, float32, random::key(3));
  eval(x);
  return x;
}

// A function with a pinned part: exp(x) * 2 on `pin`, the rest wherever the caller runs.
Fn with_pinned_part(Device pin) {
  return [pin](const std::vector<Array>& in) {
    Array h = compute_on(pin, [](const Array& a) { return exp(a) * 2.0f; })(in[0]);
    return std::vector<Array>{sum(h, -1, true) + in[0]};
  };
}

bool ran_on(const Placements& p, const std::string& device) {
  return std::any_of(p.begin(), p.end(), [&](const auto& t) { return t.second == device; });
}

}  // namespace

TEST(Aot, PinnedPartKeepsItsDeviceOnEveryPathAndEveryCaller) {
  Array x = input();
  for (const Device& pin : available_devices())
    for (const Device& caller : available_devices()) {
      CompiledFunction f = compile(with_pinned_part(pin));
      StreamScope scope(new_stream(caller));
      auto direct = run_profiled([&] { return f({x}); });
      Executable exe = f.lower({x}).compile();
      auto aot = run_profiled([&] { return exe({x}); });
      EXPECT_EQ(direct.first, aot.first) << "pin " << pin << " caller " << caller;
      EXPECT_EQ(direct.second, aot.second) << "pin " << pin << " caller " << caller;
      EXPECT_TRUE(ran_on(aot.second, pin.str())) << "the pinned part left " << pin;
      if (pin != caller) {
        EXPECT_TRUE(ran_on(aot.second, caller.str()));
      }
    }
}

TEST(Aot, BothWrapperOrdersGiveTheSamePlacementsDirectAndAheadOfTime) {
  Array x = input();
  Fn g = [](const std::vector<Array>& in) { return std::vector<Array>{tanh(in[0]) + 1.0f}; };
  for (const Device& d : available_devices())
    for (const Device& caller : available_devices()) {
      StreamScope scope(caller);
      // compile(compute_on(d, g)): the placement is recorded on every traced op.
      CompiledFunction inner_pinned = compile(compute_on(d, g));
      auto a1 = run_profiled([&] { return inner_pinned({x}); });
      Executable e1 = inner_pinned.lower({x}).compile();
      auto a2 = run_profiled([&] { return e1({x}); });
      // compute_on(d, compile(g)) and compute_on(d, executable): the caller's lanes follow d.
      CompiledFunction plain = compile(g);
      auto b1 = run_profiled([&] { return compute_on(d, plain)(std::vector<Array>{x}); });
      Executable e2 = plain.lower({x}).compile();
      auto b2 = run_profiled([&] { return compute_on(d, e2)(std::vector<Array>{x}); });
      for (const auto* r : {&a2, &b1, &b2}) {
        EXPECT_EQ(r->first, a1.first) << d << " from " << caller;
        EXPECT_EQ(r->second, a1.second) << d << " from " << caller;
      }
      ASSERT_FALSE(a1.second.empty());
      for (const auto& t : a1.second) EXPECT_EQ(t.second, d.str()) << t.first;
    }
}

TEST(Aot, NestedCompiledFunctionAndShapelessKeepPlacements) {
  Array x = input();
  for (const Device& pin : available_devices()) {
    CompiledFunction inner = compile(with_pinned_part(pin));
    CompiledFunction outer = compile([&](const std::vector<Array>& in) {
      return std::vector<Array>{inner({in[0] * 3.0f})[0] - 1.0f};
    });
    auto direct = run_profiled([&] { return outer({x}); });
    Executable exe = outer.lower({x}).compile();
    auto aot = run_profiled([&] { return exe({x}); });
    EXPECT_EQ(direct, aot) << pin;
    EXPECT_TRUE(ran_on(aot.second, pin.str()));

    CompiledFunction shapeless = compile(with_pinned_part(pin), {.shapeless = true});
    Executable se = shapeless.lower({x}).compile();
    Array y = random::normal({3, 5}, float32, random::key(4));  // another shape, same rank
    eval(y);
    auto d2 = run_profiled([&] { return shapeless({y}); });
    auto a2 = run_profiled([&] { return se({y}); });
    EXPECT_EQ(d2, a2) << pin;
    EXPECT_TRUE(ran_on(a2.second, pin.str()));
    EXPECT_EQ(shapeless.cache_size(), 1u);
  }
}

TEST(Aot, TextShowsSignatureGraphPlacementsAndKernels) {
  Array x = input();
  CompiledFunction f = compile(with_pinned_part(device("reference")));
  Lowered l = f.lower({x});
  std::string t = l.as_text();
  for (const char* part :
       {"kiln lowered 1", "signature: float32(4, 8) -> float32(4, 8)", "graph:", "arg 0",
        "@ reference:0 (placement)", "plan:", "placements:", "reference:0 (placement)",
        "caller's stream (resolved at each call)", "kernels:", "kernel "})
    EXPECT_NE(t.find(part), std::string::npos) << "missing '" << part << "' in\n" << t;
  EXPECT_EQ(t, f.lower({x}).as_text());  // stable
  EXPECT_EQ(t, l.compile().as_text());   // the executable shows the same
  EXPECT_EQ(f.cache_size(), 1u);         // lowered twice, traced once
}

TEST(Aot, LoweringRunsNothingAndCompileBuildsKernels) {
  Array x = input();
  CompiledFunction f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(in[0]) * 3.0f}; });
  ProfileScope prof;
  Lowered l = f.lower({x});
  Executable e = l.compile();
  EXPECT_TRUE(prof.events().empty());
  EXPECT_EQ(e({x})[0].to_vector<float>(), f({x})[0].to_vector<float>());
}

TEST(Aot, CostAndMemoryAnalysesAddUp) {
  Array a = random::normal({32, 64}, float32, random::key(1));
  Array b = random::normal({64, 16}, float32, random::key(2));
  eval({a, b});
  CompiledFunction f = compile([](const std::vector<Array>& in) {
    return std::vector<Array>{exp(matmul(in[0], in[1])) + 1.0f};
  });
  Lowered l = f.lower({a, b});
  CostAnalysis c = l.cost_analysis();
  EXPECT_EQ(c.total.library_calls, 1);
  EXPECT_GE(c.total.kernels, 1);
  EXPECT_GE(c.total.flops, 2.0 * 32 * 64 * 16 + 2.0 * 32 * 16);  // the matmul, exp and add
  EXPECT_GE(c.total.bytes_written, 4.0 * 32 * 16);
  EXPECT_FALSE(c.str().empty());
  MemoryAnalysis m = l.compile().memory_analysis();
  size_t out = 0, args = 0;
  for (const auto& [dev, d] : m.devices) out += d.output_bytes, args += d.argument_bytes;
  EXPECT_EQ(out, 4u * 32 * 16);
  EXPECT_EQ(args, 4u * (32 * 64 + 64 * 16));
}

TEST(Aot, CapturedStateIsReadAndWrittenAsByADirectCall) {
  std::vector<Array> state = {zeros({3})};
  CompiledFunction step = compile(
      [&](const std::vector<Array>& in) {
        state[0] = state[0] + in[0];
        return std::vector<Array>{state[0] * 2.0f};
      },
      {.inputs = {&state}, .outputs = {&state}});
  Array one = ones({3});
  Executable e = step.lower({one}).compile();
  e({one});
  std::vector<Array> out = e({one});
  EXPECT_EQ(state[0].to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{4, 4, 4}));
}

TEST(Aot, MisuseRaises) {
  Array x = input();
  CompiledFunction f = compile(with_pinned_part(device("reference")));
  Executable e = f.lower({x}).compile();
  expect_error([&] { e({}); }, {"takes 1 arguments, got 0"});
  expect_error([&] { e({astype(x, float64)}); }, {"argument 0", "float64", "lowered for float32"});
  expect_error([&] { e({zeros({4, 9})}); }, {"argument 0", "(4, 9)", "lower the function again"});
  CompiledFunction empty;
  expect_error([&] { empty.lower({x}); }, {"empty"});
  EXPECT_EQ(e({x})[0].shape(), (Shape{4, 8}));  // still usable
}
