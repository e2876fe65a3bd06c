// Remembered probe verdicts (host/discovery/probe_cache.hpp): a plugin is probed once
// per library build, options and environment; a hang or crash stays
// rejected with the remembered reason; any change probes again; a cache
// file that is damaged is ignored and replaced. Probes are counted through
// a wrapper of loom-plugin-host that writes a line per start.
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "host/discovery/probe_cache.hpp"
#include "host/isolation/remote_plugin.hpp"
#include "host_test_util.hpp"
#include "loom/conformance/time_scale.hpp"

namespace loom::host::testing {
namespace {

// A loom-plugin-host wrapper that counts its starts, a copy of the fake
// plugin and a cache folder, all in one temporary folder.
class ProbeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto real = find_plugin_host_program(HostOptions{});
    ASSERT_TRUE(real.ok()) << real.status().to_string();
    wrapper_ = dir_.path() / "counting-plugin-host";
    write_text(wrapper_, "#!/bin/sh\necho start >> '" + (dir_.path() / "starts").string() +
                             "'\nexec '" + real->string() + "' \"$@\"\n");
    fs::permissions(wrapper_, fs::perms::owner_all);
    manifest_ = dir_.copy_variant("fake", "plugins");
  }
  void TearDown() override { behave(); }

  // Sets $LOOM_FAKE_MISBEHAVE (children inherit it). Under LeakSanitizer a
  // child that exits mid-load would report what loading had allocated, so
  // the children's leak check is off meanwhile (as in isolation_test).
  void misbehave(const char* what) {
    ::setenv("LOOM_FAKE_MISBEHAVE", what, 1);
    const char* asan = std::getenv("ASAN_OPTIONS");
    if (!saved_asan_) saved_asan_ = asan != nullptr ? asan : "";
    ::setenv("ASAN_OPTIONS", (*saved_asan_ + (saved_asan_->empty() ? "" : ":") + "detect_leaks=0").c_str(), 1);
  }
  void behave() {
    ::unsetenv("LOOM_FAKE_MISBEHAVE");
    if (saved_asan_) {
      if (saved_asan_->empty()) ::unsetenv("ASAN_OPTIONS"); else ::setenv("ASAN_OPTIONS", saved_asan_->c_str(), 1);
      saved_asan_.reset();
    }
  }
  std::optional<std::string> saved_asan_;

  HostOptions options() const {
    HostOptions o = isolated_options({manifest_.parent_path()});
    o.plugin_host_program = wrapper_;
    o.probe_cache_folder = cache();
    // Real probes: the product's 20 s, stretched on a sanitized build.
    o.probe_timeout = conformance::scaled(std::chrono::milliseconds(20'000));
    return o;
  }
  fs::path cache() const { return dir_.path() / "cache"; }
  // How many times loom-plugin-host was started.
  size_t starts() const {
    const std::string text = read_text(dir_.path() / "starts");
    return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
  }
  PluginRecord load(const HostOptions& o) const {
    auto host = make_host(o);
    if (!host) return {};
    (void)host->load("fake");
    return host->plugins().at(0);
  }

  TempDir dir_;
  fs::path wrapper_, manifest_;
};

TEST_F(ProbeCacheTest, APassedProbeIsRememberedAndTheNextLoadStartsNoProcess) {
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  EXPECT_EQ(starts(), 1u);
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  EXPECT_EQ(starts(), 1u) << "the second host probed again";
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(cache())) {
    ++files;
    EXPECT_EQ(f.path().filename().string().rfind("fake-", 0), 0u) << f.path();
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(ProbeCacheTest, AHangIsRememberedWithItsReasonAndCostsNoTimeoutAgain) {
  misbehave("query_hang");
  HostOptions o = options();
  o.probe_timeout = std::chrono::milliseconds(300);
  const PluginRecord first = load(o);
  EXPECT_EQ(first.state, PluginState::kRejected);
  EXPECT_NE(first.reason.find("within 300 ms"), std::string::npos) << first.reason;
  EXPECT_EQ(first.reason.find("remembered"), std::string::npos) << first.reason;
  const PluginRecord second = load(o);
  EXPECT_EQ(second.state, PluginState::kRejected);
  EXPECT_NE(second.reason.find("within 300 ms"), std::string::npos) << second.reason;
  EXPECT_NE(second.reason.find("remembered from its probe at"), std::string::npos)
      << second.reason;
  EXPECT_NE(second.reason.find("LOOM_PROBE_CACHE=off"), std::string::npos) << second.reason;
  EXPECT_EQ(starts(), 1u);
}

TEST_F(ProbeCacheTest, ACrashIsRememberedAsACrash) {
  misbehave("query_segv");
  const PluginRecord first = load(options());
  EXPECT_EQ(first.state, PluginState::kRejected);
  const PluginRecord second = load(options());
  EXPECT_EQ(second.state, PluginState::kRejected);
  EXPECT_NE(second.reason.find("signal 11 (SIGSEGV)"), std::string::npos) << second.reason;
  EXPECT_NE(second.reason.find("remembered"), std::string::npos) << second.reason;
  EXPECT_EQ(starts(), 1u);
}

TEST_F(ProbeCacheTest, AChangedEnvironmentProbesAgain) {
  misbehave("query_segv");
  EXPECT_EQ(load(options()).state, PluginState::kRejected);
  behave();
  EXPECT_EQ(load(options()).state, PluginState::kLoaded) << "a verdict of another environment";
  EXPECT_EQ(starts(), 2u);
}

TEST_F(ProbeCacheTest, ShellVariablesDoNotCount) {
  const char* pwd = std::getenv("PWD");
  const std::string saved = pwd ? pwd : "";
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  ::setenv("PWD", "/somewhere/else", 1);
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  if (pwd) ::setenv("PWD", saved.c_str(), 1); else ::unsetenv("PWD");
  EXPECT_EQ(starts(), 1u);
}

TEST_F(ProbeCacheTest, ARebuiltLibraryOrOtherOptionsProbeAgain) {
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  // The library is touched: a new modification time is a new build.
  auto manifest = parse_manifest(manifest_);
  ASSERT_TRUE(manifest.ok());
  const auto later = fs::last_write_time(manifest->library) + std::chrono::seconds(5);
  fs::last_write_time(manifest->library, later);
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  EXPECT_EQ(starts(), 2u);
  HostOptions o = options();
  o.plugin_options = {{"fake.devices", "1"}};
  EXPECT_EQ(load(o).state, PluginState::kLoaded);
  EXPECT_EQ(starts(), 3u);
  EXPECT_EQ(load(o).state, PluginState::kLoaded);
  EXPECT_EQ(starts(), 3u);
}

TEST_F(ProbeCacheTest, ADamagedCacheFileIsIgnoredAndReplaced) {
  EXPECT_EQ(load(options()).state, PluginState::kLoaded);
  fs::path file;
  for (const auto& f : fs::directory_iterator(cache())) file = f.path();
  ASSERT_FALSE(file.empty());
  for (const std::string& junk : {std::string("{\"format\": 1, \"key\": 5}"), std::string("\x01\x02"),
                                 std::string(kMaxProbeVerdictBytes + 1, ' ')}) {
    write_text(file, junk);
    const size_t before = starts();
    EXPECT_EQ(load(options()).state, PluginState::kLoaded);
    EXPECT_EQ(starts(), before + 1) << "a damaged verdict was used";
    EXPECT_TRUE(parse_probe_verdict(read_text(file), file.string()).ok()) << "not replaced";
  }
}

TEST_F(ProbeCacheTest, AnUnwritableCacheWarnsOnceAndLoadsAllTheSame) {
  auto log = std::make_shared<LogCapture>();
  HostOptions o = options();
  write_text(dir_.path() / "a-file", "");
  o.probe_cache_folder = dir_.path() / "a-file" / "cache";
  o.log_sink = log->sink();
  EXPECT_EQ(load(o).state, PluginState::kLoaded);
  EXPECT_TRUE(log->contains("probe verdicts are not remembered")) << "no warning";
}

TEST_F(ProbeCacheTest, WithoutAFolderEveryLoadIsProbed) {
  HostOptions o = options();
  o.probe_cache_folder.clear();
  EXPECT_EQ(load(o).state, PluginState::kLoaded);
  EXPECT_EQ(load(o).state, PluginState::kLoaded);
  EXPECT_EQ(starts(), 2u);
}

TEST_F(ProbeCacheTest, LoadAllProbesEveryPluginAndRemembersEach) {
  dir_.copy_variant("fake_large", "plugins");
  auto host = make_host(options());
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->load_all().size(), 2u);
  EXPECT_EQ(starts(), 2u);
  auto again = make_host(options());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->load_all().size(), 2u);
  EXPECT_EQ(starts(), 2u);
}

TEST(ProbeVerdictFile, ErrorsNameTheFieldAtFault) {
  ProbeVerdict v;
  v.key = std::string(32, 'a');
  v.plugin = "fake";
  v.library = "/lib/libfake.so";
  v.probed_at = "2026-11-26T09:00:00Z";
  v.code = StatusCode::kDeadlineExceeded;
  v.message = "probe process 12 did not finish";
  auto back = parse_probe_verdict(format_probe_verdict(v), "f.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->code, StatusCode::kDeadlineExceeded);
  EXPECT_EQ(back->message, v.message);
  const std::pair<std::string, std::string> cases[] = {
      {"[1]", "is not a JSON object"},
      {"{", "is not JSON"},
      {R"({"format": 2})", "field 'format' must be 1"},
      {R"({"format": 1, "key": "xyz"})", "field 'key' must be 32 lower-case hex digits"},
      {R"({"format": 1, "key": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})", "field 'plugin' is missing"},
      {R"({"format": 1, "key": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "plugin": "p", "library": "l",
          "probed_at": "t", "code": "bogus", "message": ""})",
       "field 'code' is 'bogus', not a status code name"},
      {R"({"format": 1, "key": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "plugin": "p", "library": "l",
          "probed_at": "t", "code": "internal", "message": ""})",
       "field 'message' is empty for a rejection"},
      {R"({"format": 1, "key": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "plugin": "p\u0001", "library": "l",
          "probed_at": "t", "code": "ok", "message": ""})",
       "field 'plugin' holds a control character"},
  };
  for (const auto& [text, needle] : cases) {
    auto parsed = parse_probe_verdict(text, "f.json");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.status().message().find("probe verdict f.json"), std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(needle), std::string::npos)
        << parsed.status().message();
  }
}

TEST(ProbeCacheFolder, FollowsTheEnvironment) {
  const char* saved_cache = std::getenv("LOOM_PROBE_CACHE");
  const char* saved_xdg = std::getenv("XDG_CACHE_HOME");
  const std::string cache_value = saved_cache ? saved_cache : "";
  const std::string xdg_value = saved_xdg ? saved_xdg : "";
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  ::unsetenv("LOOM_PROBE_CACHE");
  EXPECT_EQ(default_probe_cache_folder(), fs::path("/xdg/loom/probes"));
  ::setenv("LOOM_PROBE_CACHE", "/elsewhere", 1);
  EXPECT_EQ(default_probe_cache_folder(), fs::path("/elsewhere"));
  ::setenv("LOOM_PROBE_CACHE", "off", 1);
  EXPECT_EQ(default_probe_cache_folder(), std::nullopt);
  ::setenv("LOOM_PROBE_CACHE", "0", 1);
  EXPECT_EQ(default_probe_cache_folder(), std::nullopt);
  ::unsetenv("LOOM_PROBE_CACHE");
  ::setenv("XDG_CACHE_HOME", "relative", 1);
  if (std::getenv("HOME") != nullptr && std::getenv("HOME")[0] == '/') {
    EXPECT_EQ(default_probe_cache_folder(), fs::path(std::getenv("HOME")) / ".cache/loom/probes");
  }
  if (saved_cache) ::setenv("LOOM_PROBE_CACHE", cache_value.c_str(), 1);
  if (saved_xdg) ::setenv("XDG_CACHE_HOME", xdg_value.c_str(), 1); else ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace loom::host::testing
