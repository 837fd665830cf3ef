// Placement on ranks, run under mpiexec by ctest (2 and 4 ranks, loopback, more ranks than
// cores): parts of one program placed on ranks with compute_on(device("rankR/...")), every rank
// tracing the same program. Each test checks the placed result against the same program run
// without placement in this process (bit for bit), that reading a value placed on another rank
// raises naming it, and that the messages sent equal the program's cut edges.
#include <gtest/gtest.h>

#include "distributed/engine.h"
#include "distributed/ops.h"
#include "executor/cancel.h"
#include "graph/array_node.h"
#include "kiln.h"

namespace kiln {
namespace {

namespace dist = distributed;

// The default device (the reference interpreter under ctest) on rank r.
Device on(int r) {
  Device d = default_device();
  d.rank = r;
  return d;
}

// Applies f, placed on rank r, or unplaced when r < 0 (the single-process program).
template <typename F>
Array place(int r, F f, const Array& x) {
  if (r < 0) return f(x);
  return compute_on(on(r), f)(x);
}

std::vector<unsigned char> bytes(const Array& a) {
  std::vector<unsigned char> b(a.nbytes());
  eval(a);
  read_data(a, b.data());
  return b;
}

void expect_same(const Array& got, const Array& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_TRUE(bytes(got) == bytes(want)) << what;
}

// Reading an array computed on rank `owner` raises naming it, on every other rank.
void expect_remote(const Array& a, int owner) {
  try {
    eval(a);
    ADD_FAILURE() << "reading a value placed on rank " << owner << " did not raise";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("computed on rank " + std::to_string(owner)), std::string::npos) << m;
  }
}

// Waits for `a`'s work, which may be another rank's (then reading it raises).
void settle(const Array& a) {
  try {
    eval(a);
  } catch (const Error&) {
  }
}

// Cut-edge messages sent and received by every rank together since `before` (this rank's),
// once the work counted is done (settle).
std::pair<int64_t, int64_t> messages_since(const dist::MessageCounts& before) {
  dist::MessageCounts now = dist::message_counts();
  Array mine = array<int64_t>(
      {int64_t(now.sent - before.sent), int64_t(now.received - before.received)}, {2});
  auto all = dist::all_sum(mine).to_vector<int64_t>();
  return {all[0], all[1]};
}

Array stage_one(const Array& x) { return tanh(x * 0.5f) + exp(x * 0.25f); }
Array stage_two(const Array& h) { return sum(h * h, 1) + max(h, 1); }

// Stage one on rank 0, stage two on rank 1: one cut edge (h), one message per call.
TEST(RankPlacement, TwoStagesCompiled) {
  dist::Group world = dist::init();
  int traces = 0;
  auto program = [&](int r0, int r1) {
    return [&traces, r0, r1](const std::vector<Array>& in) -> std::vector<Array> {
      ++traces;
      Array h = place(r0, stage_one, in[0]);
      return {place(r1, stage_two, h)};
    };
  };
  auto placed = compile(program(0, 1));
  auto alone = compile(program(-1, -1));
  dist::MessageCounts before = dist::message_counts();
  for (int call = 0; call < 3; ++call) {
    Array x = reshape(astype(arange(6000, int64), float32), {60, 100}) / float(1000 + call);
    Array y = placed({x})[0];
    if (world.rank() == 1)
      expect_same(y, alone({x})[0], "stage two on rank 1, call " + std::to_string(call));
    else
      expect_remote(y, 1);
  }
  EXPECT_EQ(traces, world.rank() == 1 ? 2 : 1);  // the single-process program traces there only
  auto [sent, received] = messages_since(before);
  EXPECT_EQ(sent, 3);  // one cut edge, three calls
  EXPECT_EQ(received, 3);
}

// A value placed on rank 1 read outside any placement is computed from on every rank: each
// other rank receives it (size - 1 edges), and the result is everywhere.
TEST(RankPlacement, UnplacedReadersReceiveOnEveryRank) {
  dist::Group world = dist::init();
  auto f = compile([](const std::vector<Array>& in) -> std::vector<Array> {
    Array h = place(1, stage_one, in[0]);
    return {stage_two(h) * 2.0f};
  });
  Array x = reshape(astype(arange(1200, int64), float32), {12, 100}) / 700.0f;
  dist::MessageCounts before = dist::message_counts();
  expect_same(f({x})[0], stage_two(stage_one(x)) * 2.0f, "unplaced reader");
  auto [sent, received] = messages_since(before);
  EXPECT_EQ(sent, world.size() - 1);
  EXPECT_EQ(received, world.size() - 1);
}

// C = A B with A's rows in `size` blocks, block i computed on rank i, the blocks concatenated
// on rank 0: size - 1 cut edges. Integer-valued floats keep every product exact, so the placed
// result equals matmul itself bit for bit, not only the blocked program.
TEST(RankPlacement, BlockedMatmulRows) {
  dist::Group world = dist::init();
  int n = world.size();
  auto blocked = [n](bool ranks) {
    return [n, ranks](const std::vector<Array>& in) -> std::vector<Array> {
      int64_t rows = in[0].shape()[0] / n;
      std::vector<Array> parts;
      for (int i = 0; i < n; ++i) {
        Array b = in[1];
        auto block = [&, i](const Array& a) {
          return matmul(slice(a, {i * rows, 0}, {(i + 1) * rows, a.shape()[1]}), b);
        };
        parts.push_back(place(ranks ? i : -1, block, in[0]));
      }
      auto join = [&](const Array&) { return concatenate(parts, 0); };
      return {place(ranks ? 0 : -1, join, parts[0])};
    };
  };
  Array a =
      astype(remainder(reshape(arange(64 * 48, int64), {64, 48}), array(int64_t{7})), float32);
  Array b =
      astype(remainder(reshape(arange(48 * 40, int64), {48, 40}), array(int64_t{5})), float32);
  auto placed = compile(blocked(true));
  dist::MessageCounts before = dist::message_counts();
  Array c = placed({a, b})[0];
  settle(c);
  auto [sent, received] = messages_since(before);
  EXPECT_EQ(sent, n - 1);
  EXPECT_EQ(received, n - 1);
  if (world.rank() == 0) {
    expect_same(c, compile(blocked(false))({a, b})[0], "row blocks vs one process");
    expect_same(c, matmul(a, b), "row blocks vs matmul");
  } else {
    expect_remote(c, 0);
  }
}

// C = sum over k-blocks of A[:, k] B[k, :], block i on rank i, summed outside any placement:
// every rank receives every other rank's partial product (size * (size - 1) edges) and adds
// them in the same order, so every rank holds the one-process result.
TEST(RankPlacement, BlockedMatmulInnerAxisEverywhere) {
  dist::Group world = dist::init();
  int n = world.size();
  auto blocked = [n](bool ranks) {
    return [n, ranks](const std::vector<Array>& in) -> std::vector<Array> {
      int64_t k = in[0].shape()[1] / n;
      std::vector<Array> parts;
      for (int i = 0; i < n; ++i) {
        auto partial = [&, i](const Array& a) {
          Array ak = slice(a, {0, i * k}, {a.shape()[0], (i + 1) * k});
          Array bk = slice(in[1], {i * k, 0}, {(i + 1) * k, in[1].shape()[1]});
          return matmul(ak, bk);
        };
        parts.push_back(place(ranks ? i : -1, partial, in[0]));
      }
      Array total = parts[0];
      for (int i = 1; i < n; ++i) total = total + parts[i];
      return {total};
    };
  };
  Array a = reshape(astype(arange(32 * 64, int64), float32), {32, 64}) / 3000.0f;
  Array b = reshape(astype(arange(64 * 16, int64), float32), {64, 16}) / 5000.0f;
  dist::MessageCounts before = dist::message_counts();
  Array c = compile(blocked(true))({a, b})[0];
  eval(c);
  auto [sent, received] = messages_since(before);
  EXPECT_EQ(sent, n * (n - 1));
  EXPECT_EQ(received, n * (n - 1));
  expect_same(c, compile(blocked(false))({a, b})[0], "k blocks vs one process");
}

// Values go back and forth between ranks 0 and 1 (and the last rank) with a collective between
// them, over several calls in flight at once: the messages of one edge keep the calls' order,
// and neither they nor the collective wait for each other (no deadlock).
TEST(RankPlacement, PingPongWithACollectiveManyCallsInFlight) {
  dist::Group world = dist::init();
  int last = world.size() - 1;
  auto program = [last](bool ranks) {
    return [last, ranks](const std::vector<Array>& in) -> std::vector<Array> {
      Array v = in[0];
      for (int hop = 0; hop < 6; ++hop) {
        int r = hop % 2 == 0 ? 0 : (hop % 4 == 1 ? 1 : last);
        v = place(
            ranks ? r : -1, [hop](const Array& x) { return x * 1.5f + float(hop); }, v);
      }
      Array s = dist::all_sum(v * 0.0f + 1.0f);  // every rank: size, whatever v was
      return {v + s, s};
    };
  };
  auto placed = compile(program(true));
  auto alone = compile(program(false));
  std::vector<std::vector<Array>> outs;
  for (int call = 0; call < 5; ++call)
    outs.push_back(placed({full({1000}, double(call), float32)}));
  for (int call = 0; call < 5; ++call) {
    auto want = alone({full({1000}, double(call), float32)});
    expect_same(outs[call][0], want[0], "ping-pong, call " + std::to_string(call));
    expect_same(outs[call][1], want[1], "the collective");
  }
}

// Rank 0's call is cancelled before its first task: its send still goes, as a failure message,
// so rank 1 raises naming rank 0 instead of waiting; the next call pairs up as before.
TEST(RankPlacement, AFailedValueReachesTheReader) {
  dist::Group world = dist::init();
  auto f = compile([](const std::vector<Array>& in) -> std::vector<Array> {
    Array h = place(0, stage_one, in[0]);
    return {place(1, stage_two, h)};
  });
  Array x = reshape(astype(arange(200, int64), float32), {2, 100}) / 100.0f;
  // A value past the eager limit (1 MB), and one of no elements.
  Array big = reshape(astype(arange(1 << 18, int64), float32), {2, 1 << 17}) / 1e5f;
  for (const Array& xs : {big, slice(x, {0, 0}, {0, 100})}) {
    bool empty = xs.size() == 0;
    eval(xs);  // not under the cancelled scope: only the call's own tasks are cancelled
    auto token = std::make_shared<CancelToken>(std::nullopt);
    token->cancel("cancelled by the test");
    auto run = [&] {
      std::optional<CancelScope> scope;
      if (world.rank() == 0) scope.emplace(token);
      return f({xs})[0];
    };
    Array y = run();
    settle(y);
    if (world.rank() == 1) {
      try {
        eval(y);
        ADD_FAILURE() << "rank 1 read a value rank 0 never computed";
      } catch (const Error& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("rank 0"), std::string::npos) << m;
        if (!empty) {
          EXPECT_NE(m.find("cancelled by the test"), std::string::npos) << m;
        }
      }
    }
    Array again = f({x})[0];
    if (world.rank() == 1) expect_same(again, stage_two(stage_one(x)), "the next call");
    settle(again);
  }
}

// Without compile: eager ops under a rank placement run on that rank; in one evaluation the
// values cross as in a compiled call.
TEST(RankPlacement, Eager) {
  dist::Group world = dist::init();
  Array x = reshape(astype(arange(300, int64), float32), {3, 100}) / 100.0f;
  Array h = place(0, stage_one, x);
  Array y = place(1, stage_two, h);
  Array z = y + 1.0f;  // every rank: rank 1 sends y to the others
  expect_same(z, stage_two(stage_one(x)) + 1.0f, "eager, unplaced reader");
  if (world.rank() == 1)
    expect_same(y, stage_two(stage_one(x)), "eager, on rank 1");
  else
    expect_remote(y, 1);
}

TEST(RankPlacement, Misuse) {
  dist::Group world = dist::init();
  try {
    device("rank" + std::to_string(world.size()) + "/" + default_device().str());
    ADD_FAILURE() << "a rank outside the world must raise";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(world.size()) + " ranks"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(compute_on(on(1), [](const Array& x) { return dist::all_sum(x); })(array(1.0f)),
               Error);
  // A compiled function called under a rank placement: placement belongs inside the function.
  auto f = compile([](const std::vector<Array>& in) -> std::vector<Array> { return {in[0] + 1}; });
  EXPECT_THROW(compute_on(on(1), [&](const Array& x) { return f({x})[0]; })(array(1.0f)), Error);
}

}  // namespace
}  // namespace kiln
