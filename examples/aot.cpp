// Ahead of time: lower a function with a host-pinned part, read its text, costs and memory, and
// run the executable from two callers. The same placements as a direct call, on every path.
#include <cstdio>

#include "kiln.h"

using namespace kiln;

int main(int argc, char** argv) {
  // The heavy part is pinned to the cpu backend; the rest runs wherever the caller runs.
  CompiledFunction f = compile([](const std::vector<Array>& in) {
    Array h = compute_on(device("cpu"), [](const Array& a) { return exp(a) * 2.0f; })(in[0]);
    return std::vector<Array>{sum(h, -1, true) + in[0]};
  });
  Array x = random::normal({4, 8}, float32, random::key(0));

  Lowered lowered = f.lower({x});  // traces and lowers; runs nothing
  std::printf("%s\n", lowered.as_text().c_str());
  std::printf("cost analysis:\n%s\n", lowered.cost_analysis().str().c_str());

  Executable exe = lowered.compile();  // builds the kernels
  std::printf("memory analysis:\n%s\n", exe.memory_analysis().str().c_str());

  for (const char* caller : {"cpu", "reference"}) {
    StreamScope scope(new_stream(device(caller)));
    ProfileScope prof;
    Array direct = f({x})[0], aot = exe({x})[0];
    eval({direct, aot});
    std::printf("caller on %s: direct == aot: %s; tasks:", caller,
                direct.to_vector<float>() == aot.to_vector<float>() ? "yes" : "NO");
    for (const TaskEvent& e : prof.events())
      std::printf(" %s@%s", e.name.c_str(), e.device.str().c_str());
    std::printf("\n");
  }

  // Artifacts: the executable saved, loaded back and run as it was (with a directory argument,
  // a few are written there: they are the artifact fuzzer's seeds).
  std::string dir = argc > 1 ? argv[1] : ".";
  exe.save(dir + "/pinned.kiln");
  Executable back = Executable::load(dir + "/pinned.kiln");
  std::printf("saved and loaded back: text equal: %s, results equal: %s\n",
              back.as_text() == exe.as_text() ? "yes" : "NO",
              back({x})[0].to_vector<float>() == exe({x})[0].to_vector<float>() ? "yes" : "NO");
  if (argc > 1) {
    Array w = random::normal({8, 3}, float32, random::key(1));
    CompiledFunction g = compile([w](const std::vector<Array>& in) {
      return std::vector<Array>{matmul(in[0], w) + 1.0f, softmax(in[0], -1), argmax(in[0], 0)};
    });
    g.lower({x}).compile().save(dir + "/matmul_softmax.kiln");
    CompiledFunction h = compile(
        [](const std::vector<Array>& in) { return std::vector<Array>{in[0] * in[1] - 2.0f}; },
        {.shapeless = true});
    h.lower({x, x}).compile().save(dir + "/shapeless.kiln");
  }
  return 0;
}
