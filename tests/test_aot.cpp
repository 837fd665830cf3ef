// Ahead of time: lower/as_text/compile/Executable give the placements and results of a direct
// call in every nesting of compute_on and compile (the JAX #27825 class of bug), on every device
// this machine has; the text shows placements; cost and memory analyses add up; misuse raises.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

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
  // Tasks on different devices finish in either order: compare them as a set.
  std::sort(p.begin(), p.end());
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
      Executable loaded = Executable::from_artifact(exe.artifact());
      auto saved = run_profiled([&] { return loaded({x}); });
      EXPECT_EQ(saved, aot) << "pin " << pin << " caller " << caller;
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
      // ... and the same executables saved and loaded back.
      Executable l1 = Executable::from_artifact(e1.artifact());
      Executable l2 = Executable::from_artifact(e2.artifact());
      auto a3 = run_profiled([&] { return l1({x}); });
      auto b3 = run_profiled([&] { return compute_on(d, l2)(std::vector<Array>{x}); });
      for (const auto* r : {&a2, &b1, &b2, &a3, &b3}) {
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

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// An artifact with its checksum recomputed, as a careful hand edit would leave it: the parser
// behind the checksum must still reject what does not add up.
std::string rechecksum(std::string text) {
  size_t at = text.rfind("\nchecksum ");
  std::string body = text.substr(0, at + 1);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a(body)));
  return body + "checksum " + buf + "\n";
}

// A function with a pinned part, a captured constant, a matmul and a reduction.
CompiledFunction rich_function(Device pin) {
  Array w = random::normal({8, 3}, float32, random::key(11));
  eval(w);
  return compile([pin, w](const std::vector<Array>& in) {
    Array h = compute_on(pin, [](const Array& a) { return exp(a) * 0.5f; })(in[0]);
    return std::vector<Array>{matmul(h, w) + 1.0f, sum(h, -1)};
  });
}

}  // namespace

TEST(Artifact, RoundTripsAndRunsLikeTheOriginal) {
  Array x = input();
  for (const Device& pin : available_devices()) {
    CompiledFunction f = rich_function(pin);
    Executable e = f.lower({x}).compile();
    Executable back = Executable::from_artifact(e.artifact());
    EXPECT_EQ(back.as_text(), e.as_text());
    EXPECT_EQ(back.artifact(), e.artifact());
    auto a = run_profiled([&] { return e({x}); });
    auto b = run_profiled([&] { return back({x}); });
    EXPECT_EQ(a, b) << pin;
    std::string path = std::string(KILN_TEST_DATA_DIR) + "/rich.kiln";
    e.save(path);
    EXPECT_EQ(Executable::load(path).as_text(), e.as_text());
  }
}

TEST(Artifact, EveryDamagedFileRaisesWithItsPlace) {
  Array x = input();
  std::string good = rich_function(device("reference")).lower({x}).compile().artifact();
  // Truncated anywhere, one byte changed anywhere: a kiln::Error, never a crash.
  for (size_t cut = 0; cut + 1 < good.size(); cut += 7)  // (the last newline is optional)
    EXPECT_THROW(Executable::from_artifact(good.substr(0, cut)), Error) << "cut at " << cut;
  for (size_t at = 0; at < good.size(); at += 5) {
    std::string bad = good;
    bad[at] = bad[at] == 'x' ? 'y' : 'x';
    EXPECT_THROW(Executable::from_artifact(bad), Error) << "byte " << at;
    // With a fresh checksum the edit reaches the parser, which must reject it, except inside
    // the graph section: that is documentation the checksum protects and running never reads.
    bool in_graph = at > good.find("\ngraph:\n") && at < good.find("\nplan:\n");
    if (at > good.rfind("\nchecksum ")) continue;  // rechecksum() rewrites that line
    if (!in_graph) {
      EXPECT_THROW(Executable::from_artifact(rechecksum(bad)), Error) << "byte " << at;
    } else {
      try {
        Executable::from_artifact(rechecksum(bad));
      } catch (const Error&) {
      }
    }
  }
  expect_error([&] { Executable::from_artifact("kiln artifact 2\n"); },
               {"artifact:1:1", "version 1"});
  expect_error([&] { Executable::from_artifact(good.substr(0, good.size() / 2)); },
               {"checksum", "truncated"});
  std::string edited = good;
  edited.replace(edited.find("slot 0: float32[32]"), 19, "slot 0: float32[33]");
  expect_error([&] { Executable::from_artifact(rechecksum(edited)); }, {"artifact:", "input 0"});
  expect_error([&] { Executable::load("/nonexistent/x.kiln"); }, {"cannot open"});
}

TEST(Artifact, DevicesTheMachineLacksMustBeRemapped) {
  Array x = input();
  std::string text = rich_function(device("reference")).lower({x}).compile().artifact();
  std::string elsewhere = text;
  for (size_t at; (at = elsewhere.find("reference:0")) != std::string::npos;)
    elsewhere.replace(at, 11, "nosuchdev:0");
  elsewhere = rechecksum(elsewhere);
  expect_error([&] { Executable::from_artifact(elsewhere); }, {"nosuchdev:0", "remap"});
  Executable moved = Executable::from_artifact(elsewhere, {{"nosuchdev:0", "cpu:0"}});
  auto got = run_profiled([&] { return moved({x}); });
  auto want = run_profiled([&] { return rich_function(device("cpu"))({x}); });
  EXPECT_TRUE(ran_on(got.second, "cpu:0"));
  EXPECT_FALSE(ran_on(got.second, "nosuchdev:0"));
  for (size_t i = 0; i < want.first.size(); ++i) EXPECT_NEAR(got.first[i], want.first[i], 1e-4);
  expect_error(
      [&] {
        Executable::from_artifact(elsewhere, {{"nosuchdev:0", "nope:3"}});
      },
      {"cannot remap", "nope:3"});
  // A remap of a device the artifact does not use (a misspelt name) says which ones it uses.
  expect_error(
      [&] {
        Executable::from_artifact(elsewhere, {{"nosuchdev:1", "cpu:0"}});
      },
      {"cannot remap nosuchdev:1", "places no work on it", "nosuchdev:0"});
}

#ifdef KILN_CLI_PATH
TEST(Artifact, RunsInASecondProcessWithTheSameOutput) {
  Array x = input();
  std::string dir = KILN_TEST_DATA_DIR;
  Executable e = rich_function(device("reference")).lower({x}).compile();
  e.save(dir + "/second.kiln");
  save_npy(dir + "/second_x.npy", x);
  std::string cmd = std::string(KILN_CLI_PATH) + " run " + dir + "/second.kiln -i " + dir +
                    "/second_x.npy -o " + dir + "/second_y0.npy -o " + dir +
                    "/second_y1.npy --device cpu > " + dir + "/second.log 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<Array> here;
  {
    StreamScope scope(device("cpu"));
    here = e({x});
  }
  EXPECT_EQ(load_npy(dir + "/second_y0.npy").to_vector<float>(), here[0].to_vector<float>());
  EXPECT_EQ(load_npy(dir + "/second_y1.npy").to_vector<float>(), here[1].to_vector<float>());
  std::string inspect = std::string(KILN_CLI_PATH) + " inspect --dot " + dir + "/second.kiln > " +
                        dir + "/second.dot";
  ASSERT_EQ(std::system(inspect.c_str()), 0);
  std::ifstream dot(dir + "/second.dot");
  std::stringstream ss;
  ss << dot.rdbuf();
  EXPECT_NE(ss.str().find("digraph kiln"), std::string::npos);
  EXPECT_NE(ss.str().find("reference:0"), std::string::npos);
}
#endif

// The artifact fuzzer's seeds (examples/aot.cpp writes them) load, run and round-trip.
TEST(Artifact, SeedArtifactsLoadAndRoundTrip) {
  int loaded = 0;
  for (const char* name : {"pinned", "matmul_softmax", "shapeless"}) {
    std::string path =
        std::string(KILN_SOURCE_DIR) + "/tests/fuzz/artifact_seeds/" + name + ".kiln";
    Executable e = Executable::load(path);
    EXPECT_EQ(Executable::from_artifact(e.artifact()).as_text(), e.as_text()) << name;
    std::vector<Array> args;
    for (int i = 0; i < (std::string(name) == "shapeless" ? 2 : 1); ++i) args.push_back(input());
    EXPECT_FALSE(e(args).empty()) << name;
    ++loaded;
  }
  EXPECT_EQ(loaded, 3);
}

// Small arrays made on the host for a device (array(0.5f, device("vulkan"))) are host memory
// labelled with that device: a compiled function on it must copy them there, not hand the
// device's kernels host memory (found by `kiln bench`'s dispatch case on opencl and vulkan).
TEST(Devices, ScalarsMadeForADeviceFeedItsCompiledKernels) {
  CompiledFunction f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(-in[0]) + in[1]}; });
  for (const Device& d : available_devices()) {
    StreamScope scope(d);
    Array x = array(0.5f, d), y = array(1.5f, d);
    EXPECT_NEAR(f({x, y})[0].item<float>(), std::exp(-0.5f) + 1.5f, 1e-6) << d;
    Array v = array(std::vector<float>{1, 2}, {2}, d);
    EXPECT_NEAR(f({v, v})[0].to_vector<float>()[1], std::exp(-2.0f) + 2.0f, 1e-6) << d;
  }
}

// An artifact holds the one lowering it was saved with, even of a shapeless function (the plan's
// buffer sizes and launch values are those shapes'; re-lowering needs the traced graph, which
// the artifact does not carry): other shapes raise naming both, where before the error named
// one argument and did not say the function was shapeless.
TEST(Artifact, ShapelessFunctionRunsOnlyItsSavedShapesAndSaysSo) {
  CompiledFunction f = compile(
      [](const std::vector<Array>& in) { return std::vector<Array>{sum(exp(in[0]), -1) + in[1]}; },
      {.shapeless = true});
  Array x = random::normal({4, 8}, float32, random::key(5)), b = ones({4});
  Executable e = f.lower({x, b}).compile();
  Array x6 = random::normal({6, 8}, float32, random::key(6)), b6 = ones({6});
  EXPECT_EQ(e({x6, b6})[0].shape(), (Shape{6}));  // in this process: any shape of those ranks
  Executable back = Executable::from_artifact(e.artifact());
  EXPECT_EQ(back({x, b})[0].to_vector<float>(), e({x, b})[0].to_vector<float>());
  expect_error(
      [&] {
        back({x6, b6});
      },
      {"shapeless", "float32(4, 8), float32(4,)", "float32(6, 8), float32(6,)", "save it again"});
  // A wrong rank or dtype on a loaded artifact still says which argument.
  expect_error([&] { back({x, astype(b, float64)}); }, {"argument 1", "float64"});
}
