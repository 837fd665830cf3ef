// kiln::distributed in one process (not started by a launcher): init gives a one-rank group,
// collectives return their input, send and recv have no peer, and bad arguments raise
// kiln::Error. The multi-rank tests are tests/dist/, run under mpiexec.
#include <gtest/gtest.h>

#include "kiln.h"

namespace kiln {
namespace {

namespace dist = distributed;

TEST(DistributedLocal, InitGivesOneRank) {
  dist::Group g = dist::init();
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.id(), dist::init().id());
  dist::Group sub = g.split(3);
  EXPECT_EQ(sub.size(), 1);
  EXPECT_NE(sub.id(), g.id());
  EXPECT_THROW(g.split(-1), Error);
  try {
    dist::init(false, "nccl");
    FAIL() << "an unknown backend must raise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"mpi\", \"any\""), std::string::npos) << e.what();
  }
}

TEST(DistributedLocal, CollectivesReturnTheirInput) {
  Array x = array<float>({1, 2, 3, 4}, {2, 2});
  for (const Array& y : {dist::all_sum(x), dist::all_max(x), dist::all_min(x), dist::all_gather(x),
                         dist::sum_scatter(x)})
    EXPECT_EQ(y.to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(dist::all_gather(array(5)).shape(), Shape({1}));
  auto f = compile([](const std::vector<Array>& in) -> std::vector<Array> {
    return {dist::all_sum(in[0] * 2.0f)};
  });
  EXPECT_EQ(f({x})[0].to_vector<float>(), (x * 2.0f).to_vector<float>());
  std::vector<Array> grads{x, array(0.5f)};
  auto avg = optim::average_gradients(grads);
  EXPECT_EQ(avg[0].to_vector<float>(), x.to_vector<float>());
}

TEST(DistributedLocal, MisuseRaises) {
  Array x = arange(6, float32);
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { dist::send(x, 1); }).find("one rank"), std::string::npos);
  EXPECT_NE(message([&] { dist::recv({3}, float32, 0); }).find("one rank"), std::string::npos);
  EXPECT_NE(message([&] { dist::sum_scatter(array(1.0f)); }).find("axis 0"), std::string::npos);
  EXPECT_NE(message([&] { dist::all_sum(x, dist::Group(99)); }).find("no group 99"),
            std::string::npos);
  EXPECT_NE(message([&] {
              optim::average_gradients({arange(3, int32)}, dist::Group(0), 0);
            }).find("no error"),
            std::string::npos);  // one rank: returned as they are, whatever the dtype
}

// Placement on ranks in a one-rank world: rank 0 is this process, so a program placed there runs
// here as it would unplaced; any other rank raises naming the world's size.
TEST(DistributedLocal, PlacementOnRanks) {
  Device here = device("rank0/" + default_device().str());
  EXPECT_EQ(here.rank, 0);
  EXPECT_EQ(here.str(), "rank0/" + default_device().str());
  EXPECT_EQ(here.local(), default_device());
  EXPECT_NE(here, default_device());
  Array x = arange(10, float32) / 10.0f;
  auto f = compile([&](const std::vector<Array>& in) -> std::vector<Array> {
    return {compute_on(here, [](const Array& a) { return exp(a) * 2.0f; })(in[0]) + 1.0f};
  });
  EXPECT_EQ(f({x})[0].to_vector<float>(), (exp(x) * 2.0f + 1.0f).to_vector<float>());
  auto message = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Device there = default_device();
  there.rank = 1;
  for (const std::string& m :
       {message([] { device("rank1/cpu"); }), message([&] { PlacementScope p(there); }),
        message([&] { eval(exp(x, there)); })})
    EXPECT_NE(m.find("world group of 1 rank"), std::string::npos) << m;
  EXPECT_NE(message([] { device("rankx/cpu"); }).find("bad rank"), std::string::npos);
  EXPECT_NE(message([] { device("rank1/"); }).find("'rank1/' has no backend name"),
            std::string::npos);
  EXPECT_NE(message([] { device("rank1/cpu:99999999999999999999"); }).find("bad index"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln
