// Golden fusion listings: what compile makes of a few reference functions (its Plan and every
// kernel's Kernel IR), compared with the text checked in under tests/golden/. A change in fusion
// decisions shows up here as a readable diff. When a change is intended, regenerate with
//   KILN_UPDATE_GOLDEN=1 build/tests/kiln_tests --gtest_filter='Golden.*'
// and review the diff of tests/golden/ like any other code change.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>

#include "compile/lower.h"
#include "compile/passes.h"
#include "graph/array_node.h"
#include "graph/trace_state.h"
#include "kiln.h"

namespace kiln {
namespace {

using Fn1 = std::function<std::vector<Array>(const std::vector<Array>&)>;

// Traces `fn` over placeholders of the given shapes exactly as compile does (simplify, fuse,
// lower) and renders the plan and its kernels.
std::string listing(const Fn1& fn, const std::vector<Shape>& shapes,
                    const std::vector<Dtype>& dtypes) {
  std::vector<Array> ph;
  for (size_t i = 0; i < shapes.size(); ++i)
    ph.push_back(make_array(shapes[i], i < dtypes.size() ? dtypes[i] : float32, Op::Placeholder, {},
                            {}, ResolvedStream{current_stream(), StreamOrigin::Default}));
  std::vector<Array> outs;
  {
    TraceStateGuard tracing;
    outs = fn(ph);
  }
  LowerOptions lo;
  lo.eager = false;
  lo.fuse = true;
  LoweredGraph lg = lower(simplify(outs, ph), ph, lo);
  std::ostringstream os;
  os << lg.plan.str();
  for (const Task& t : lg.plan.tasks())
    if (t.kernel) os << t.kernel->str();
  return os.str();
}

Array gelu(const Array& x) { return x * (1.0f + erf(x / std::sqrt(2.0f))) / 2.0f; }

struct Case {
  const char* name;
  Fn1 fn;
  std::vector<Shape> shapes;
  std::vector<Dtype> dtypes = {};  // float32 where left out
};

std::vector<Case> cases() {
  return {
      {"gelu",
       [](const std::vector<Array>& in) { return std::vector<Array>{gelu(in[0])}; },
       {{32, 64}}},
      {"softmax",
       [](const std::vector<Array>& in) { return std::vector<Array>{softmax(in[0], -1)}; },
       {{32, 64}}},
      // softmax, log_softmax, layer_norm and rms_norm: one row kernel each (kernel_ir.h,
      // invariant 6), its passes the kernels fusion made before.
      {"log_softmax",
       [](const std::vector<Array>& in) { return std::vector<Array>{nn::log_softmax(in[0])}; },
       {{32, 64}}},
      {"rms_norm",
       [](const std::vector<Array>& in) { return std::vector<Array>{nn::rms_norm(in[0], in[1])}; },
       {{32, 64}, {64}}},
      {"layer_norm",
       [](const std::vector<Array>& in) {
         Array mu = mean(in[0], -1, true);
         Array var = mean((in[0] - mu) * (in[0] - mu), -1, true);
         return std::vector<Array>{(in[0] - mu) * rsqrt(var + 1e-5f) * in[1] + in[2]};
       },
       {{32, 64}, {64}, {64}}},
      {"mlp_block",
       [](const std::vector<Array>& in) {
         Array h = gelu(matmul(in[0], in[1]) + in[2]);
         return std::vector<Array>{matmul(h, in[3]) + in[4]};
       },
       {{16, 32}, {32, 64}, {64}, {64, 32}, {32}}},
      {"reduction_with_epilogue",
       [](const std::vector<Array>& in) {
         return std::vector<Array>{sqrt(sum(in[0] * in[0], -1) / 64.0f) + 1.0f};
       },
       {{32, 64}}},
      // 30 inputs exceed the kernel buffer bound (24): fusion splits the sum into two kernels.
      {"many_inputs",
       [](const std::vector<Array>& in) {
         Array acc = in[0];
         for (size_t i = 1; i < in.size(); ++i) acc = acc + in[i] * float(i);
         return std::vector<Array>{exp(acc)};
       },
       std::vector<Shape>(30, Shape{16})},
      // Two outputs of one shape share a kernel, unless one reads the other at another element.
      {"outputs_sharing_a_kernel",
       [](const std::vector<Array>& in) {
         Array y = exp(in[0]);
         return std::vector<Array>{y, in[0] * 2.0f, transpose(y, {1, 0}) + 1.0f};
       },
       {{16, 16}}},
      // A reduction read by two consumers is stored once; a non-affine reshape of a computed
      // value reads a stored buffer.
      {"shared_reduction_and_reshape",
       [](const std::vector<Array>& in) {
         Array m = max(in[0], -1, true);
         Array e = exp(in[0] - m);
         Array r = reshape(transpose(e, {1, 0}), {2048});
         return std::vector<Array>{e / m, r + 1.0f};
       },
       {{32, 64}}},
      // An embedding scaled and shifted: the gather is read through its indices inside the
      // element-wise kernel (a Gather value), not stored first.
      {"fused_gather",
       [](const std::vector<Array>& in) {
         return std::vector<Array>{take(in[0], in[1], 0) * in[2] + in[3]};
       },
       {{100, 16}, {8}, {16}, {16}},
       {float32, int64}},
  };
}

std::string golden_path(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/tests/golden/" + name + ".txt";
}

TEST(Golden, FusionListingsMatch) {
  StreamScope scope(device("reference"));
  bool update = std::getenv("KILN_UPDATE_GOLDEN") != nullptr;
  for (const Case& c : cases()) {
    std::string got = listing(c.fn, c.shapes, c.dtypes);
    if (update) {
      std::ofstream(golden_path(c.name)) << got;
      continue;
    }
    std::ifstream f(golden_path(c.name));
    ASSERT_TRUE(f.good()) << "missing " << golden_path(c.name)
                          << " (create it with KILN_UPDATE_GOLDEN=1, see this file's header)";
    std::stringstream want;
    want << f.rdbuf();
    EXPECT_EQ(got, want.str()) << "fusion of " << c.name << " changed; if intended, regenerate "
                               << "with KILN_UPDATE_GOLDEN=1 (tests/test_golden.cpp)";
  }
}

}  // namespace
}  // namespace kiln
