// Buffer donation: a compiled function's captured state outputs are written into the old
// state's buffers when nothing outside the call can still read them (executor/donation.cpp
// chooses where it is safe, the executor checks at each call that the caller let go).
#include "compile/aot.h"
#include "executor/executor.h"
#include "graph/array_node.h"
#include "test_backends.h"
#include "test_util.h"

using namespace kiln;
using kiln::test::values;

namespace {

constexpr int64_t kN = 64 * 1024;  // 256 KiB of float32: pooled cpu memory

Array ramp() { return astype(arange(0, kN, 1), float32) / 1000.0f; }

// One state array updated element-wise, as an optimizer updates a parameter.
struct Step {
  std::vector<Array> w{ramp()};
  CompiledFunction f;
  explicit Step(std::function<Array(const Array&, const Array&)> update) {
    f = compile(
        [this, update](const std::vector<Array>& a) {
          w[0] = update(w[0], a[0]);
          return std::vector<Array>{sum(w[0])};
        },
        {.inputs = {&w}, .outputs = {&w}});
  }
  Array operator()(const Array& x) { return f({x})[0]; }
  size_t analysed_donation() {
    size_t n = 0;
    for (const auto& [dev, d] : f.lower({array(0.5f)}).compile().memory_analysis().devices)
      n += d.donated_bytes;
    return n;
  }
};

Array axpy(const Array& w, const Array& x) { return w * 0.5f + x; }

}  // namespace

TEST(Donation, CompiledStepWritesIntoTheDroppedState) {
  Step step(axpy);
  eval(step.w);
  step(array(1.0f)).item<float>();  // traces; the first call may still see the trace's copies
  EXPECT_EQ(step.analysed_donation(), kN * 4u);
  for (int i = 0; i < 3; ++i) {
    const Buffer* old = array_buffer(step.w[0]).get();
    size_t donated = donated_bytes();
    step(array(1.0f)).item<float>();
    EXPECT_EQ(donated_bytes() - donated, kN * 4u) << "step " << i;
    EXPECT_EQ(array_buffer(step.w[0]).get(), old) << "step " << i;
  }
}

TEST(Donation, HeldStateIsNotDonatedAndKeepsItsValues) {
  Step step(axpy);
  step(array(1.0f)).item<float>();
  Array held = step.w[0];
  std::vector<double> before = values(held);
  const Buffer* old = array_buffer(held).get();
  size_t donated = donated_bytes();
  step(array(1.0f)).item<float>();
  EXPECT_EQ(donated_bytes(), donated);
  EXPECT_NE(array_buffer(step.w[0]).get(), old);
  EXPECT_EQ(values(held), before);
  // A lazy array reading the old state holds it too.
  Array later = step.w[0] * 2.0f;
  std::vector<double> want = values(step.w[0] * 2.0f);
  step(array(1.0f)).item<float>();
  EXPECT_EQ(values(later), want);
}

TEST(Donation, ResultsEqualTheRunThatDoesNotDonate) {
  Step donating(axpy), keeping(axpy);
  std::vector<Array> kept;
  for (int i = 0; i < 4; ++i) {
    Array x = array(0.25f * static_cast<float>(i));
    float a = donating(x).item<float>();
    kept.push_back(keeping.w[0]);  // holding every old state: no donation
    float b = keeping(x).item<float>();
    EXPECT_EQ(a, b);
    EXPECT_EQ(values(donating.w[0]), values(keeping.w[0]));
  }
  std::vector<double> want(kN);
  for (int64_t i = 0; i < kN; ++i) {
    float w = static_cast<float>(i) / 1000.0f;
    for (int s = 0; s < 4; ++s) w = w * 0.5f + 0.25f * static_cast<float>(s);
    want[i] = w;
  }
  EXPECT_EQ(values(donating.w[0]), want);
}

// The donated bytes a compiled function's memory analysis reports for argument `x`.
size_t analysed_donation(const CompiledFunction& f, const Array& x) {
  size_t n = 0;
  for (const auto& [dev, d] : f.lower({x}).compile().memory_analysis().devices)
    n += d.donated_bytes;
  return n;
}

TEST(Donation, AnUnorderedReaderIsMadeToPrecedeTheWriter) {
  // sum(w) is a kernel of its own that the update did not wait for: now it does, and still
  // reads the old w.
  std::vector<Array> w{ramp()};
  CompiledFunction f = compile(
      [&](const std::vector<Array>& a) {
        Array total = sum(w[0]);
        w[0] = w[0] + a[0];
        return std::vector<Array>{total};
      },
      {.inputs = {&w}, .outputs = {&w}});
  EXPECT_EQ(analysed_donation(f, array(1.0f)), kN * 4u);
  double want = 0;
  for (int64_t i = 0; i < kN; ++i) want += static_cast<float>(i) / 1000.0f;
  EXPECT_NEAR(f({array(1.0f)})[0].item<float>(), want, want * 1e-5);
  size_t donated = donated_bytes();
  EXPECT_NEAR(f({array(1.0f)})[0].item<float>(), want + kN, want * 1e-5);
  EXPECT_EQ(donated_bytes() - donated, kN * 4u);
}

TEST(Donation, NotWhenATaskReadsTheStateAfterTheWriter) {
  // The matmul reads the new w (so runs after the update) and the old one: no donation.
  std::vector<Array> w{reshape(ramp(), {256, 256}) / 100.0f};
  eval(w);
  Array want = matmul(w[0] + 1.0f, w[0]);
  CompiledFunction f = compile(
      [&](const std::vector<Array>& a) {
        Array old = w[0];
        w[0] = w[0] + a[0];
        return std::vector<Array>{matmul(w[0], old)};
      },
      {.inputs = {&w}, .outputs = {&w}});
  EXPECT_EQ(analysed_donation(f, array(1.0f)), 0u);
  size_t donated = donated_bytes();
  Array got = f({array(1.0f)})[0];
  EXPECT_EQ(donated_bytes(), donated);
  std::vector<double> g = values(got), e = values(want);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], e[i], 1e-4 * std::abs(e[i]) + 1e-4);
}

TEST(Donation, NotWhenTheWriterReadsTheStateAtAnotherElement) {
  auto square = [] { return reshape(ramp(), {256, 256}); };
  for (bool both : {false, true}) {
    std::vector<Array> w{square()};
    CompiledFunction f = compile(
        [&](const std::vector<Array>& a) {
          Array t = transpose(w[0]) + a[0];
          w[0] = both ? t + w[0] : t;  // transposed alone, or transposed and as stored
          return std::vector<Array>{};
        },
        {.inputs = {&w}, .outputs = {&w}});
    EXPECT_EQ(analysed_donation(f, array(1.0f)), 0u) << both;
    std::vector<double> in = values(w[0]);
    size_t donated = donated_bytes();
    f({array(1.0f)});
    std::vector<double> got = values(w[0]);
    EXPECT_EQ(donated_bytes(), donated);
    for (int i = 0; i < 256; ++i)
      for (int j = 0; j < 256; ++j) {
        double want = static_cast<float>(static_cast<float>(in[j * 256 + i]) + 1.0f);
        if (both) want = static_cast<float>(static_cast<float>(want) + in[i * 256 + j]);
        ASSERT_EQ(got[i * 256 + j], want) << both << " " << i << "," << j;
      }
  }
}

TEST(Donation, AdamTrainingStepDonatesParametersAndState) {
  nn::MLP model({64, 128, 32}, nn::gelu, random::key(0));
  optim::Adam opt(model.parameters(), 1e-3);
  Array x = random::normal({16, 64}, float32, random::key(1));
  Array y = random::normal({16, 32}, float32, random::key(2));
  auto loss_and_grad = nn::value_and_grad(
      model, [&](const std::vector<Array>& a) { return nn::mse(model(a[0]), a[1]); });
  std::vector<std::vector<Array>*> state{&model.parameters().arrays(), &opt.state()};
  CompiledFunction step = compile(
      [&](const std::vector<Array>& a) {
        auto [loss, grads] = loss_and_grad(a);
        opt.update(model, grads);
        return std::vector<Array>{loss};
      },
      {.inputs = state, .outputs = state});
  step({x, y})[0].item<float>();
  size_t params = 0;
  for (const Array& p : model.parameters().arrays()) params += p.nbytes();
  size_t donated = donated_bytes();
  step({x, y})[0].item<float>();
  // Every parameter and its two Adam moments, except where a bias's update fuses with the
  // reduction that makes its gradient (no donation into reductions): at least 99% of them.
  EXPECT_GE(donated_bytes() - donated, 3 * params * 99 / 100);
  EXPECT_LE(donated_bytes() - donated, 3 * params + 64);
}

namespace {
// A device whose memory is full: allocations past 1 KiB fail. Its queues are asynchronous, so a
// plan on it binds its buffers when it is submitted and raises there, before anything runs.
class FullBackend : public test::MirrorBackend {
 public:
  FullBackend() : MirrorBackend("full", true) {}
  std::shared_ptr<Buffer> allocate(int device, size_t bytes) override {
    if (bytes > 1024) throw_error("full: out of device memory for ", bytes, " bytes (test double)");
    return MirrorBackend::allocate(device, bytes);
  }
};
}  // namespace

// The state is written back before the plan is submitted (so the plan can donate it). When the
// submission fails, nothing ran: the caller gets the error, the state containers get their old
// values back, and the function keeps working (and donating) on a device that can run it.
// (A failure inside asynchronous work, on a cpu stream's worker, reaches the outputs instead:
// the new state then holds the error, as a failed step's outputs do in MLX.)
TEST(Donation, FailedSubmissionGivesTheOldStateBack) {
  static const bool registered = [] {
    register_backend(std::make_shared<FullBackend>());
    return true;
  }();
  (void)registered;
  Step step(axpy);
  std::vector<float> before = step.w[0].to_vector<float>();
  {
    StreamScope scope(new_stream(device("full")));
    EXPECT_THROW(step(array(1.0f)), Error);
  }
  ASSERT_EQ(step.w.size(), 1u);
  EXPECT_EQ(step.w[0].to_vector<float>(), before);
  step(array(1.0f)).item<float>();
  size_t donated = donated_bytes();
  float s = step(array(1.0f)).item<float>();
  EXPECT_EQ(donated_bytes() - donated, kN * 4u);
  std::vector<float> w = step.w[0].to_vector<float>();
  double want = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    float v = before[i];
    for (int k = 0; k < 2; ++k) v = v * 0.5f + 1.0f;
    EXPECT_EQ(w[i], v) << i;
    want += v;
    if (w[i] != v) break;
  }
  EXPECT_NEAR(s, want, 1e-3 * want);
}
