// The table of per-primitive rules (compile/rules.h): every primitive has the rules the passes,
// fusion and transforms ask for, and the launch values a rules entry gives an eager kernel are
// the ones its emission asks for, so a cached kernel runs with the right values.
#include <gtest/gtest.h>

#include "compile/eager_kernels.h"
#include "compile/kernel_emit.h"
#include "compile/rules.h"
#include "graph/ops.h"
#include "graph/random.h"
#include "transforms/rules.h"

using namespace kiln;

namespace {

constexpr Op kLastOp = Op::ScatterAdd;

Device ref() { return device("reference"); }

// The params emitting `a`'s node alone gives (fusion off, as eval does), and the ones a cached
// kernel of the same structure gets from the node's rules; both are empty without a cache hit.
struct EagerParams {
  std::vector<int64_t> emitted;
  std::optional<std::vector<int64_t>> cached;
};

EagerParams eager_params(const Array& a) {
  const ArrayNode& n = *a.node();
  NodeSet stored{&n};
  LeafFn leaf = [&](const ArrayNode& x) { return x.data != nullptr; };
  FusionGroup g{FusionGroup::Kind::Primitive, {&n}};
  EagerParams r;
  FusedStep s = emit_kernel(g, stored, leaf, false);
  r.emitted = s.params;
  remember_eager_step(n, s, stored);
  if (std::optional<FusedStep> c = cached_eager_step(n, stored)) r.cached = c->params;
  return r;
}

}  // namespace

TEST(Rules, EveryPrimitiveHasItsRequiredRules) {
  for (int i = 0; i <= static_cast<int>(kLastOp); ++i) {
    Op op = static_cast<Op>(i);
    const PrimitiveRules& r = rules(op);
    SCOPED_TRACE(op_name(op));
    EXPECT_NE(r.shape, nullptr);
    EXPECT_NE(r.input_view, nullptr);
    const TransformRules& t = transform_rules(op);
    EXPECT_NE(t.vjp, nullptr);
    EXPECT_NE(t.jvp, nullptr);
    EXPECT_NE(t.vmap, nullptr);
    // A node fusion computes inline needs a way to emit it.
    EXPECT_TRUE(!r.fuses_inline || r.emit);
    // Launch values are those of an emission: none without one.
    EXPECT_TRUE(r.emit || !r.launch_values);
  }
}

// Fills, aranges and draws give their own launch values (compile/rules/sources.cpp); other
// primitives take their 0-d constant inputs'. Two nodes of one structure and different values:
// the second is served from the cache with its own values, in the emitter's order.
TEST(Rules, EagerLaunchValuesMatchEmission) {
  Array x = array<float>({1, 2, 3}, {3}, ref());
  Array cond = array<bool>({true, false, true}, {3}, ref());
  std::vector<std::pair<Array, Array>> pairs{
      {full({3}, 2.5, float32, ref()), full({3}, -7.0, float32, ref())},
      {arange(1.0, 4.0, 1.0, float32, ref()), arange(10.0, 16.0, 2.0, float32, ref())},
      {arange(0.0, 3.0, 1.0, int32, ref()), arange(5.0, 2.0, -1.0, int32, ref())},
      {random::uniform({3}, float32, random::key(1), ref()),
       random::uniform({3}, float32, random::key(2), ref())},
      {x + 2.0f, x + 5.0f},
      {where(cond, array(3.0f, ref()), x), where(cond, array(-1.0f, ref()), x)},
  };
  for (auto& [first, second] : pairs) {
    SCOPED_TRACE(primitive_name(first.node()->op, first.node()->params));
    EagerParams a = eager_params(first), b = eager_params(second);
    ASSERT_TRUE(a.cached.has_value());
    ASSERT_TRUE(b.cached.has_value());
    EXPECT_EQ(*a.cached, a.emitted);
    EXPECT_EQ(*b.cached, b.emitted);
    EXPECT_NE(a.emitted, b.emitted);  // the values differ; the structure (the kernel) does not
  }
  // Arange's values are its step, then its start, as arange_emit asks for them.
  EagerParams r = eager_params(arange(10.0, 16.0, 2.0, float32, ref()));
  EXPECT_EQ(r.emitted, (std::vector<int64_t>{launch_word(Scalar::of(2.0).cast(float32)),
                                             launch_word(Scalar::of(10.0).cast(float32))}));
}
