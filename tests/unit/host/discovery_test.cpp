// PluginHost discovery and loading: lazy loading, search order, and every
// reason a plugin is rejected, each with a real fake variant.
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "host_test_util.hpp"

namespace loom::host::testing {
namespace {

// Creates a host over the folder of `variant` only, loads it and returns its
// record after the attempt.
PluginRecord load_variant(const std::string& variant, HostOptions options = {}) {
  options.search_paths = {variant_dir(variant)};
  options.use_environment = false;
  options.use_default_folder = false;
  options.use_user_folder = false;
  auto host = make_host(std::move(options));
  if (!host) return {};
  (void)host->load(variant);
  auto records = host->plugins();
  EXPECT_EQ(records.size(), 1u);
  return records.empty() ? PluginRecord{} : records[0];
}

void expect_rejected(const PluginRecord& record, const std::string& needle) {
  EXPECT_EQ(record.state, PluginState::kRejected) << record.name;
  EXPECT_NE(record.reason.find(needle), std::string::npos)
      << "reason of " << record.name << ": " << record.reason;
}

TEST(PluginHostLazy, CreateReadsManifestsWithoutLoading) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake_large")}));
  auto records = host->plugins();
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    EXPECT_EQ(r.state, PluginState::kFound) << r.name;
    EXPECT_TRUE(r.devices.empty());
  }
  EXPECT_EQ(records[0].name, "fake");
  EXPECT_EQ(records[0].version, "1.0.0");
  EXPECT_EQ(records[0].loader_keys, std::vector<std::string>{"fake"});
}

TEST(PluginHostLazy, PluginForKeyLoadsOnlyThatPlugin) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake_large")}));
  auto plugin = host->plugin_for_key("fake_large");
  ASSERT_TRUE(plugin.ok()) << plugin.status().to_string();
  auto records = host->plugins();
  EXPECT_EQ(find_record(records, "fake")->state, PluginState::kFound);
  EXPECT_EQ(find_record(records, "fake_large")->state, PluginState::kLoaded);
}

TEST(PluginHostLoad, FakeLoadsWithOneDevice) {
  PluginRecord r = load_variant("fake");
  EXPECT_EQ(r.state, PluginState::kLoaded) << r.reason;
  EXPECT_EQ(r.abi_version, LOOM_ABI_VERSION(1, 1));
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].uri, "fake://0");
  EXPECT_EQ(r.devices[0].plugin, "fake");
  EXPECT_EQ(r.devices[0].name, "Fake device 0");
  EXPECT_EQ(r.devices[0].kind, DeviceKind::kVirtual);
  EXPECT_EQ(r.devices[0].dtype_mask, LOOM_DTYPE_BIT(LOOM_DTYPE_F32));
  EXPECT_TRUE(r.devices[0].capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE);
  EXPECT_FALSE(r.devices[0].capabilities & LOOM_DEVICE_CAP_ASYNC);
  EXPECT_TRUE(r.reason.empty());
}

TEST(PluginHostLoad, LoadReturnsTheSamePluginTwice) {
  auto host = make_host(isolated_options({variant_dir("fake")}));
  auto a = host->load("fake");
  auto b = host->load("fake");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
}

TEST(PluginHostLoad, PluginOptionsReachThePlugin) {
  HostOptions options;
  options.plugin_options = {{"fake.devices", "3"}, {"fake.async", "1"}, {LOOM_OPTION_THREADS, "2"}};
  PluginRecord r = load_variant("fake", options);
  ASSERT_EQ(r.state, PluginState::kLoaded) << r.reason;
  ASSERT_EQ(r.devices.size(), 3u);
  EXPECT_EQ(r.devices[2].uri, "fake://2");
  EXPECT_TRUE(r.devices[1].capabilities & LOOM_DEVICE_CAP_ASYNC);
}

TEST(PluginHostLoad, ZeroDevicesLoadsWithReason) {
  HostOptions options;
  options.plugin_options = {{"fake.devices", "0"}};
  PluginRecord r = load_variant("fake", options);
  EXPECT_EQ(r.state, PluginState::kLoaded);
  EXPECT_TRUE(r.devices.empty());
  EXPECT_EQ(r.reason, "no devices");
}

TEST(PluginHostLoad, NullUriGetsTheDefaultUri) {
  HostOptions options;
  options.plugin_options = {{"fake.devices", "2"}, {"fake.null_uri", "1"}};
  PluginRecord r = load_variant("fake", options);
  ASSERT_EQ(r.devices.size(), 2u) << r.reason;
  EXPECT_EQ(r.devices[0].uri, "fake://0");
  EXPECT_EQ(r.devices[1].uri, "fake://1");
}

TEST(PluginHostLoad, LargerStructsAreAccepted) {
  PluginRecord r = load_variant("fake_large");
  EXPECT_EQ(r.state, PluginState::kLoaded) << r.reason;
  EXPECT_EQ(r.devices.size(), 1u);
}

TEST(PluginHostLoad, UnknownNameListsWhatWasFound) {
  auto host = make_host(isolated_options({variant_dir("fake")}));
  auto p = host->load("vulkan");
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(), "no plugin named 'vulkan'; found: fake");
}

TEST(PluginHostLoad, LoadAllLoadsEverythingAndRecordsRejections) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake_refuses")}));
  host->load_all();
  auto records = host->plugins();
  EXPECT_EQ(find_record(records, "fake")->state, PluginState::kLoaded);
  EXPECT_EQ(find_record(records, "fake_refuses")->state, PluginState::kRejected);
}

TEST(PluginHostLoad, AOneZeroHostGetsTheOneZeroTable) {
  HostOptions options = isolated_options({variant_dir("fake")});
  options.abi_max = LOOM_ABI_VERSION(1, 0);
  auto host = make_host(options);
  auto plugin = host->load("fake");
  ASSERT_TRUE(plugin.ok()) << plugin.status().to_string();
  EXPECT_EQ((*plugin)->abi_version(), LOOM_ABI_VERSION(1, 0));
  EXPECT_EQ((*plugin)->api().struct_size, LOOM_PLUGIN_API_V1_0_SIZE);
  EXPECT_EQ((*plugin)->estimate_entry(), nullptr);
  // Speaking 1.1, the same plugin hands out executable_estimate.
  auto current = make_host(isolated_options({variant_dir("fake")}));
  auto p11 = current->load("fake");
  ASSERT_TRUE(p11.ok()) << p11.status().to_string();
  EXPECT_EQ((*p11)->abi_version(), LOOM_ABI_VERSION(1, 1));
  EXPECT_NE((*p11)->estimate_entry(), nullptr);
}

TEST(PluginHostLoad, TheHostOffersOnlyWhatTheManifestDeclares) {
  // The library speaks 1.0-1.1, but its manifest says 1.0 only: the host
  // offers 1.0, and the plugin answers 1.0.
  TempDir dir;
  fs::path manifest = dir.copy_variant("fake");
  auto j = nlohmann::json::parse(read_text(manifest));
  j["abi"]["max"] = "1.0";
  write_text(manifest, j.dump());
  auto host = make_host(isolated_options({dir.path()}));
  auto plugin = host->load("fake");
  ASSERT_TRUE(plugin.ok()) << plugin.status().to_string();
  EXPECT_EQ((*plugin)->abi_version(), LOOM_ABI_VERSION(1, 0));
}

TEST(PluginHostLoad, AbiTwoPluginLoadsWhenTheHostOffersTwo) {
  HostOptions options;
  options.abi_max = LOOM_ABI_VERSION(2, 0);
  PluginRecord r = load_variant("fake_abi2", options);
  EXPECT_EQ(r.state, PluginState::kLoaded) << r.reason;
  EXPECT_EQ(r.abi_version, LOOM_ABI_VERSION(2, 0));
}

TEST(PluginHostCreate, EmptyAbiRangeIsInvalid) {
  HostOptions options;
  options.abi_min = LOOM_ABI_VERSION(2, 0);
  options.abi_max = LOOM_ABI_VERSION(1, 0);
  EXPECT_EQ(PluginHost::create(options).status().code(), StatusCode::kInvalidArgument);
}

// ---- rejections ------------------------------------------------------------

TEST(PluginHostReject, DisjointAbiRangeIsRejectedWithoutLoading) {
  auto host = make_host(isolated_options({variant_dir("fake_abi2")}));
  auto records = host->plugins();
  ASSERT_EQ(records.size(), 1u);
  expect_rejected(records[0], "plugin speaks ABI 2.0-2.0, the host speaks 1.0-1.2");
  auto p = host->load("fake_abi2");
  EXPECT_EQ(p.status().code(), StatusCode::kIncompatible);
  EXPECT_NE(p.status().message().find("is rejected"), std::string::npos);
}

TEST(PluginHostReject, NoEntryPoint) {
  expect_rejected(load_variant("fake_no_entry"), "does not export the entry point loom_plugin_query");
}

TEST(PluginHostReject, SmallFunctionTable) {
  expect_rejected(load_variant("fake_small"),
                  "smaller than the ABI 1.0 size " + std::to_string(LOOM_PLUGIN_API_V1_0_SIZE));
}

TEST(PluginHostReject, QueryRefusedWithReason) {
  expect_rejected(load_variant("fake_refuses"),
                  "plugin refused the host's ABI range 1.0-1.1: fake_refuses refuses every host");
}

TEST(PluginHostReject, UnavailablePlugin) {
  PluginRecord r = load_variant("fake_unavailable");
  expect_rejected(r, "unavailable: fake_unavailable: no fake hardware present");
  EXPECT_EQ(r.reason.rfind("unavailable: ", 0), 0u) << r.reason;
}

TEST(PluginHostReject, NullRequiredEntryIsNamed) {
  expect_rejected(load_variant("fake_null_entry"), "required entry fence_wait is NULL");
}

TEST(PluginHostReject, NullFunctionTable) {
  expect_rejected(load_variant("fake_null_api"), "without a function table");
}

TEST(PluginHostReject, ForeignDeviceUri) {
  expect_rejected(load_variant("fake_bad_uri"),
                  "device 0 has URI 'other-plugin://0', which does not start with 'fake_bad_uri://'");
}

TEST(PluginHostReject, VersionChosenOutsideHostRange) {
  expect_rejected(load_variant("fake_bad_version"),
                  "plugin chose ABI 1.7, outside the host's range 1.0-1.1");
}

TEST(PluginHostReject, PluginCreateFails) {
  HostOptions options;
  options.plugin_options = {{"fake.fail_create", "1"}};
  expect_rejected(load_variant("fake", options),
                  "plugin_create failed: fake: plugin_create fails (fake.fail_create=1)");
}

// A device count past the host's cap is refused before anything is made for
// it (2^40 devices would otherwise be enumerated until memory ran out); the
// cap itself is accepted as far as the count goes.
TEST(PluginHostReject, HugeDeviceCountIsRefused) {
  HostOptions options;
  options.plugin_options = {{"fake.claimed_devices", "1099511627776"}};
  expect_rejected(load_variant("fake", options),
                  "device_count reports 1099511627776 devices; the host takes at most 1024 "
                  "from one plugin");
  options.plugin_options = {{"fake.claimed_devices", std::to_string(kMaxDevicesPerPlugin)}};
  // 1024 passes the cap; the fake has one device, so device 1 is then missing.
  expect_rejected(load_variant("fake", options), "device 1");
}

TEST(PluginHostReject, BadPluginOptionIsNamed) {
  HostOptions options;
  options.plugin_options = {{"fake.devices", "many"}};
  expect_rejected(load_variant("fake", options), "option fake.devices must be a number");
}

TEST(PluginHostReject, HostRangeAboveThePluginsVersionIsRefusedByThePlugin) {
  // The manifest claims 1.0-2.0, but the library speaks only 1.0; the host
  // offers 2.0 alone.
  TempDir dir;
  fs::path manifest = dir.copy_variant("fake");
  auto j = nlohmann::json::parse(read_text(manifest));
  j["abi"]["max"] = "2.0";
  write_text(manifest, j.dump());
  HostOptions options = isolated_options({dir.path()});
  options.abi_min = options.abi_max = LOOM_ABI_VERSION(2, 0);
  auto host = make_host(options);
  (void)host->load("fake");
  expect_rejected(host->plugins()[0], "fake speaks only ABI 1.0");
}

TEST(PluginHostReject, NameDiffersFromManifest) {
  TempDir dir;
  fs::path manifest = dir.copy_variant("fake");
  auto j = nlohmann::json::parse(read_text(manifest));
  j["name"] = "impostor";
  fs::remove(manifest);
  write_text(dir.path() / "impostor.loom-plugin.json", j.dump());
  auto host = make_host(isolated_options({dir.path()}));
  (void)host->load("impostor");
  expect_rejected(host->plugins()[0],
                  "plugin_info names the plugin 'fake', its manifest names it 'impostor'");
}

TEST(PluginHostReject, LibraryMissing) {
  TempDir dir;
  dir.copy_variant("fake");
  fs::remove(dir.path() / "libloom_fake.so");
  auto host = make_host(isolated_options({dir.path()}));
  EXPECT_EQ(host->plugins()[0].state, PluginState::kFound);  // lazily: not looked at yet
  auto p = host->load("fake");
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  expect_rejected(host->plugins()[0], "libloom_fake.so named by the manifest does not exist");
}

// A library that is a FIFO (or any non-regular file) is refused without
// blocking on it; a directory likewise.
TEST(PluginHostReject, NonRegularLibraryIsRefusedWithoutBlocking) {
  for (bool fifo : {true, false}) {
    TempDir dir;
    fs::path manifest = dir.copy_variant("fake");
    fs::remove(dir.path() / "libloom_fake.so");
    if (fifo) {
      ASSERT_EQ(::mkfifo((dir.path() / "libloom_fake.so").c_str(), 0600), 0);
    } else {
      fs::create_directory(dir.path() / "libloom_fake.so");
    }
    auto host = make_host(isolated_options({dir.path()}));
    auto p = host->load("fake");
    EXPECT_FALSE(p.ok());
    expect_rejected(host->plugins()[0], "libloom_fake.so named by the manifest is not a regular file");
  }
}

TEST(PluginHostReject, HashMismatchNamesBothHashes) {
  TempDir dir;
  fs::path manifest = dir.copy_variant("fake");
  auto j = nlohmann::json::parse(read_text(manifest));
  std::string actual = j["library_hash"];
  j["library_hash"] = "xxh3-128:00000000000000000000000000000000";
  write_text(manifest, j.dump());
  auto host = make_host(isolated_options({dir.path()}));
  (void)host->load("fake");
  expect_rejected(host->plugins()[0], "has hash " + actual +
                                          ", the manifest expects xxh3-128:00000000000000000000000000000000");
}

TEST(PluginHostReject, LibraryThatFailsToLoadCarriesDlerror) {
  TempDir dir;
  fs::path manifest = dir.copy_variant("fake");
  // Not an ELF file, but with a matching hash: dlopen itself must fail.
  write_text(dir.path() / "libloom_fake.so", "not a shared library");
  auto j = nlohmann::json::parse(read_text(manifest));
  j["library_hash"] = *hash_file(dir.path() / "libloom_fake.so");
  write_text(manifest, j.dump());
  auto host = make_host(isolated_options({dir.path()}));
  (void)host->load("fake");
  PluginRecord r = host->plugins()[0];
  expect_rejected(r, "cannot load library");
  EXPECT_NE(r.reason.find("dlerror"), std::string::npos) << r.reason;
}

TEST(PluginHostReject, UnreadableAndBadManifestsAreListed) {
  TempDir dir;
  dir.copy_variant("fake");
  write_text(dir.path() / "broken.loom-plugin.json", "{ not json");
  fs::create_directory(dir.path() / "folder.loom-plugin.json");
  write_text(dir.path() / "nofield.loom-plugin.json", "{\"manifest_version\": 1}");
  write_text(dir.path() / "README.txt", "ignored: not a manifest");
  auto host = make_host(isolated_options({dir.path()}));
  auto records = host->plugins();
  ASSERT_EQ(records.size(), 4u);
  expect_rejected(*find_record(records, "broken"), "not valid JSON");
  expect_rejected(*find_record(records, "folder"), "cannot read manifest");
  expect_rejected(*find_record(records, "nofield"), "field 'name' is missing");
  EXPECT_EQ(find_record(records, "fake")->state, PluginState::kFound);
  auto p = host->load("fake");
  EXPECT_TRUE(p.ok()) << p.status().to_string();
}

TEST(PluginHostReject, DuplicateNameFirstWins) {
  TempDir dir;
  fs::path first = dir.copy_variant("fake", "a");
  fs::path second = dir.copy_variant("fake", "b");
  auto host = make_host(isolated_options({dir.path() / "a", dir.path() / "b"}));
  auto records = host->plugins();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].state, PluginState::kFound);
  EXPECT_EQ(records[0].manifest_path, first);
  // The twin stands by until the first one has loaded.
  EXPECT_EQ(records[1].state, PluginState::kFound);
  EXPECT_NE(records[1].reason.find("standby: " + first.string()), std::string::npos)
      << records[1].reason;
  auto p = host->load("fake");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->manifest().manifest_path, first);
  EXPECT_EQ(host->load_all().size(), 1u);
  records = host->plugins();
  expect_rejected(records[1], "duplicate plugin name 'fake'");
  EXPECT_NE(records[1].reason.find(first.string()), std::string::npos);
  EXPECT_NE(records[1].reason.find(second.string()), std::string::npos);
}

// A twin whose library does not match its manifest's hash (found only when
// loading) does not hide a good plugin of the same name later on the path:
// by name, by loader key and in load_all, the good one is used.
TEST(PluginHostReject, BadHashTwinDoesNotShadowAGoodOne) {
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how == 0 ? "load(name)" : how == 1 ? "plugin_for_key" : "load_all");
    TempDir dir;
    fs::path bad = dir.copy_variant("fake", "a");
    fs::path good = dir.copy_variant("fake", "b");
    auto j = nlohmann::json::parse(read_text(bad));
    j["library_hash"] = "xxh3-128:00000000000000000000000000000000";
    write_text(bad, j.dump());
    auto host = make_host(isolated_options({dir.path() / "a", dir.path() / "b"}));
    std::shared_ptr<LoadedPlugin> used;
    if (how == 0) {
      auto p = host->load("fake");
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      used = *p;
    } else if (how == 1) {
      auto p = host->plugin_for_key("fake");
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      used = *p;
    } else {
      auto all = host->load_all();
      ASSERT_EQ(all.size(), 1u);
      used = all[0];
    }
    EXPECT_EQ(used->manifest().manifest_path, good);
    auto records = host->plugins();
    expect_rejected(records[0], "the manifest expects xxh3-128:0000");
    EXPECT_EQ(records[1].state, PluginState::kLoaded);
  }
}

TEST(PluginHostSearch, SameFolderTwiceIsScannedOnce) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake") / "."}));
  EXPECT_EQ(host->plugins().size(), 1u);
}

TEST(PluginHostSearch, MissingFolderIsSkipped) {
  TempDir dir;
  auto host = make_host(isolated_options({dir.path() / "nope", variant_dir("fake")}));
  EXPECT_EQ(host->plugins().size(), 1u);
}

TEST(PluginHostSearch, EnvironmentPathIsSearchedAfterOptions) {
  TempDir dir;
  dir.copy_variant("fake", "env");
  std::string value = "::" + (dir.path() / "env").string() + ":" + variant_dir("fake_large").string();
  ASSERT_EQ(::setenv("LOOM_PLUGIN_PATH", value.c_str(), 1), 0);
  HostOptions options = isolated_options({variant_dir("fake")});
  options.use_environment = true;
  auto host = make_host(options);
  ::unsetenv("LOOM_PLUGIN_PATH");
  auto records = host->plugins();
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].manifest_path.parent_path(), variant_dir("fake"));
  EXPECT_EQ(records[1].name, "fake");  // a standby twin
  EXPECT_NE(records[1].reason.find("standby"), std::string::npos) << records[1].reason;
  EXPECT_EQ(records[2].name, "fake_large");
  auto p = host->plugin_for_key("fake_large");
  EXPECT_TRUE(p.ok()) << p.status().to_string();
}

TEST(PluginHostSearch, EnvironmentIgnoredWhenDisabled) {
  ASSERT_EQ(::setenv("LOOM_PLUGIN_PATH", variant_dir("fake").c_str(), 1), 0);
  auto host = make_host(isolated_options({}));
  ::unsetenv("LOOM_PLUGIN_PATH");
  EXPECT_TRUE(host->plugins().empty());
}

// ---- loader keys -------------------------------------------------------------

TEST(PluginHostKeys, UnknownKeyListsEveryAvailableKey) {
  auto host = make_host(isolated_options(
      {variant_dir("fake"), variant_dir("fake_large"), variant_dir("fake_abi2")}));
  auto p = host->plugin_for_key("vulkan");
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(),
            "no plugin serves loader key 'vulkan'; available: fake (plugin fake), "
            "fake_large (plugin fake_large)");
}

TEST(PluginHostKeys, RejectedPluginExplainsWhyItsKeyIsMissing) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake_refuses")}));
  auto p = host->plugin_for_key("fake_refuses");
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("plugin 'fake_refuses'"), std::string::npos);
  EXPECT_NE(p.status().message().find("refuses every host"), std::string::npos);
  EXPECT_NE(p.status().message().find("available: fake (plugin fake)"), std::string::npos)
      << p.status().message();
}

TEST(PluginHostKeys, LoaderKeysSkipRejectedPlugins) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake_abi2")}));
  using Keys = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(host->loader_keys(), (Keys{{"fake", "fake"}}));
}

TEST(PluginHostKeys, ServesFollowsPluginInfo) {
  auto host = make_host(isolated_options({variant_dir("fake")}));
  auto p = host->plugin_for_key("fake");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE((*p)->serves("fake"));
  EXPECT_FALSE((*p)->serves("fake_large"));
}

// ---- threads -----------------------------------------------------------------

TEST(PluginHostThreads, ConcurrentLoadsFromFourThreadsShareOnePlugin) {
  auto host = make_host(isolated_options({variant_dir("fake"), variant_dir("fake_large"),
                                          variant_dir("fake_refuses")}));
  std::vector<std::shared_ptr<LoadedPlugin>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        auto p = t % 2 == 0 ? host->load("fake") : host->plugin_for_key("fake");
        if (p.ok()) got[t] = *p;
        (void)host->plugins();
        (void)host->plugin_for_key("fake_refuses");
        if (i == 10) host->load_all();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& p : got) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p.get(), got[0].get());
  }
  auto records = host->plugins();
  EXPECT_EQ(find_record(records, "fake")->state, PluginState::kLoaded);
  EXPECT_EQ(find_record(records, "fake_large")->state, PluginState::kLoaded);
  EXPECT_EQ(find_record(records, "fake_refuses")->state, PluginState::kRejected);
}

// ---- logging -----------------------------------------------------------------

TEST(PluginHostLog, PluginLogLinesReachTheSinkWithThePluginName) {
  LogCapture log;
  HostOptions options = isolated_options({variant_dir("fake")});
  options.log_sink = log.sink();
  options.plugin_options = {{"fake.devices", "2"}};
  auto host = make_host(options);
  ASSERT_TRUE(host->load("fake").ok());
  EXPECT_TRUE(log.contains("fake: created with 2 devices"));
}

}  // namespace
}  // namespace loom::host::testing
