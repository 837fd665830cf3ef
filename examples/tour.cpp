// The README's tour, with checks after it so that running it means something (test
// ReadmeTour). The README's copy is itself built and run by DocSnippets.README
// (tools/doc_snippets.py); keep the two the same. Laid out exactly as the README shows it, hence
// no clang-format down to the tour's checks.
// clang-format off
#include <cmath>
#include <cstdio>

#include "kiln.h"
using namespace kiln;

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

int main() {
  // Arrays are lazy: ops record a graph; nothing runs until a value is needed.
  Array x = random::normal({8, 64, 128}, float32, random::key(0));
  Array y = gelu(x);                      // eager: one kernel per primitive
  float m = mean(y).item<float>();        // item()/to_vector() evaluate implicitly

  // compile: traced once per input signature (count, dtypes, shapes), fused into one kernel.
  auto f = compile([](const std::vector<Array>& in) { return std::vector<Array>{gelu(in[0])}; });
  Array z = f({x})[0];

  // Streams are resolved at each call, never frozen at the first trace.
  {
    StreamScope scope(new_stream(device("reference")));  // the interpreter, on a new lane
    Array r = f({x})[0];                                   // same trace, kernels for reference
  }

  // See which kernels ran where and when.
  ProfileScope prof;
  eval(f({x}));
  for (const TaskEvent& e : prof.events()) std::printf("%s on %s\n", e.name.c_str(), e.stream.str().c_str());
  prof.write_chrome_trace("trace.json");  // chrome://tracing or Perfetto

  save_npy("y.npy", y);                   // load_npy() brings NumPy data in

  // clang-format on
  // (The tour's checks.)
  bool ok = std::fabs(mean(z).item<float>() - m) < 1e-5f && !prof.events().empty();
  std::printf("tour %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
