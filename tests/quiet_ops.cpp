// Compiled and eager work over a few dtypes on every usable device, printing nothing: the part
// of tests/quiet_check.py that reaches kernels a compiler warns about (a value compared with
// itself, integer compares and casts), which the demo and bench never build. Any line on
// stdout or stderr is a driver's or compiler's, and fails the check.
#include <cstdint>
#include <vector>

#include "kiln.h"

namespace {

// x > x folds into one fused kernel as "v > v": clang warns "self-comparison always evaluates
// to false", and PoCL's clang printed "1 warning generated." for it.
std::vector<kiln::Array> fused(const std::vector<kiln::Array>& in) {
  using namespace kiln;
  Array x = astype(in[0], float32);
  return {where(greater(x, x), x * 2.0f, x), maximum(in[0], in[0]) + in[0]};
}

void sweep(const kiln::Device& d) {
  using namespace kiln;
  StreamScope scope(d);
  auto f = compile(fused);
  for (Dtype t : {int32, uint8, float32}) {
    Array a = astype(array(std::vector<int32_t>{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8}, {3, 4}), t);
    try {
      std::vector<Array> outs = f({a});
      outs.push_back(argmax(where(a > a, a, a), 1));
      eval(outs);
    } catch (const Error&) {
      // What a device does not offer for a dtype is Kiln's to report, not noise.
    }
  }
}

}  // namespace

int main() {
  for (const kiln::DeviceInfo& d : kiln::devices())
    if (d.available && d.device.backend != "reference") sweep(d.device);
  return 0;
}
