// The conformance library on its own: check ids, levels, report writers,
// plugin resolution, and run_suite against the fake plugin and one of its
// broken builds (every check in a child process, as loom conformance runs);
// the operator sweep's table and the sweep against the fake and its
// wrong-results build.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "loom/conformance.hpp"
#include "loom/conformance/operator_sweep.hpp"

namespace loom::conformance {
namespace {

const std::string kTestPlugins = LOOM_TEST_PLUGIN_DIR;

TEST(ConformanceSuite, CheckIdsAreUniqueAndGrouped) {
  auto checks = list_checks();
  ASSERT_GE(checks.size(), 20u);
  std::set<std::string> ids;
  const std::set<std::string> families = {"abi", "devices", "memory", "fences",
                                          "executables", "execution", "threads", "lifecycle"};
  for (const CheckInfo& c : checks) {
    EXPECT_TRUE(ids.insert(c.id).second) << c.id;
    EXPECT_TRUE(families.count(c.id.substr(0, c.id.find('.')))) << c.id;
    EXPECT_FALSE(c.summary.empty()) << c.id;
  }
}

TEST(ConformanceSuite, LevelsParse) {
  EXPECT_EQ(*parse_level("basic"), Level::kBasic);
  EXPECT_EQ(*parse_level("full"), Level::kFull);
  auto bad = parse_level("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'fast'"), std::string::npos);
}

SuiteReport sample_report() {
  SuiteReport r;
  r.plugin = "p<&>";
  r.plugin_version = "1.0";
  r.device = "p://0";
  r.checks.push_back({"abi.a", "first", CheckOutcome::kPass, "", 1.5});
  r.checks.push_back({"memory.b", "second", CheckOutcome::kFail, "expected \"x\" | got <y> & \x01z", 2});
  r.checks.push_back({"fences.c", "third", CheckOutcome::kSkip, "no fences", 0});
  return r;
}

TEST(ConformanceSuite, ReportsEscapeWhatTheyQuote) {
  SuiteReport r = sample_report();
  EXPECT_EQ(r.passed(), 1u);
  EXPECT_EQ(r.failed(), 1u);
  EXPECT_EQ(r.skipped(), 1u);
  EXPECT_FALSE(r.ok());
  const std::string junit = report_junit(r);
  EXPECT_NE(junit.find("tests=\"3\" failures=\"1\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("name=\"p&lt;&amp;&gt;\""), std::string::npos) << junit;
  EXPECT_NE(junit.find("expected &quot;x&quot; | got &lt;y&gt; &amp; ?z"), std::string::npos) << junit;
  EXPECT_NE(junit.find("<skipped message=\"no fences\"/>"), std::string::npos) << junit;
  const std::string md = report_markdown(r);
  EXPECT_NE(md.find("**does not conform**"), std::string::npos) << md;
  EXPECT_NE(md.find("got <y> & "), std::string::npos) << md;
  EXPECT_NE(md.find("\\|"), std::string::npos) << md;  // the pipe is escaped
  const std::string json = report_json(r);
  EXPECT_NE(json.find("\"failed\": 1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"outcome\": \"skip\""), std::string::npos) << json;
}

TEST(ConformanceSuite, UnknownPluginsAndDevicesAreNamed) {
  SuiteOptions options;
  options.plugin = "no-such-plugin";
  options.search_paths = {kTestPlugins + "/fake"};
  auto r = run_suite(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no plugin named 'no-such-plugin'"), std::string::npos);
  EXPECT_NE(r.status().message().find("fake"), std::string::npos) << r.status().message();

  options.plugin = kTestPlugins + "/fake/missing.loom-plugin.json";
  r = run_suite(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not exist"), std::string::npos);

  options.plugin = kTestPlugins + "/fake/fake.loom-plugin.json";
  options.device = "fake://7";
  r = run_suite(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no device 'fake://7'"), std::string::npos) << r.status().message();
}

TEST(ConformanceSuite, ALibraryPathFindsItsManifest) {
  SuiteOptions options;
  options.plugin = kTestPlugins + "/fake/libloom_fake.so";
  options.only = {"abi.entry_point"};
  auto r = run_suite(options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->plugin, "fake");
  ASSERT_EQ(r->checks.size(), 1u);
  EXPECT_EQ(r->checks[0].outcome, CheckOutcome::kPass) << r->checks[0].message;
}

TEST(ConformanceSuite, TheFakeConformsAndABrokenBuildFailsItsCheck) {
  SuiteOptions options;
  options.plugin = kTestPlugins + "/fake/fake.loom-plugin.json";
  options.only = {"abi.", "memory.", "executables.reject_garbage"};
  size_t seen = 0;
  auto r = run_suite(options, [&](const CheckResult&) { ++seen; });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(seen, r->checks.size());
  EXPECT_TRUE(r->ok()) << report_markdown(*r);
  EXPECT_EQ(r->device, "fake://0");

  options.plugin = kTestPlugins + "/fake_defect_corrupt_blobs/fake_defect_corrupt_blobs.loom-plugin.json";
  r = run_suite(options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  for (const CheckResult& c : r->checks) {
    EXPECT_EQ(c.outcome == CheckOutcome::kFail, c.id == "executables.reject_garbage") << c.id << ": " << c.message;
  }
}

TEST(OperatorSweep, TheTableCoversFortyOperatorsWithOddEmptyAndBroadcastShapes) {
  const std::vector<std::string> ops = sweep_operators();
  EXPECT_GE(ops.size(), 40u);
  auto cases = sweep_cases();
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  std::set<std::string> with_empty, with_broadcast;
  for (const SweepCase& c : *cases) {
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), c.op)) << c.op;
    if (c.inputs.find("0x") != std::string::npos || c.inputs.find("x0") != std::string::npos) with_empty.insert(c.op);
    if (c.inputs.find("; 5") != std::string::npos || c.inputs.find("; []") != std::string::npos) {
      with_broadcast.insert(c.op);
    }
  }
  EXPECT_GE(with_empty.size(), 20u);
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Where"}) EXPECT_TRUE(with_broadcast.count(op)) << op;
  // Every fpga-stub operator (plugins/fpga-stub/src/compile.cpp) is swept.
  for (const char* op : {"Conv", "ConvInteger", "QLinearConv", "GlobalAveragePool", "Relu", "MatMul",
                         "MatMulInteger", "Add", "Mul", "Gemm", "Clip", "Concat", "Reshape", "Flatten",
                         "MaxPool", "AveragePool"}) {
    EXPECT_TRUE(std::binary_search(ops.begin(), ops.end(), op)) << op;
  }
}

TEST(OperatorSweep, HardSigmoidCasesVaryAlphaAroundItsDefault) {
  auto cases = sweep_cases({"HardSigmoid"});
  ASSERT_TRUE(cases.ok()) << cases.status().message();
  std::set<std::string> attributes;
  for (const SweepCase& c : *cases) {
    EXPECT_EQ(c.op, "HardSigmoid");
    attributes.insert(c.attributes);
  }
  EXPECT_TRUE(attributes.count(""));           // the default alpha
  EXPECT_TRUE(attributes.count("alpha=0.2"));  // the default, given
  EXPECT_TRUE(attributes.count("alpha=0.5"));  // another
}

TEST(OperatorSweep, AnUnknownOperatorIsNamed) {
  auto cases = sweep_cases({"Relu", "Frobnicate"});
  ASSERT_FALSE(cases.ok());
  EXPECT_NE(cases.status().message().find("no operator 'Frobnicate'"), std::string::npos)
      << cases.status().message();
  SweepOptions options;
  options.plugin = kTestPlugins + "/fake/fake.loom-plugin.json";
  options.ops = {"Frobnicate"};
  EXPECT_FALSE(run_operator_sweep(options).ok());
  options.ops = {"Relu"};
  options.device = "fake://7";
  auto r = run_operator_sweep(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no device 'fake://7'"), std::string::npos) << r.status().message();
}

// The fake takes the Adds it runs right (no broadcasting) and nothing else:
// those pass, the rest are declined, never failed. Its wrong-results build
// fails the same cases, naming the element.
TEST(OperatorSweep, TheFakePassesWhatItTakesAndDeclinesTheRest) {
  SweepOptions options;
  options.plugin = kTestPlugins + "/fake/fake.loom-plugin.json";
  options.plugin_options = {{"fake.compile_ops", "Add"}};
  options.ops = {"Add", "Relu"};
  size_t seen = 0;
  auto r = run_operator_sweep(options, [&](const SweepCaseResult&) { ++seen; });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(seen, r->cases.size());
  EXPECT_TRUE(r->ok()) << sweep_report_json(*r);
  EXPECT_EQ(r->device, "fake://0");
  size_t passed = 0;
  for (const SweepCaseResult& c : r->cases) {
    if (c.c.op == "Relu") {
      EXPECT_EQ(c.outcome, SweepOutcome::kDeclined) << c.c.label();
    }
    passed += c.outcome == SweepOutcome::kPass;
  }
  EXPECT_GE(passed, 1u);
  const std::string json = sweep_report_json(*r);
  EXPECT_NE(json.find("\"mode\": \"run\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"failed\": 0"), std::string::npos) << json;

  options.plugin = kTestPlugins + "/fake_defect_wrong_results/fake_defect_wrong_results.loom-plugin.json";
  r = run_operator_sweep(options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_FALSE(r->ok());
  for (const SweepCaseResult& c : r->cases) {
    EXPECT_NE(c.outcome, SweepOutcome::kError) << c.c.label() << ": " << c.message;
    if (c.outcome != SweepOutcome::kFail) continue;
    EXPECT_EQ(c.c.op, "Add");
    EXPECT_NE(c.message.find("element ["), std::string::npos) << c.message;
    EXPECT_NE(format_sweep_case(c).find("FAIL Add [inputs "), std::string::npos) << format_sweep_case(c);
  }
}

TEST(OperatorSweep, CoverageCompilesOnly) {
  SweepOptions options;
  options.plugin = kTestPlugins + "/fake/fake.loom-plugin.json";
  options.plugin_options = {{"fake.compile_ops", "Add"}};
  options.ops = {"Add"};
  options.coverage_only = true;
  auto r = run_operator_sweep(options);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto totals = r->operators();
  ASSERT_EQ(totals.size(), 1u);
  EXPECT_GE(totals[0].taken, 1u);
  EXPECT_GE(totals[0].declined, 1u);
  EXPECT_EQ(totals[0].passed + totals[0].failed, 0u);
  EXPECT_NE(format_sweep_operator(totals[0], true, false).find(" taken, "), std::string::npos);
}

}  // namespace
}  // namespace loom::conformance
