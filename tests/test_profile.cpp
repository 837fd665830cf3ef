#include <fstream>
#include <sstream>

#include "test_util.h"

using namespace kiln;

TEST(Profile, RecordsTasksWithDeviceStreamAndTimes) {
  Device r = device("reference");
  Stream s = new_stream(r);
  Array x = array<float>({1, 2, 3, 4}, {4}, s);
  std::vector<TaskEvent> events;
  {
    ProfileScope prof;
    Array y = sum(exp(x, s), false, s);
    eval(y);
    events = prof.events();
  }
  ASSERT_EQ(events.size(), 2u);  // one kernel per primitive, eagerly
  EXPECT_EQ(events[0].name, "exp");
  EXPECT_EQ(events[1].name, "sum");
  for (const auto& e : events) {
    EXPECT_EQ(e.device, r);
    EXPECT_EQ(e.stream, s);
    EXPECT_LE(e.start_ns, e.end_ns);
  }
  EXPECT_LE(events[0].end_ns, events[1].start_ns);  // sum depends on exp
}

TEST(Profile, OnlyWhileAlive) {
  Array x = ones({4}, float32, device("reference"));
  eval(x);
  { ProfileScope prof; }
  ProfileScope outer;
  eval(x * 2.0);
  {
    ProfileScope inner;
    eval(x * 3.0);
    EXPECT_EQ(inner.events().size(), 1u);
  }
  EXPECT_EQ(outer.events().size(), 2u);
}

TEST(Profile, ChromeTrace) {
  ProfileScope prof;
  eval(exp(ones({8}, float32, device("reference"))));
  std::string path = std::string(KILN_TEST_DATA_DIR) + "/profile_test.trace.json";
  prof.write_chrome_trace(path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  EXPECT_NE(json.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"exp\""), std::string::npos);
  EXPECT_NE(json.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(json.find("reference:0"), std::string::npos);
  test::expect_error([&] { prof.write_chrome_trace("/nonexistent-dir/x.json"); },
                     {"write_chrome_trace", "/nonexistent-dir/x.json"});
}
