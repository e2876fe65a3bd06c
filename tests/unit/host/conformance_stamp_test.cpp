// Conformance stamps: the file format (every field checked and named), the
// check against a manifest, and a host that requires a stamp. Also the
// comparison of the manifest's loader keys with the plugin's own.
#include <nlohmann/json.hpp>

#include "host/discovery/conformance_stamp.hpp"
#include "host_test_util.hpp"

namespace loom::host::testing {
namespace {

PluginManifest fake_manifest() {
  auto m = parse_manifest(variant_dir("fake") / "fake.loom-plugin.json");
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? *m : PluginManifest{};
}

ConformanceStamp good_stamp(const PluginManifest& m) {
  ConformanceStamp s;
  s.suite_version = "1.0";
  s.level = ConformanceLevel::kFull;
  s.plugin = m.name;
  s.plugin_version = m.version;
  s.library_hash = m.library_hash;
  s.stamped_at = "2026-11-25T14:03:07Z";
  s.passed = 41;
  s.skipped = 2;
  return s;
}

nlohmann::json good_json() {
  return {{"format", 1},
          {"suite_version", "1.0"},
          {"level", "basic"},
          {"plugin", "fake"},
          {"plugin_version", "1.0.0"},
          {"library_hash", "xxh3-128:00000000000000000000000000000000"},
          {"stamped_at", "2026-11-25T14:03:07.25Z"},
          {"totals", {{"passed", 3}, {"failed", 0}, {"skipped", 1}}},
          {"failed_checks", nlohmann::json::array()}};
}

Status parse_text(const std::string& text) { return parse_stamp(text, "s.json").status(); }

void expect_error(const Status& st, const std::string& needle) {
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("s.json"), std::string::npos) << st.message();
}

TEST(ConformanceStamp, WrittenStampReadsBack) {
  TempDir dir;
  const PluginManifest m = fake_manifest();
  ConformanceStamp s = good_stamp(m);
  s.failed_checks = {"memory.copy_odd_offsets"};
  s.failed = 1;
  const fs::path path = dir.path() / "fake.loom-conformance.json";
  ASSERT_TRUE(write_stamp(path, s).ok());
  auto back = read_stamp(path);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->suite_version, "1.0");
  EXPECT_EQ(back->level, ConformanceLevel::kFull);
  EXPECT_EQ(back->plugin, "fake");
  EXPECT_EQ(back->library_hash, m.library_hash);
  EXPECT_EQ(back->passed, 41u);
  EXPECT_EQ(back->failed, 1u);
  EXPECT_EQ(back->skipped, 2u);
  EXPECT_EQ(back->failed_checks, std::vector<std::string>{"memory.copy_odd_offsets"});
  // No temporary file is left behind.
  size_t files = 0;
  for ([[maybe_unused]] const auto& f : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(ConformanceStamp, WriteRefusesAnInvalidStamp) {
  TempDir dir;
  ConformanceStamp s = good_stamp(fake_manifest());
  s.stamped_at = "yesterday";
  Status st = write_stamp(dir.path() / "x.json", s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stamped_at"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(dir.path() / "x.json"));
}

TEST(ConformanceStamp, StampTimeNowParses) {
  ConformanceStamp s = good_stamp(fake_manifest());
  s.stamped_at = stamp_time_now();
  nlohmann::json j = good_json();
  j["stamped_at"] = s.stamped_at;
  EXPECT_TRUE(parse_text(j.dump()).ok()) << s.stamped_at;
}

TEST(ConformanceStamp, MissingFileIsNotFound) {
  TempDir dir;
  auto s = read_stamp(dir.path() / "absent.json");
  EXPECT_EQ(s.status().code(), StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("absent.json"), std::string::npos);
}

TEST(ConformanceStamp, DirectoryIsRefused) {
  TempDir dir;
  fs::create_directory(dir.path() / "d.json");
  auto s = read_stamp(dir.path() / "d.json");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("directory"), std::string::npos) << s.status().message();
}

TEST(ConformanceStamp, MalformedTextNamesTheField) {
  expect_error(parse_text(""), "not valid JSON");
  expect_error(parse_text("{\"format\": "), "not valid JSON");
  expect_error(parse_text("[1]"), "JSON object");
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"format", nullptr, "'format' is missing"},
      {"format", "1", "'format' must be an integer"},
      {"format", 2, "format this host does not know"},
      {"suite_version", 1.0, "'suite_version' must be a string"},
      {"suite_version", "", "'suite_version' is empty"},
      {"level", "thorough", "expected \"basic\" or \"full\""},
      {"plugin", nullptr, "'plugin' is missing"},
      {"plugin", "a\nb", "control character"},
      {"plugin_version", std::string(65, 'v'), "at most 64"},
      {"library_hash", "md5:abc", "must start with 'xxh3-128:'"},
      {"stamped_at", "2026-13-01T00:00:00Z", "ISO-8601"},
      {"stamped_at", "2026-11-25 14:03:07", "ISO-8601"},
      {"stamped_at", "2026-11-25T14:03:07+01:00", "ISO-8601"},
      {"totals", nlohmann::json::array(), "'totals' must be an object"},
      {"totals", {{"passed", 1}, {"failed", -1}, {"skipped", 0}}, "'totals.failed' must be a "},
      {"totals", {{"passed", 1}, {"failed", 0}}, "'totals.skipped' is missing"},
      {"totals", {{"passed", 1.5}, {"failed", 0}, {"skipped", 0}}, "'totals.passed'"},
      {"failed_checks", "x", "must be an array"},
      {"failed_checks", {"ok", 3}, "'failed_checks[1]' must be a string"},
      {"failed_checks", {""}, "'failed_checks[0]'"},
  };
  for (const auto& [field, value, needle] : cases) {
    nlohmann::json j = good_json();
    if (value.is_null()) {
      j.erase(field);
    } else {
      j[field] = value;
    }
    SCOPED_TRACE(field + " = " + value.dump());
    expect_error(parse_text(j.dump()), needle);
  }
  EXPECT_TRUE(parse_text(good_json().dump()).ok());
  // Fields a later format version adds are ignored by this reader.
  nlohmann::json extra = good_json();
  extra["host"] = "ci-7";
  EXPECT_TRUE(parse_text(extra.dump()).ok());
}

TEST(ConformanceStamp, OversizedFileIsRefusedUnread) {
  TempDir dir;
  const fs::path path = dir.path() / "big.json";
  write_text(path, std::string(kMaxStampBytes + 1, ' '));
  auto s = read_stamp(path);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("at most"), std::string::npos) << s.status().message();
}

TEST(ConformanceStampCheck, MatchingStampIsValid) {
  const PluginManifest m = fake_manifest();
  EXPECT_TRUE(check_stamp(good_stamp(m), m, m.library_hash).ok());
}

TEST(ConformanceStampCheck, EachMismatchIsNamed) {
  const PluginManifest m = fake_manifest();
  ConformanceStamp s = good_stamp(m);
  Status st = check_stamp(s, m, "xxh3-128:ffffffffffffffffffffffffffffffff");
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("does not match the library (rebuilt since?)"), std::string::npos);

  s = good_stamp(m);
  s.plugin = "other";
  st = check_stamp(s, m, m.library_hash);
  EXPECT_NE(st.message().find("plugin 'other'"), std::string::npos) << st.message();

  s = good_stamp(m);
  s.plugin_version = "0.9";
  st = check_stamp(s, m, m.library_hash);
  EXPECT_NE(st.message().find("version 0.9"), std::string::npos) << st.message();

  s = good_stamp(m);
  s.failed = 2;
  s.failed_checks = {"abi.struct_size_older", "exec.fence_timeout"};
  st = check_stamp(s, m, m.library_hash);
  EXPECT_NE(st.message().find("2 failed checks: abi.struct_size_older, exec.fence_timeout"),
            std::string::npos)
      << st.message();

  // A failure count without ids still fails.
  s = good_stamp(m);
  s.failed = 1;
  EXPECT_FALSE(check_stamp(s, m, m.library_hash).ok());
}

TEST(ConformanceStampStatus, SummariesForListings) {
  TempDir dir;
  const fs::path manifest_path = dir.copy_variant("fake");
  auto m = parse_manifest(manifest_path);
  ASSERT_TRUE(m.ok());
  StampStatus st = stamp_status(*m, m->library_hash);
  EXPECT_EQ(st.state, StampStatus::State::kMissing);
  EXPECT_NE(st.summary.find("not stamped"), std::string::npos);

  ASSERT_TRUE(write_stamp(stamp_path_for(*m), good_stamp(*m)).ok());
  EXPECT_EQ(stamp_path_for(*m), dir.path() / "fake.loom-conformance.json");
  st = stamp_status(*m, m->library_hash);
  EXPECT_TRUE(st.valid());
  EXPECT_EQ(st.summary, "full, suite 1.0, 2026-11-25, 41 passed, 2 skipped");

  write_text(stamp_path_for(*m), "{");
  st = stamp_status(*m, m->library_hash);
  EXPECT_EQ(st.state, StampStatus::State::kInvalid);
  EXPECT_NE(st.summary.find("not valid JSON"), std::string::npos) << st.summary;
}

// A host over a copy of the fake plugin, with a stamp written by `stamp`
// (nullptr: none).
PluginRecord load_with_stamp(const TempDir& dir, bool require,
                             void (*edit)(ConformanceStamp&)) {
  const fs::path manifest_path = dir.copy_variant("fake");
  auto m = parse_manifest(manifest_path);
  EXPECT_TRUE(m.ok());
  if (edit != nullptr) {
    ConformanceStamp s = good_stamp(*m);
    edit(s);
    EXPECT_TRUE(write_stamp(stamp_path_for(*m), s).ok());
  }
  HostOptions options = isolated_options({dir.path()});
  options.require_conformance = require;
  options.probe = false;
  auto host = make_host(std::move(options));
  if (!host) return {};
  (void)host->load("fake");
  return host->plugins().at(0);
}

TEST(RequireConformance, UnstampedPluginIsRejectedUnloaded) {
  TempDir dir;
  PluginRecord r = load_with_stamp(dir, true, nullptr);
  EXPECT_EQ(r.state, PluginState::kRejected);
  EXPECT_NE(r.reason.find("conformance is required: not stamped"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("loom conformance fake --stamp"), std::string::npos) << r.reason;
  EXPECT_TRUE(r.devices.empty());
  EXPECT_FALSE(r.conformance_valid);
}

TEST(RequireConformance, ValidStampLoads) {
  TempDir dir;
  PluginRecord r = load_with_stamp(dir, true, [](ConformanceStamp&) {});
  EXPECT_EQ(r.state, PluginState::kLoaded) << r.reason;
  EXPECT_TRUE(r.conformance_valid);
  EXPECT_EQ(r.conformance, "full, suite 1.0, 2026-11-25, 41 passed, 2 skipped");
}

TEST(RequireConformance, StampOfAnotherBuildIsRejected) {
  TempDir dir;
  PluginRecord r = load_with_stamp(dir, true, [](ConformanceStamp& s) {
    s.library_hash = "xxh3-128:0123456789abcdef0123456789abcdef";
  });
  EXPECT_EQ(r.state, PluginState::kRejected);
  EXPECT_NE(r.reason.find("stamp does not match the library (rebuilt since?)"), std::string::npos)
      << r.reason;
}

TEST(RequireConformance, StampWithFailuresIsRejected) {
  TempDir dir;
  PluginRecord r = load_with_stamp(dir, true, [](ConformanceStamp& s) {
    s.failed = 1;
    s.failed_checks = {"lifecycle.leak"};
  });
  EXPECT_EQ(r.state, PluginState::kRejected);
  EXPECT_NE(r.reason.find("1 failed check: lifecycle.leak"), std::string::npos) << r.reason;
}

TEST(RequireConformance, NotRequiredLoadsAndReportsTheStamp) {
  TempDir dir;
  PluginRecord r = load_with_stamp(dir, false, [](ConformanceStamp& s) { s.failed = 3; });
  EXPECT_EQ(r.state, PluginState::kLoaded) << r.reason;
  EXPECT_FALSE(r.conformance_valid);
  EXPECT_NE(r.conformance.find("3 failed checks"), std::string::npos) << r.conformance;
}

TEST(LoaderKeys, ManifestKeysThatDifferFromThePluginsAreRejected) {
  for (const auto& keys : {nlohmann::json{"fake", "fake-extra"}, nlohmann::json{"other"}}) {
    TempDir dir;
    const fs::path manifest_path = dir.copy_variant("fake");
    nlohmann::json j = nlohmann::json::parse(read_text(manifest_path));
    j["loader_keys"] = keys;
    write_text(manifest_path, j.dump());
    HostOptions options = isolated_options({dir.path()});
    options.probe = false;
    auto host = make_host(std::move(options));
    ASSERT_TRUE(host);
    auto plugin = host->load("fake");
    ASSERT_FALSE(plugin.ok());
    EXPECT_EQ(plugin.status().code(), StatusCode::kIncompatible);
    const std::string reason = host->plugins().at(0).reason;
    EXPECT_NE(reason.find("the manifest lists loader keys [" +
                          std::string(keys.size() == 2 ? "fake, fake-extra" : "other") +
                          "] but plugin_info lists [fake]"),
              std::string::npos)
        << reason;
  }
}

TEST(LoaderKeys, MatchingKeysLoad) {
  TempDir dir;
  dir.copy_variant("fake");
  HostOptions options = isolated_options({dir.path()});
  options.probe = false;
  auto host = make_host(std::move(options));
  ASSERT_TRUE(host);
  EXPECT_TRUE(host->load("fake").ok());
}

}  // namespace
}  // namespace loom::host::testing
