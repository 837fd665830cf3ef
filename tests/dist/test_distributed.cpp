// Collectives across ranks, run under mpiexec by ctest (2 and 4 ranks, loopback). Every rank
// runs every test; each checks its result against the single-process answer, which every rank
// computes itself from the inputs all ranks make (rank r's input is a function of r). A test
// that fails on one rank fails the run (mpiexec's status); ctest's timeout catches a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "distributed/ops.h"
#include "executor/profile.h"
#include "graph/array_node.h"
#include "kiln.h"

namespace kiln {
namespace {

namespace dist = distributed;

dist::Group world() { return dist::init(); }

// Rank r's input: small integers (exact in every dtype, sums of four included) that differ by
// rank and position; bool: a pattern that differs by rank.
Array input(int r, int64_t n, Dtype d) {
  Array i = arange(n, int64);
  if (d.is_bool()) return equal(remainder(i + r, array(int64_t{3})), array(int64_t{0}));
  Array v = remainder(i * (r + 1) + array(int64_t(3 * r)), array(int64_t{23}));
  return astype(v, d);
}

std::vector<unsigned char> bytes(const Array& a) {
  std::vector<unsigned char> b(a.nbytes());
  eval(a);
  read_data(a, b.data());
  return b;
}

// The single-process answer: every rank's input stacked along a new axis 0.
Array stacked(int64_t n, Dtype d, int size) {
  std::vector<Array> all;
  for (int r = 0; r < size; ++r) all.push_back(input(r, n, d));
  return stack(all, 0);
}

void expect_same(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_TRUE(bytes(got) == bytes(want)) << what;
}

TEST(Distributed, WorldHasTheLaunchersRanks) {
  dist::Group g = world();
  const char* env = std::getenv("OMPI_COMM_WORLD_SIZE");
  ASSERT_NE(env, nullptr) << "run under mpiexec";
  EXPECT_EQ(g.size(), std::atoi(env));
  EXPECT_EQ(g.rank(), std::atoi(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_TRUE(dist::is_available());
}

// all_sum, all_max, all_min, all_gather and sum_scatter on every dtype, at sizes below and past
// the eager limit and MPI's fragment sizes, eagerly evaluated.
TEST(Distributed, EveryCollectiveOnEveryDtype) {
  dist::Group g = world();
  int size = g.size(), r = g.rank();
  for (Dtype d : kAllDtypes) {
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{70000} * size}) {
      std::string what = d.name() + " n=" + std::to_string(n);
      Array x = input(r, n, d), all = stacked(n, d, size);
      Array want_sum = d.is_bool() ? max(all, 0) : astype(sum(all, 0), d);
      expect_same(dist::all_sum(x, g), want_sum, "all_sum " + what);
      expect_same(dist::all_max(x, g), max(all, 0), "all_max " + what);
      expect_same(dist::all_min(x, g), min(all, 0), "all_min " + what);
      expect_same(dist::all_gather(x, g), reshape(all, {n * size}), "all_gather " + what);
      if (n % size == 0) {
        int64_t part = n / size;
        expect_same(dist::sum_scatter(x, g), slice(want_sum, {r * part}, {(r + 1) * part}),
                    "sum_scatter " + what);
      }
    }
  }
}

TEST(Distributed, MaxAndMinPropagateNaN) {
  dist::Group g = world();
  float nan = std::numeric_limits<float>::quiet_NaN();
  Array x = array<float>({g.rank() == 1 ? nan : 1.0f, float(g.rank())}, {2});
  auto mx = dist::all_max(x, g).to_vector<float>();
  auto mn = dist::all_min(x, g).to_vector<float>();
  EXPECT_TRUE(std::isnan(mx[0]) && std::isnan(mn[0]));
  EXPECT_EQ(mx[1], float(g.size() - 1));
  EXPECT_EQ(mn[1], 0.0f);
}

TEST(Distributed, SplitGroups) {
  dist::Group g = world();
  dist::Group half = g.split(g.rank() % 2);
  int members = (g.size() + 1 - g.rank() % 2) / 2;
  ASSERT_EQ(half.size(), members);
  EXPECT_EQ(half.rank(), g.rank() / 2);
  Array s = dist::all_sum(array(int32_t(g.rank())), half);
  int want = 0;
  for (int r = g.rank() % 2; r < g.size(); r += 2) want += r;
  EXPECT_EQ(s.item<int32_t>(), want);
  // The world still works after the split, and a key reverses the order.
  dist::Group rev = g.split(0, g.size() - g.rank());
  EXPECT_EQ(rev.rank(), g.size() - 1 - g.rank());
  EXPECT_EQ(dist::all_sum(array(1), g).item<int>(), g.size());
}

// Each rank sends to the next and receives from the previous, in one evaluation, with messages
// past the eager limit (4 MB): blocking sends would deadlock here, posted requests do not.
TEST(Distributed, SendRecvRing) {
  dist::Group g = world();
  int r = g.rank(), n = g.size();
  for (int64_t len : {int64_t{3}, int64_t{1} << 20}) {
    Array x = astype(arange(len, int64) + array(int64_t(r)), float32);
    Array sent = dist::send(x, (r + 1) % n, g);
    Array got = dist::recv({len}, float32, (r + n - 1) % n, g);
    eval({sent, got});
    Array want = astype(arange(len, int64) + array(int64_t((r + n - 1) % n)), float32);
    expect_same(got, want, "ring of " + std::to_string(len));
    expect_same(sent, x, "send's value");
    Array again = dist::send(x, (r + 1) % n, g);
    Array like = dist::recv_like(x, (r + n - 1) % n, g);
    eval({again, like});
    expect_same(like, want, "recv_like");
  }
}

TEST(Distributed, CollectiveInsideCompileTracesOnce) {
  dist::Group g = world();
  int traces = 0;
  auto f = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
    ++traces;
    return {dist::all_sum(in[0] * 2.0f, g) + 1.0f, dist::all_gather(in[0], g)};
  });
  for (int call = 0; call < 3; ++call) {
    Array x = astype(input(g.rank() + call, 1000, int32), float32);
    auto out = f({x});
    Array all = astype(stacked(1000, int32, g.size()), float32);  // ranks' base inputs
    std::vector<Array> each;
    for (int r = 0; r < g.size(); ++r)
      each.push_back(astype(input(r + call, 1000, int32), float32));
    Array st = stack(each, 0);
    expect_same(out[0], sum(st, 0) * 2.0f + 1.0f, "compiled all_sum, call " + std::to_string(call));
    expect_same(out[1], reshape(st, {1000 * g.size()}), "compiled all_gather");
    (void)all;
  }
  EXPECT_EQ(traces, 1);
}

// all_sum's vjp is the identity (see transforms/rules/collective.cpp): for
// L = sum(all_sum(x) * x), dL/dx = all_sum(x) (the x factor) + x (through all_sum).
TEST(Distributed, GradThroughCollectives) {
  dist::Group g = world();
  Array x = astype(input(g.rank(), 10, int32), float32);
  auto loss = [&](const std::vector<Array>& in) -> std::vector<Array> {
    return {sum(dist::all_sum(in[0], g) * in[0])};
  };
  Array dx = grad(loss)({x})[0];
  Array total = sum(astype(stacked(10, int32, g.size()), float32), 0);
  expect_same(dx, total + x, "grad through all_sum");
  // all_gather's vjp is this rank's slice of the cotangent.
  Array w = astype(arange(10 * g.size(), int64), float32);
  auto gathered = [&](const std::vector<Array>& in) -> std::vector<Array> {
    return {sum(dist::all_gather(in[0], g) * w)};
  };
  expect_same(grad(gathered)({x})[0], slice(w, {10 * g.rank()}, {10 * (g.rank() + 1)}),
              "grad through all_gather");
  // Compiled, with the collective in the backward pass too.
  auto step = compile(grad(loss));
  expect_same(step({x})[0], total + x, "compiled grad");
  // jvp of all_sum is the all_sum of the tangents.
  auto [outs, tangents] = jvp(
      [&](const std::vector<Array>& in) -> std::vector<Array> { return {dist::all_sum(in[0], g)}; },
      {x}, {ones_like(x)});
  expect_same(tangents[0], full({10}, double(g.size()), float32), "jvp of all_sum");
}

TEST(Distributed, VmapOfCollectives) {
  dist::Group g = world();
  Array xb = astype(reshape(arange(12, int64) + array(int64_t(g.rank())), {3, 4}), float32);
  auto f = vmap([&](const std::vector<Array>& in) -> std::vector<Array> {
    return {dist::all_sum(in[0], g), dist::all_gather(in[0], g)};
  });
  auto out = f({xb});
  Array base = astype(reshape(arange(12, int64), {3, 4}), float32);
  std::vector<Array> each;
  for (int r = 0; r < g.size(); ++r) each.push_back(base + float(r));
  expect_same(out[0], sum(stack(each, 0), 0), "vmap all_sum");
  expect_same(out[1], concatenate(each, 1), "vmap all_gather (per row)");
}

// Two independent collectives in one plan, one ready at once and one behind a matmul: the lane
// issues them in the plan's order on every rank whatever order they become ready in.
TEST(Distributed, IndependentCollectivesInOnePlan) {
  dist::Group g = world();
  auto f = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
    Array m = matmul(in[1], in[1]);
    return {dist::all_sum(in[0], g), dist::all_max(m, g), dist::all_sum(m, g),
            dist::all_gather(in[0] * 3.0f, g)};
  });
  for (int call = 0; call < 4; ++call) {
    Array a = full({1000}, double(g.rank() + call), float32);
    Array b = full({128, 128}, g.rank() == 0 ? 0.5 : 0.25, float32);
    auto out = f({a, b});
    float rsum = 0;
    for (int r = 0; r < g.size(); ++r) rsum += float(r + call);
    expect_same(out[0], full({1000}, rsum, float32), "first");
    expect_same(out[1], full({128, 128}, 32.0, float32), "matmul's max");
    float msum = 32.0f + 8.0f * (g.size() - 1);
    expect_same(out[2], full({128, 128}, msum, float32), "matmul's sum");
  }
}

TEST(Distributed, ArtifactWithACollective) {
  dist::Group g = world();
  auto f = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
    return {dist::all_sum(exp(in[0]), g)};
  });
  Array x = full({8}, 0.0, float32);
  Executable e = f.lower({x}).compile();
  std::string text = e.artifact();
  EXPECT_NE(text.find("all_reduce"), std::string::npos);
  Executable back = Executable::from_artifact(text);
  expect_same(back({x})[0], full({8}, double(g.size()), float32), "artifact");
}

TEST(Distributed, DeviceArraysGoThroughHostMemory) {
  dist::Group g = world();
  for (const char* name : {"opencl", "vulkan"}) {
    bool have = false;
    for (const DeviceInfo& d : devices())
      if (d.device.backend == name && d.available) have = true;
    if (!have) continue;
    Device dev = device(name);
    Array x = full({5000}, double(g.rank() + 1), float32, dev);
    Array s = dist::all_sum(x * 2.0f, g, dev) + 1.0f;
    float want = 1.0f;
    for (int r = 0; r < g.size(); ++r) want += 2.0f * (r + 1);
    expect_same(s, full({5000}, want, float32), std::string("all_sum on ") + name);
  }
}

// Run by tests/dist/kiln_run_check.py with KILN_TEST_ARTIFACT_DIR set: rank 0 saves an
// artifact with an all_sum, every rank its input x.<rank>.npy, for `mpiexec kiln run`.
TEST(DistributedArtifact, Save) {
  const char* dir = std::getenv("KILN_TEST_ARTIFACT_DIR");
  if (!dir) GTEST_SKIP() << "set KILN_TEST_ARTIFACT_DIR";
  dist::Group g = world();
  auto f = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
    return {dist::all_sum(in[0] * 2.0f, g) + 1.0f};
  });
  Array x = full({2, 3}, double(g.rank() + 1), float32) +
            reshape(astype(arange(6, int64), float32), {2, 3}) / 6.0f;
  Executable e = f.lower({x}).compile();
  std::string d(dir);
  if (g.rank() == 0) e.save(d + "/all_sum.kiln");
  save_npy(d + "/x." + std::to_string(g.rank()) + ".npy", x);
  // No collective: for kiln run's Slurm variables in a process started alone.
  auto twice =
      compile([](const std::vector<Array>& in) -> std::vector<Array> { return {in[0] * 2.0f}; });
  if (g.rank() == 0) twice.lower({x}).compile().save(d + "/twice.kiln");
  // Placement on ranks, with two ranks or more (make slurm-check runs this test alone): h =
  // 2x + 1 on rank 0 (its x), s = h * h on rank 1, t = s + 1 on every rank; each rank saves its
  // own part (staged.<rank>.kiln).
  if (g.size() >= 2) {
    Device dev = default_device();
    auto staged = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
      Array h = compute_on(Device{dev.backend, dev.index, 0},
                           [](const Array& a) { return a * 2.0f + 1.0f; })(in[0]);
      Array sq =
          compute_on(Device{dev.backend, dev.index, 1}, [](const Array& a) { return a * a; })(h);
      return {sq, sq + 1.0f};
    });
    staged.lower({x}).compile().save(d + "/staged." + std::to_string(g.rank()) + ".kiln");
  }
  dist::all_sum(array(1), g).item<int>();  // every file written before any rank returns
}

// Run alone by ctest with KILN_TEST_RAISE_RANK=1: that rank raises a kiln::Error (a user
// mistake) before the all_sum the others wait in, and ends its program with a failed test. At
// exit it tells the others how many collectives it issued (its exit notice); rank 0, waiting in
// one past that count, learns it can never complete and leaves without MPI_Finalize, naming
// rank 1, and mpiexec ends the job: no hang.
TEST(DistributedFailure, ARankThatRaises) {
  const char* env = std::getenv("KILN_TEST_RAISE_RANK");
  if (!env) GTEST_SKIP() << "set KILN_TEST_RAISE_RANK";
  dist::Group g = world();
  if (g.rank() == std::atoi(env)) {
    Array bad = arange(3, float32) + arange(4, float32);  // raises: shapes do not broadcast
    (void)bad;
  }
  dist::all_sum(array(1.0f), g).item<float>();
}

// Run alone by ctest with KILN_TEST_SKIP_RANK=0: rank 0 never makes the call of a program placed
// on ranks whose stage one is its own, so rank 1 waits for a message of a cut edge that never
// comes. Rank 0's exit notice says how many it sent (none): rank 1 leaves naming it.
TEST(DistributedFailure, ARankThatSkipsAPlacedCall) {
  const char* env = std::getenv("KILN_TEST_SKIP_RANK");
  if (!env) GTEST_SKIP() << "set KILN_TEST_SKIP_RANK";
  dist::Group g = world();
  Device d = default_device();
  auto f = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
    Array h =
        compute_on(Device{d.backend, d.index, 0}, [](const Array& a) { return a * 2.0f; })(in[0]);
    return {compute_on(Device{d.backend, d.index, 1}, [](const Array& a) { return a + 1.0f; })(h)};
  });
  if (g.rank() != std::atoi(env)) eval(f({full({4}, 1.0, float32)})[0]);
}

// Run alone by ctest with KILN_TEST_SLOW_RANK=0 and KILN_DIST_EXIT_TIMEOUT=1: rank 0 works 3 s
// longer than the others after the last collective. The others, finished first, wait for it at
// exit (nobody waits for them: their exit notices say so) and every rank ends with status 0.
TEST(DistributedExit, ARankThatFinishesFirstWaits) {
  const char* env = std::getenv("KILN_TEST_SLOW_RANK");
  if (!env) GTEST_SKIP() << "set KILN_TEST_SLOW_RANK";
  dist::Group g = world();
  EXPECT_EQ(dist::all_sum(array(1.0f), g).item<float>(), float(g.size()));
  if (g.rank() == std::atoi(env)) std::this_thread::sleep_for(std::chrono::seconds(3));
}

}  // namespace
}  // namespace kiln
