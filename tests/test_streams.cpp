// Devices, streams, placement, cross-device copies and stream ordering.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "test_backends.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::expect_error;
using kiln::test::expect_near;

using kiln::test::register_test_backends;

TEST(Devices, ListingAndSelection) {
  auto list = devices();
  std::vector<std::string> names;
  for (const auto& d : list) names.push_back(d.device.backend);
  for (const char* b : {"cpu", "opencl", "vulkan", "reference"})
    EXPECT_NE(std::find(names.begin(), names.end(), b), names.end()) << b;
  EXPECT_EQ(device("reference"), (Device{"reference", 0}));
  EXPECT_EQ(device("reference:0").str(), "reference:0");
  Device def = default_device();
  EXPECT_NO_THROW(check_device(def));
  set_default_device(device("reference"));
  EXPECT_EQ(default_device(), device("reference"));
  EXPECT_EQ(zeros({1}).device(), device("reference"));
  set_default_device(def);
}

TEST(Devices, EnvironmentSelectsDefault) {
#ifdef KILN_CLI_PATH
  std::string cmd = std::string("KILN_DEVICE=reference ") + KILN_CLI_PATH + " devices";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_EQ(pclose(p), 0);
  EXPECT_NE(out.find("default: reference:0"), std::string::npos) << out;
  std::string bad = std::string("KILN_DEVICE=tpu:3 ") + KILN_CLI_PATH + " devices 2>&1";
  p = popen(bad.c_str(), "r");
  out.clear();
  while (fgets(buf, sizeof buf, p)) out += buf;
  EXPECT_NE(pclose(p), 0);
  EXPECT_NE(out.find("KILN_DEVICE='tpu:3'"), std::string::npos) << out;
#else
  GTEST_SKIP() << "the kiln command is not built";
#endif
}

TEST(Streams, ValuesAndPrinting) {
  Device r = device("reference");
  Stream s0 = default_stream(r);
  EXPECT_EQ(s0.index, 0);
  Stream a = new_stream(r), b = new_stream(r);
  EXPECT_NE(a, b);
  EXPECT_NE(a, s0);
  EXPECT_EQ(a.device, r);
  EXPECT_EQ(Stream({2, r}).str(), "stream 2 on reference:0");
}

TEST(Streams, ArraysRecordTheirStream) {
  Device r = device("reference");
  Stream s = new_stream(r);
  Array x = zeros({2}, float32, s);
  EXPECT_EQ(x.stream(), s);
  {
    StreamScope scope(s);
    Array y = ones({2});
    EXPECT_EQ(y.stream(), s);
    EXPECT_EQ((y + 1.0).stream(), s);
  }
  Array z = ones({2}, float32, r);
  EXPECT_EQ(z.stream(), default_stream(r));
  ProfileScope prof;
  Array w = exp(x, s);
  eval(w);
  auto ev = prof.events();
  ASSERT_FALSE(ev.empty());
  for (const auto& e : ev) EXPECT_EQ(e.stream, s) << e.name;
}

TEST(Placement, ScopeAndComputeOn) {
  register_test_backends();
  Device m = device("mirror");
  {
    PlacementScope place(m);
    EXPECT_EQ(ones({2}).device(), m);
    EXPECT_EQ(current_placement(), m);
  }
  EXPECT_FALSE(current_placement().has_value());
  auto f = compute_on(m, [](const Array& a) { return a * 2.0; });
  Array r = f(array<float>({1, 2}, {2}, device("reference")));
  EXPECT_EQ(r.device(), m);
  expect_near(r.to_vector<float>(), {2, 4});
  // An explicit stream inside the placement wins.
  PlacementScope place(m);
  Stream s = new_stream(device("reference"));
  EXPECT_EQ(ones({1}, float32, s).stream(), s);
}

TEST(Streams, CrossDeviceInputsAreCopied) {
  register_test_backends();
  Array a = array<float>({1, 2, 3}, {3}, device("reference"));
  for (const char* name : {"mirror", "amirror"}) {
    ProfileScope prof;
    Array b = exp(a, device(name));
    Array c = b + ones({3}, float32, device("reference"));  // back on the reference device
    expect_near(c.to_vector<float>(), {std::exp(1.0) + 1, std::exp(2.0) + 1, std::exp(3.0) + 1});
    int to_mirror = 0, to_reference = 0;
    for (const auto& e : prof.events())
      if (e.name == "copy") (e.device.backend == name ? to_mirror : to_reference)++;
    EXPECT_EQ(to_mirror, 1) << name;     // a: reference -> mirror
    EXPECT_EQ(to_reference, 1) << name;  // b: mirror -> reference
  }
}

TEST(Streams, AsyncDeviceQueues) {
  register_test_backends();
  Device am = device("amirror");
  StreamScope scope(am);
  Array x = arange(0.0, 100.0, 1.0);
  Array y = sum(sqrt(x) * 2.0);
  Array z = matmul(reshape(x, {10, 10}), reshape(x, {10, 10}));
  eval({y, z});
  double want = 0;
  for (int i = 0; i < 100; ++i) want += 2 * std::sqrt(i);
  EXPECT_NEAR(y.item<float>(), want, 1e-3);
  EXPECT_FLOAT_EQ(z.to_vector<float>()[0], 2850);  // row 0 . column 0 = sum_k k * 10k
}

TEST(Streams, FailingKernelFailsOnlyItsDependents) {
  register_test_backends();
  Device br = device("broken");
  Array x = array<float>({0.5f, 1.0f}, {2}, device("reference"));
  Array good = exp(x, br);
  Array bad = erf(x, br);
  Array after = bad + 1.0;
  expect_error([&] { eval({good, after}); }, {"erf", "failed to build", "broken"});
  EXPECT_TRUE(good.is_evaluated()) << "the independent array was computed in the same submission";
  expect_near(good.to_vector<float>(), {std::exp(0.5), std::exp(1.0)});
  expect_error([&] { after.to_vector<float>(); }, {"erf"});
  expect_error([&] { (after * 2.0).to_vector<float>(); }, {"erf"});
  // The stream and other arrays stay usable.
  expect_near((x * 3.0).to_vector<float>(), {1.5, 3});
  expect_near(exp(x, br).to_vector<float>(), {std::exp(0.5), std::exp(1.0)});
}

TEST(Streams, TwoStreamsInTwoThreads) {
  Device r = device("reference");
  Stream s1 = new_stream(r), s2 = new_stream(r);
  ProfileScope prof;
  auto work = [](Stream s, float base, std::vector<float>* out) {
    StreamScope scope(s);
    Array acc = full({64}, base, float32);
    for (int i = 0; i < 50; ++i) {
      acc = acc + 1.0f;
      eval(acc);  // one submission per iteration, in order
    }
    *out = acc.to_vector<float>();
  };
  std::vector<float> r1, r2;
  std::thread t1(work, s1, 0.0f, &r1), t2(work, s2, 1000.0f, &r2);
  t1.join();
  t2.join();
  for (float v : r1) EXPECT_EQ(v, 50);
  for (float v : r2) EXPECT_EQ(v, 1050);
  // Per stream, submissions completed in order and never overlapped.
  for (Stream s : {s1, s2}) {
    int64_t last_end = 0;
    int n = 0;
    for (const auto& e : prof.events())
      if (e.stream == s && e.name == "add") {
        EXPECT_GE(e.start_ns, last_end);
        last_end = e.end_ns;
        ++n;
      }
    EXPECT_EQ(n, 50);
  }
}

TEST(Streams, SynchronizeReturns) {
  Stream s = new_stream(device("reference"));
  Array a = ones({4}, float32, s) * 2.0;
  eval(a);
  synchronize(s);
  synchronize();
  EXPECT_FLOAT_EQ(sum(a).item<float>(), 8);
}

TEST(Streams, ManyThreadsEvaluateOneGraph) {
  // Shared lazy arrays evaluated from several threads at once: each node is computed once and
  // every thread sees the finished value.
  for (int round = 0; round < 20; ++round) {
    Array x = arange(0.0, 1000.0, 1.0);
    Array shared = exp(x / 1000.0f) * 2.0f;
    std::vector<Array> per_thread;
    for (int t = 0; t < 4; ++t) per_thread.push_back(sum(shared + static_cast<float>(t)));
    std::vector<float> got(4);
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        got[t] = per_thread[t].item<float>();
        eval(shared);
      });
    for (auto& th : ts) th.join();
    double base = 0;
    for (int i = 0; i < 1000; ++i) base += 2 * std::exp(i / 1000.0);
    for (int t = 0; t < 4; ++t) EXPECT_NEAR(got[t], base + 1000 * t, 1e-2 * (1 + base));
  }
}
