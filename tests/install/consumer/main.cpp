// Built against an installed Kiln (tests/install/check.sh): compiles a function, runs it on the
// cpu backend and checks the values, so a broken package fails here rather than for a user.
#include <cmath>
#include <cstdio>

#include "kiln.h"

int main() {
  using namespace kiln;
  auto f =
      compile([](const std::vector<Array>& in) { return std::vector<Array>{exp(-in[0]) + 1.0f}; });
  StreamScope on_cpu(device("cpu"));
  Array y = f({array({0.0f, 1.0f, 2.0f}, {3})})[0];
  std::vector<float> v = y.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    if (std::abs(v[i] - (std::exp(-float(i)) + 1.0f)) > 1e-6f) {
      std::printf("wrong value at %d: %g\n", i, v[i]);
      return 1;
    }
  std::printf("installed kiln: ok on %s\n", y.device().str().c_str());
  return 0;
}
