// Scenarios every backend whose queues wait on the device runs (tests/test_opencl_streams.cpp,
// tests/test_vulkan.cpp): compiled calls whose plans span lanes, enqueued whole at the call, that
// give wrong values if a device-side wait is lost.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kiln.h"

namespace kiln::test {

inline std::vector<float> ramp(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = static_cast<float>(i) * scale;
  return v;
}

// A producer on one lane of `dev` and consumers on another, thirty calls in flight: the
// consumer's queue waits for the producer's event on the device. Were the ordering lost, the
// consumer would read the previous call's (or uninitialised) values of the producer's output,
// whose buffer the pool hands back at each call.
inline void two_lanes_of_one_device(const Device& dev) {
  Stream s1 = new_stream(dev), s2 = new_stream(dev);
  auto f = compile([&](const std::vector<Array>& in) {
    Array a = tanh(in[0] * 1.5f, s1) + in[1];  // producer on s1
    Array b = sum(a * a, -1, false, s2);       // consumers on s2
    Array c = a * 2.0f + 1.0f;                 // (on the caller's stream: s2 below)
    return std::vector<Array>{b, c};
  });
  const int n = 1 << 18;
  std::vector<float> xs = ramp(n, 1e-5f);
  Array x = array(xs, {4, n / 4});
  std::vector<Array> bs, cs;
  StreamScope scope(s2);
  for (int i = 0; i < 30; ++i) {
    auto out = f({x, full({1}, static_cast<float>(i))});
    bs.push_back(out[0]);
    cs.push_back(out[1]);
  }
  for (int i = 0; i < 30; i += 7) {
    std::vector<float> c = cs[i].to_vector<float>(), b = bs[i].to_vector<float>();
    for (int j = 0; j < n; j += 997) {
      float a = std::tanh(xs[j] * 1.5f) + i;
      ASSERT_NEAR(c[j], a * 2.0f + 1.0f, 1e-4f * (1 + std::fabs(a))) << "call " << i;
    }
    double want = 0;
    for (int j = 0; j < n / 4; ++j) {
      double a = std::tanh(xs[j] * 1.5f) + i;
      want += a * a;
    }
    EXPECT_NEAR(b[0], want, 1e-4 * want) << "call " << i;
  }
  for (int i = 0; i < 30; ++i) bs[i].to_vector<float>();
}

// A cpu producer, a consumer on `dev` and a cpu consumer of that, in one compiled call: the
// device work is enqueued at the call and waits on the device for a signal the cpu task
// completes. Were that wait lost, the device would read the cpu output before it is written.
inline void cpu_producer_feeds_device(const Device& dev) {
  Stream cs = new_stream(device("cpu")), ds = new_stream(dev);
  auto f = compile([&](const std::vector<Array>& in) {
    Array a = tanh(in[0] * 1.5f, cs) + in[1];        // cpu producer
    Array b = add(exp(negative(a, ds), ds), a, ds);  // device consumer
    Array c = sum(b, -1, false, cs);                 // cpu consumer of the device result
    return std::vector<Array>{b, c};
  });
  const int n = 1 << 16;
  std::vector<float> xs = ramp(n, 1e-4f);
  Array x = array(xs, {4, n / 4});
  std::vector<std::vector<Array>> outs;
  for (int i = 0; i < 20; ++i) outs.push_back(f({x, full({1}, static_cast<float>(i % 3))}));
  for (int i = 0; i < 20; ++i) {
    std::vector<float> b = outs[i][0].to_vector<float>(), c = outs[i][1].to_vector<float>();
    double row = 0;
    for (int j = 0; j < n; ++j) {
      float a = std::tanh(xs[j] * 1.5f) + static_cast<float>(i % 3);
      float want = std::exp(-a) + a;
      if (j % 331 == 0) {
        ASSERT_NEAR(b[j], want, 1e-5f * (1 + std::fabs(want))) << i << " " << j;
      }
      if (j < n / 4) row += b[j];
    }
    EXPECT_NEAR(c[0], row, 1e-4 * std::fabs(row)) << "call " << i;
  }
  EXPECT_EQ(outs[0][0].device(), dev);
  EXPECT_EQ(outs[0][1].device(), device("cpu"));
}

}  // namespace kiln::test
