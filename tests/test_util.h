// Small helpers shared by the tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include <string>
#include <vector>

#include "kiln.h"

namespace kiln::test {

// Runs `f` and checks it raises kiln::Error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected kiln::Error mentioning '" << (parts.empty() ? "" : parts[0])
                  << "', nothing was raised";
  } catch (const kiln::Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message '" << msg << "' lacks '" << p << "'";
  }
}

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(static_cast<double>(got[i]), want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
}

}  // namespace kiln::test
