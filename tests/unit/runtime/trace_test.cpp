// loom::Trace: the Chrome trace-event document (parsed back), escaping of
// hostile names, per-thread ids, and the profile's pairing of begin/end events.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "loom/trace.hpp"

namespace loom {
namespace {

Trace::Event complete(std::string track, std::string category, std::string name, uint64_t ts,
                      uint64_t dur) {
  Trace::Event e;
  e.track = std::move(track);
  e.category = std::move(category);
  e.name = std::move(name);
  e.timestamp_ns = ts;
  e.duration_ns = dur;
  return e;
}

Trace::Event mark(Trace::Phase phase, std::string name, uint64_t ts) {
  Trace::Event e;
  e.track = "dev://0";
  e.category = "dev://0";
  e.name = std::move(name);
  e.phase = phase;
  e.timestamp_ns = ts;
  return e;
}

TEST(Trace, ChromeJsonHasOneTrackPerDeviceHostFirst) {
  Trace trace;
  trace.record(complete("gpu://0", "delegate", "conv", 2'000, 1'500));
  trace.record(complete("host", "run", "main", 1'000, 5'000));
  trace.record(complete("cpu://0", "delegate", "rest", 4'000, 500));
  trace.record(mark(Trace::Phase::kInstant, "hang", 4'100));
  const auto doc = nlohmann::json::parse(trace.to_chrome_json());
  std::map<int, std::string> names;
  std::vector<nlohmann::json> spans;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") names[e["tid"]] = e["args"]["name"];
    if (e["ph"] == "X") spans.push_back(e);
  }
  EXPECT_EQ(names, (std::map<int, std::string>{
                       {1, "host"}, {2, "gpu://0"}, {3, "cpu://0"}, {4, "dev://0"}}));
  ASSERT_EQ(spans.size(), 3u);
  // Microseconds from the earliest event.
  EXPECT_DOUBLE_EQ(spans[0]["ts"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(spans[0]["dur"].get<double>(), 1.5);
  EXPECT_EQ(spans[0]["tid"], 2);
  EXPECT_EQ(spans[1]["tid"], 1);
  EXPECT_DOUBLE_EQ(spans[1]["ts"].get<double>(), 0.0);
}

TEST(Trace, HostileNamesAreEscaped) {
  Trace trace;
  trace.record(complete("host", "kernel", "a\"b\\c\nd\x1b[31m\x01", 0, 1));
  const std::string text = trace.to_chrome_json();
  const auto doc = nlohmann::json::parse(text);  // throws if not valid JSON
  bool found = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X") {
      EXPECT_EQ(e["name"], "a\"b\\c\nd\x1b[31m\x01");
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST(Trace, ThreadsGetSmallIdsInOrderOfFirstEvent) {
  Trace trace;
  trace.record(complete("host", "run", "a", 0, 1));
  std::thread([&] { trace.record(complete("host", "run", "b", 1, 1)); }).join();
  trace.record(complete("host", "run", "c", 2, 1));
  const auto events = trace.events();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].thread, 1u);
  EXPECT_EQ(events[1].thread, 2u);
  EXPECT_EQ(events[2].thread, 1u);
}

TEST(Trace, ProfileGroupsSpansPairsBeginEndAndSharesOfRuns) {
  Trace trace;
  trace.record(complete("host", "run", "main", 0, 1'000));
  trace.record(complete("host", "run", "main", 2'000, 1'000));
  trace.record(complete("gpu://0", "delegate", "conv", 100, 600));
  trace.record(complete("gpu://0", "delegate", "conv", 2'100, 400));
  trace.record(complete("host", "kernel", "Add", 800, 100));
  // A plugin's nested begin/end pairs, and an end without a begin (ignored).
  trace.record(mark(Trace::Phase::kBegin, "outer", 100));
  trace.record(mark(Trace::Phase::kBegin, "inner", 150));
  trace.record(mark(Trace::Phase::kEnd, "inner", 250));
  trace.record(mark(Trace::Phase::kEnd, "outer", 400));
  trace.record(mark(Trace::Phase::kEnd, "stray", 500));
  const auto rows = trace.profile();
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].name, "conv");
  EXPECT_EQ(rows[0].calls, 2u);
  EXPECT_EQ(rows[0].total_ns, 1'000u);
  EXPECT_DOUBLE_EQ(rows[0].mean_ns, 500.0);
  EXPECT_DOUBLE_EQ(rows[0].share, 0.5);
  EXPECT_EQ(rows[1].name, "outer");
  EXPECT_EQ(rows[1].total_ns, 300u);
  EXPECT_EQ(rows[2].name, "inner");
  EXPECT_EQ(rows[2].total_ns, 100u);
  EXPECT_EQ(rows[3].name, "Add");
  const std::string table = Trace::format_profile(rows);
  EXPECT_NE(table.find("gpu://0  delegate conv"), std::string::npos) << table;
  EXPECT_NE(table.find("50.0%"), std::string::npos) << table;
}

TEST(Trace, EmptyTraceIsAValidDocument) {
  Trace trace;
  const auto doc = nlohmann::json::parse(trace.to_chrome_json());
  EXPECT_TRUE(doc["traceEvents"].is_array());
  EXPECT_TRUE(trace.profile().empty());
}

}  // namespace
}  // namespace loom
