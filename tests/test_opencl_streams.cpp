// The opencl backend through the whole pipeline: eager ops and compiled functions on opencl
// streams, one trace serving cpu and opencl callers, functions whose explicit streams mix cpu
// and opencl lanes (copies both ways, visible in the profile), compute_on pins, errors that
// fail only their dependents.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

#include "device_lanes.h"
#include "kiln.h"
#include "test_util.h"

namespace kiln {
namespace {

bool have_opencl() { return test::backend_available("opencl"); }

#define REQUIRE_OPENCL() \
  if (!have_opencl()) GTEST_SKIP() << "no usable OpenCL device"

std::vector<float> iota(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = (static_cast<float>(i) - n / 2.0f) * scale;
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

#ifdef KILN_CLI_PATH
std::string run_cli(const std::string& cmd, int* status) {
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  *status = p ? pclose(p) : -1;
  return out;
}
#endif

TEST(OpenclStreams, EnvironmentSelectsOpencl) {
#ifdef KILN_CLI_PATH
  REQUIRE_OPENCL();
  int status = 0;
  std::string out =
      run_cli(std::string("KILN_DEVICE=opencl ") + KILN_CLI_PATH + " devices", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("default: opencl:0"), std::string::npos) << out;
  out = run_cli(std::string("KILN_DEVICE=opencl:9 ") + KILN_CLI_PATH + " devices 2>&1", &status);
  EXPECT_NE(status, 0);  // by name: used or refused, never replaced by cpu
  EXPECT_NE(out.find("opencl:9"), std::string::npos) << out;
  // No ICD (the loader pointed at an empty vendor folder): listed as missing, with the reason,
  // and asking for it by name fails instead of running on cpu.
  std::string no_icd = "OCL_ICD_VENDORS=/nonexistent-kiln-icd-dir ";
  out = run_cli(no_icd + KILN_CLI_PATH + " devices", &status);
  EXPECT_EQ(status, 0);
  EXPECT_NE(out.find("no OpenCL platform found"), std::string::npos) << out;
  EXPECT_NE(out.find("install an ICD"), std::string::npos) << out;
  out = run_cli(no_icd + "KILN_DEVICE=opencl " + KILN_CLI_PATH + " devices 2>&1", &status);
  EXPECT_NE(status, 0);
  EXPECT_NE(out.find("not available"), std::string::npos) << out;
#else
  GTEST_SKIP() << "the kiln command is not built";
#endif
}

TEST(OpenclStreams, EagerOpsRunOnTheDevice) {
  REQUIRE_OPENCL();
  Device cl = device("opencl");
  Array x = array(iota(1000, 0.01f), {10, 100});
  ProfileScope prof;
  Array y = softmax(x * 2.0f, -1, cl);
  EXPECT_EQ(y.device(), cl);
  auto got = y.to_vector<float>();
  Array ref = softmax(x * 2.0f, -1, device("reference"));
  expect_close(got, ref.to_vector<float>(), 1e-5f);
  bool ran_on_cl = false, copied = false;
  for (const TaskEvent& e : prof.events()) {
    ran_on_cl = ran_on_cl || (e.device == cl && e.name != "copy");
    copied = copied || (e.device == cl && e.name == "copy");
  }
  EXPECT_TRUE(ran_on_cl);
  EXPECT_TRUE(copied);  // x lives in host memory: a plan copy task moved it
}

TEST(OpenclStreams, OneTraceServesCpuAndOpenclCallers) {
  REQUIRE_OPENCL();
  std::atomic<int> traces{0};
  auto f = compile([&](const std::vector<Array>& in) {
    ++traces;
    Array x = in[0];
    return std::vector<Array>{x * (1.0f + erf(x * 0.70710678f)) * 0.5f, sum(exp(x), -1)};
  });
  Array x = array(iota(4096, 0.003f), {8, 512});
  std::vector<std::vector<float>> results[2];
  const char* devs[] = {"cpu", "opencl"};
  for (int i = 0; i < 2; ++i) {
    StreamScope scope(device(devs[i]));
    auto out = f({x});
    EXPECT_EQ(out[0].device(), device(devs[i]));
    for (Array& o : out) results[i].push_back(o.to_vector<float>());
  }
  EXPECT_EQ(traces.load(), 1);
  for (size_t o = 0; o < 2; ++o) expect_close(results[1][o], results[0][o], 2e-5f);
}

TEST(OpenclStreams, MixedLanesCopyBothWays) {
  REQUIRE_OPENCL();
  Device cl = device("opencl"), cpu = device("cpu");
  Stream cs = new_stream(cpu), os = new_stream(cl);
  auto f = compile([&](const std::vector<Array>& in) {
    Array a = exp(in[0] * 0.5f, os);      // opencl lane
    Array b = tanh(a, cs) + in[1];        // cpu lane reads an opencl result
    Array c = sum(b * a, -1, false, os);  // back on opencl
    return std::vector<Array>{c, b};
  });
  Array x = array(iota(600, 0.01f), {6, 100}), y = array(iota(600, 0.02f), {6, 100});
  std::vector<TaskEvent> events;
  std::vector<Array> out;
  {
    ProfileScope prof;
    out = f({x, y});
    eval(out);
    events = prof.events();
  }
  Array a = exp(x * 0.5f, device("reference")), b = tanh(a) + y;
  expect_close(out[0].to_vector<float>(), sum(b * a, -1).to_vector<float>(), 1e-5f);
  expect_close(out[1].to_vector<float>(), b.to_vector<float>(), 1e-5f);
  EXPECT_EQ(out[0].device(), cl);
  EXPECT_EQ(out[1].device(), cpu);
  int to_cpu = 0, to_cl = 0;
  for (const TaskEvent& e : events)
    if (e.name == "copy") (e.device == cpu ? to_cpu : to_cl) += 1;
  EXPECT_GE(to_cpu, 1);  // a -> cpu lane
  EXPECT_GE(to_cl, 2);   // inputs and b -> opencl lane
  // Called again (the binding and the compiled kernels are reused).
  auto again = f({x, y});
  expect_close(again[0].to_vector<float>(), out[0].to_vector<float>(), 0);
}

TEST(OpenclStreams, ComputeOnPinsOpsToTheDevice) {
  REQUIRE_OPENCL();
  Device cl = device("opencl");
  auto f = compile(compute_on(cl, [](const std::vector<Array>& in) {
    return std::vector<Array>{maximum(in[0], zeros({1})) * 3.0f};
  }));
  StreamScope scope(device("cpu"));
  auto out = f({array(iota(64, 1.0f), {64})});
  EXPECT_EQ(out[0].device(), cl);
  auto v = out[0].to_vector<float>();
  for (int i = 0; i < 64; ++i) EXPECT_EQ(v[i], std::max(0.0f, i - 32.0f) * 3.0f);
}

TEST(OpenclStreams, MatmulAndRandomOnTheDevice) {
  REQUIRE_OPENCL();
  Device cl = device("opencl");
  Array a = random::normal({3, 20, 30}, float32, random::key(1), cl);
  Array b = random::normal({30, 10}, float32, random::key(2), cl);
  Array c = matmul(a, b, cl);
  Array ar = random::normal({3, 20, 30}, float32, random::key(1), device("reference"));
  Array br = random::normal({30, 10}, float32, random::key(2), device("reference"));
  expect_close(a.to_vector<float>(), ar.to_vector<float>(), 1e-6f);
  expect_close(c.to_vector<float>(), matmul(ar, br).to_vector<float>(), 1e-5f);
}

// The kernel intervals of `a` and `b` in the profile overlap in time.
bool overlap(const std::vector<TaskEvent>& events, const Device& a, const Device& b) {
  for (const TaskEvent& x : events)
    for (const TaskEvent& y : events)
      if (x.device == a && y.device == b && x.name != "copy" && y.name != "copy" &&
          x.start_ns < y.end_ns && y.start_ns < x.end_ns)
        return true;
  return false;
}

// One thread keeps a cpu lane and an opencl lane busy at once: a compiled call returns when its
// plan is submitted, so the second call starts while the first still runs, in either order.
TEST(OpenclStreams, OneThreadKeepsCpuAndOpenclLanesBusy) {
  REQUIRE_OPENCL();
  Device cl = device("opencl"), cpu = device("cpu");
  // Compute-bound (one fused kernel of several transcendental steps) and long enough on either
  // device (tens of ms) that the calling thread, which competes with the cpu lane for this
  // machine's cores, submits the second call while the first still runs.
  auto gelu = compile([](const std::vector<Array>& in) {
    Array x = in[0];
    for (int i = 0; i < 6; ++i) x = x * (1.0f + erf(x * 0.70710678f)) * 0.5f + tanh(x);
    return std::vector<Array>{x};
  });
  Array x = array(iota(1 << 23, 1e-7f), {1 << 23});
  Array xc = negative(negative(x, cl), cl);  // the opencl call's input lives on the device
  eval(xc);
  Stream cs = new_stream(cpu), os = new_stream(cl);
  auto on = [&](const Stream& s, const Array& in) {
    StreamScope scope(s);
    return gelu({in})[0];
  };
  on(cs, x).to_vector<float>(), on(os, xc).to_vector<float>();  // compile both first
  // A GPU runs the call far faster than the cpu lane (an H100: 0.17 against 9 ms), so it issues
  // enough calls in a row to stay busy for about twice the cpu call's time.
  auto seconds = [](const std::function<void()>& f) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  double t_cpu = seconds([&] { eval(on(cs, x)); }), t_cl = seconds([&] { eval(on(os, xc)); });
  const int calls = static_cast<int>(std::clamp(2 * t_cpu / std::max(t_cl, 1e-6), 1.0, 200.0));
  auto device_calls = [&] {
    Array last = x;
    for (int i = 0; i < calls; ++i) last = on(os, xc);
    return last;
  };
  for (bool cpu_first : {true, false}) {
    std::vector<TaskEvent> events;
    Array a = x, b = x;
    {
      ProfileScope prof;
      if (cpu_first) {
        a = on(cs, x);
        b = device_calls();
      } else {
        b = device_calls();
        a = on(cs, x);
      }
      eval({a, b});
      events = prof.events();
    }
    std::string listing;
    for (const TaskEvent& e : events)
      listing += e.name + " " + e.device.str() + " " + std::to_string(e.start_ns % 100000000) +
                 ".." + std::to_string(e.end_ns % 100000000) + "\n";
    EXPECT_TRUE(overlap(events, cpu, cl))
        << (cpu_first ? "cpu first\n" : "opencl first\n") << listing;
    expect_close(b.to_vector<float>(), a.to_vector<float>(), 2e-5f);
  }
}

// async_eval on an opencl lane returns before the device finishes; eval waits; errors of the
// work reach whoever waits.
TEST(OpenclStreams, AsyncEvalAndCompiledCallsOnTheDevice) {
  REQUIRE_OPENCL();
  Device cl = device("opencl");
  Stream s = new_stream(cl);
  Array xr = array(iota(1 << 16, 1e-4f), {1 << 16}, float32, device("reference"));
  float want =
      sum(tanh(xr, device("reference")) * 2.0f, -1, false, device("reference")).item<float>();
  StreamScope scope(s);
  Array x = array(iota(1 << 16, 1e-4f), {1 << 16});
  Array y = sum(tanh(x) * 2.0f);
  async_eval(y);
  EXPECT_NEAR(y.item<float>(), want, 1e-3f);
  // Many in-flight calls from one thread, read back in reverse.
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{in[0] * 3.0f}; });
  std::vector<Array> outs;
  for (int i = 0; i < 40; ++i) outs.push_back(f({full({256}, static_cast<float>(i))})[0]);
  for (int i = 39; i >= 0; --i) EXPECT_EQ(outs[i].to_vector<float>()[255], 3.0f * i);
  // Dropped without waiting: synchronize returns once the work is done.
  for (int i = 0; i < 10; ++i) f({x});
  synchronize(s);
}

// Lanes of one opencl device order through device events (a barrier with the producer's
// event in its wait list), and cpu producers reach opencl work through signals (user events);
// the scenarios are tests/device_lanes.h's.
TEST(OpenclStreams, LanesOfOneDeviceOrderThroughDeviceEvents) {
  REQUIRE_OPENCL();
  test::two_lanes_of_one_device(device("opencl"));
}

TEST(OpenclStreams, CpuProducersReachOpenclThroughSignals) {
  REQUIRE_OPENCL();
  test::cpu_producer_feeds_device(device("opencl"));
}

TEST(OpenclStreams, ErrorsFailOnlyTheirDependents) {
  REQUIRE_OPENCL();
  Device cl = device("opencl");
  // A launch that cannot run (a matmul of mismatched shapes never gets here: shapes are
  // checked when traced); an unknown device index raises at selection, before any work.
  EXPECT_THROW(device("opencl:99"), Error);
  EXPECT_THROW(ones({2}, float32, Device{"opencl", 99}), Error);
  Array ok = ones({4}, float32, cl) * 2.0f;
  EXPECT_EQ(ok.to_vector<float>(), (std::vector<float>{2, 2, 2, 2}));
}

}  // namespace
}  // namespace kiln
