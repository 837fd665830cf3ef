// Choosing by measuring (backends/cpu/tune.h): a choice is measured once, kept in memory and in
// the table on disk, read back by a later Tuner (as by a later process), measured again when its
// entry is corrupt, names other candidates or was written for another host, and forced by the
// family's variable. The candidates are a no-op and 3 ms of spinning (CPU time of the thread), so
// which wins never depends on the machine's speed or load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "backends/cpu/tune.h"
#include "kiln.h"

namespace kiln {
namespace {

using cpu::TuneCandidate;
using cpu::Tuner;

const std::vector<std::string> kIds = {"fast", "slow"};

// Spins for 3 ms of this thread's CPU time (the clock candidates are timed by).
void spin() {
  double t0 = cpu::thread_cpu_seconds();
  while (cpu::thread_cpu_seconds() - t0 < 0.003) {
  }
}
constexpr char kForce[] = "KILN_TEST_TUNE_FORCE";

// A private KILN_CACHE_DIR for each test, restored afterwards.
class Tune : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* d = std::getenv("KILN_CACHE_DIR")) saved_ = d, had_ = true;
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln-tune-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    ::setenv("KILN_CACHE_DIR", dir_.c_str(), 1);
    ::unsetenv(kForce);
  }
  void TearDown() override {
    if (had_)
      ::setenv("KILN_CACHE_DIR", saved_.c_str(), 1);
    else
      ::unsetenv("KILN_CACHE_DIR");
    ::unsetenv(kForce);
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // The candidates, counting how often they are made (once per measurement).
  std::function<std::vector<TuneCandidate>()> make() {
    return [this] {
      ++made;
      return std::vector<TuneCandidate>{{"fast", [] {}}, {"slow", spin}};
    };
  }

  static std::vector<std::string> lines(const std::string& path) {
    std::ifstream f(path);
    std::vector<std::string> out;
    for (std::string l; std::getline(f, l);) out.push_back(l);
    return out;
  }
  static void write(const std::string& path, const std::vector<std::string>& ls) {
    std::ofstream f(path, std::ios::trunc);
    for (const std::string& l : ls) f << l << "\n";
  }

  int made = 0;
  std::filesystem::path dir_;
  std::string saved_;
  bool had_ = false;
};

TEST_F(Tune, MeasuresOnceThenAnotherTunerReadsTheTable) {
  Tuner a("test", "host one", kForce);
  EXPECT_EQ(a.choose("k1", kIds, make()), "fast");
  EXPECT_EQ(made, 1);
  EXPECT_EQ(a.choose("k1", kIds, make()), "fast");  // from memory
  EXPECT_EQ(made, 1);
  EXPECT_GT(a.seconds_measuring(), 0.003 * cpu::kMinRounds);
  ASSERT_FALSE(a.path().empty());
  EXPECT_TRUE(std::filesystem::exists(a.path())) << a.path();

  Tuner b("test", "host one", kForce);  // a later process, as far as the table goes
  EXPECT_EQ(b.path(), a.path());
  EXPECT_EQ(b.choose("k1", kIds, make()), "fast");
  EXPECT_EQ(made, 1);
  std::vector<cpu::TuneResult> t = b.table();
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0].from_disk);
  EXPECT_EQ(t[0].key, "k1");
  ASSERT_EQ(t[0].seconds.size(), 2u);
  EXPECT_EQ(t[0].seconds[1].first, "slow");
  EXPECT_GE(t[0].seconds[1].second, 0.003);
  EXPECT_LT(t[0].seconds[0].second, t[0].seconds[1].second);

  // A second key is added beside the first, and one candidate alone is never measured.
  EXPECT_EQ(b.choose("k2", kIds, make()), "fast");
  EXPECT_EQ(b.choose("k3", {"only"}, make()), "only");
  EXPECT_EQ(made, 2);
  Tuner c("test", "host one", kForce);
  EXPECT_EQ(c.table().size(), 2u);
}

TEST_F(Tune, CorruptEntriesAreMeasuredAgain) {
  Tuner a("test", "host one", kForce);
  for (const char* k : {"k1", "k2", "k3", "k4"}) a.choose(k, kIds, make());
  ASSERT_EQ(made, 4);
  std::vector<std::string> ls = lines(a.path());
  ASSERT_EQ(ls.size(), 3u + 4u);  // format, family, host, then an entry per key
  std::string& k1 = ls[3];
  ASSERT_EQ(k1.rfind("k1 fast ", 0), 0u) << k1;
  k1.replace(k1.find("fast"), 4, "slow");     // the winner edited: the checksum no longer matches
  ls[4] = ls[4].substr(0, ls[4].size() / 2);  // k2 truncated
  ls[5] = "k3 fast fast=0 slow=1 #0000000000000000";  // k3 with a made-up checksum
  ls.push_back("\x01\x02 garbage = = #");
  write(a.path(), ls);
  a.forget();
  for (const char* k : {"k1", "k2", "k3", "k4"}) EXPECT_EQ(a.choose(k, kIds, make()), "fast") << k;
  EXPECT_EQ(made, 4 + 3);  // k4 was intact

  // An empty or half-written file is a table with nothing in it.
  write(a.path(), {"kiln-tune 1", "family test"});
  a.forget();
  EXPECT_TRUE(a.table().empty());
  EXPECT_EQ(a.choose("k1", kIds, make()), "fast");
  EXPECT_EQ(made, 8);
}

TEST_F(Tune, StaleEntriesAreMeasuredAgain) {
  Tuner a("test", "host one", kForce);
  a.choose("k1", kIds, make());
  ASSERT_EQ(made, 1);
  // Another host (CPU model, libraries, version) reads a table of its own.
  Tuner other("test", "host two", kForce);
  EXPECT_NE(other.path(), a.path());
  EXPECT_TRUE(other.table().empty());
  other.choose("k1", kIds, make());
  EXPECT_EQ(made, 2);
  // A table whose host line is not this host's, at this host's path, is ignored whole.
  std::vector<std::string> ls = lines(a.path());
  ASSERT_EQ(ls[2], "host host one");
  ls[2] = "host host three";
  write(a.path(), ls);
  a.forget();
  EXPECT_TRUE(a.table().empty());
  // An entry measured among other candidates is measured again among these.
  Tuner b("test", "host four", kForce);
  b.choose("k1", kIds, make());
  EXPECT_EQ(made, 3);
  b.choose("k1", {"fast", "slow", "new"}, [&] {
    ++made;
    return std::vector<TuneCandidate>{{"fast", [] {}}, {"slow", spin}, {"new", spin}};
  });
  EXPECT_EQ(made, 4);
  ASSERT_EQ(b.table().size(), 1u);
  EXPECT_EQ(b.table()[0].seconds.size(), 3u);
}

TEST_F(Tune, TheVariableForcesACandidate) {
  Tuner a("test", "host one", kForce);
  ::setenv(kForce, "slow", 1);
  EXPECT_EQ(a.choose("k1", kIds, make()), "slow");
  EXPECT_EQ(made, 0);  // nothing measured, nothing recorded
  EXPECT_TRUE(a.table().empty());
  ::setenv(kForce, "medium", 1);
  try {
    a.choose("k1", kIds, make());
    ADD_FAILURE() << "a candidate the key does not have was accepted";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("KILN_TEST_TUNE_FORCE=medium"), std::string::npos) << m;
    EXPECT_NE(m.find("fast, slow"), std::string::npos) << m;
  }
  ::setenv(kForce, "auto", 1);
  EXPECT_EQ(a.choose("k1", kIds, make()), "fast");
  EXPECT_EQ(made, 1);
}

TEST_F(Tune, BadKeysAndIdsAreRefused) {
  Tuner a("test", "host one", kForce);
  EXPECT_THROW(a.measure("two words", {{"x", [] {}}}), Error);
  EXPECT_THROW(a.measure("k", {{"a=b", [] {}}}), Error);
  EXPECT_THROW(a.measure("k", {}), Error);
}

#ifdef KILN_CLI_PATH
// `kiln tune` measures the matmul classes into the table; `--show` prints the table back, and
// lines that do not verify are left out of it.
TEST_F(Tune, KilnTuneMeasuresTheMatmulClassesAndShowsTheTable) {
  std::string log = (dir_ / "tune.log").string(), show = (dir_ / "show.log").string();
  std::filesystem::create_directories(dir_);
  std::string cmd = std::string(KILN_CLI_PATH) + " tune > " + log + " 2> " + log + ".err";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::stringstream out;
  out << std::ifstream(log).rdbuf();
  // The MLP block's products (256x1024x4096, 256x4096x1024) share this class.
  size_t mlp = out.str().find("matmul/f32/b1/256x1024x1024/t");
  ASSERT_NE(mlp, std::string::npos) << out.str();
  std::string row = out.str().substr(mlp, out.str().find('\n', mlp) - mlp);
  EXPECT_NE(row.find("skinny"), std::string::npos) << row;
  EXPECT_NE(row.find("openblas-gemm "), std::string::npos) << row;
  EXPECT_NE(out.str().find("matrix-vector"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("measured "), std::string::npos) << out.str();

  // Every row kiln tune printed is in the table, with the same winner.
  std::vector<std::filesystem::path> tables;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "cpu"))
    if (e.path().filename().string().rfind("tune-matmul-", 0) == 0) tables.push_back(e.path());
  ASSERT_EQ(tables.size(), 1u);
  std::vector<std::string> ls = lines(tables[0].string());
  ASSERT_GT(ls.size(), 3u + 5u);
  std::string winner = row.substr(row.rfind(' ') + 1);
  bool found = false;
  for (const std::string& l : ls)
    found |= l.rfind("matmul/f32/b1/256x1024x1024/t", 0) == 0 &&
             l.find(" " + winner + " ") != std::string::npos;
  EXPECT_TRUE(found) << winner;

  ls.push_back("matmul/f32/b1/8x8x8/t2 onednn onednn=0 #0");
  write(tables[0].string(), ls);
  cmd = std::string(KILN_CLI_PATH) + " tune --show > " + show + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::stringstream shown;
  shown << std::ifstream(show).rdbuf();
  EXPECT_NE(shown.str().find(row.substr(0, row.find(' '))), std::string::npos) << shown.str();
  EXPECT_EQ(shown.str().find("8x8x8"), std::string::npos) << shown.str();
  EXPECT_EQ(shown.str().find("measured "), std::string::npos) << shown.str();
}
#endif

}  // namespace
}  // namespace kiln
