// The folders the host searches for manifests: their order, the per-user
// folder ($XDG_DATA_HOME, else $HOME/.local/share), and how they are reported.
#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "host/discovery/plugin_folders.hpp"
#include "host_test_util.hpp"

namespace loom::host {
namespace {

using testing::isolated_options;
using testing::make_host;
using testing::TempDir;

// Sets (or, with nullopt, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

HostOptions user_folder_only() {
  HostOptions options = isolated_options({});
  options.use_user_folder = true;
  return options;
}

TEST(PluginFolders, UserFolderIsUnderXdgDataHome) {
  TempDir dir;
  dir.copy_variant("fake", "loom/plugins");
  ScopedEnv xdg("XDG_DATA_HOME", dir.path().string());
  auto host = make_host(user_folder_only());
  ASSERT_NE(host, nullptr);
  ASSERT_EQ(host->search_folders().size(), 1u);
  EXPECT_EQ(host->search_folders()[0].path, dir.path() / "loom" / "plugins");
  EXPECT_EQ(host->search_folders()[0].origin, "user");
  EXPECT_TRUE(host->search_folders()[0].exists);
  auto records = host->plugins();
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].name, "fake");
}

TEST(PluginFolders, UserFolderFallsBackToHomeWhenXdgIsUnsetOrRelative) {
  TempDir dir;
  dir.copy_variant("fake", ".local/share/loom/plugins");
  ScopedEnv home("HOME", dir.path().string());
  for (std::optional<std::string> xdg : {std::optional<std::string>(),
                                         std::optional<std::string>("relative/data"),
                                         std::optional<std::string>("")}) {
    ScopedEnv scoped("XDG_DATA_HOME", xdg);
    auto host = make_host(user_folder_only());
    ASSERT_NE(host, nullptr);
    ASSERT_EQ(host->search_folders().size(), 1u) << xdg.value_or("(unset)");
    EXPECT_EQ(host->search_folders()[0].path, dir.path() / ".local/share/loom/plugins");
    EXPECT_EQ(host->plugins().size(), 1u) << xdg.value_or("(unset)");
  }
}

TEST(PluginFolders, NoUserFolderWithoutXdgOrHome) {
  ScopedEnv xdg("XDG_DATA_HOME", std::nullopt);
  ScopedEnv home("HOME", std::nullopt);
  EXPECT_FALSE(user_plugin_folder().has_value());
  auto host = make_host(user_folder_only());
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(host->search_folders().empty());
}

TEST(PluginFolders, TurnedOffTheUserFolderIsNeitherSearchedNorListed) {
  TempDir dir;
  dir.copy_variant("fake", "loom/plugins");
  ScopedEnv xdg("XDG_DATA_HOME", dir.path().string());
  auto host = make_host(isolated_options({}));
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(host->search_folders().empty());
  EXPECT_TRUE(host->plugins().empty());
}

TEST(PluginFolders, OrderIsOptionsEnvironmentDefaultUserEachOnceWithMissingOnesMarked) {
  TempDir dir;
  dir.copy_variant("fake", "option");
  dir.copy_variant("fake", "user/loom/plugins");  // the same name again: a standby
  std::filesystem::create_directories(dir.path() / "env");
  ScopedEnv xdg("XDG_DATA_HOME", (dir.path() / "user").string());
  // "option" named again in the environment is searched once, first.
  ScopedEnv path("LOOM_PLUGIN_PATH", (dir.path() / "env").string() + "::" +
                                         (dir.path() / "option").string());
  HostOptions options;
  options.search_paths = {dir.path() / "option", dir.path() / "absent"};
  auto host = make_host(std::move(options));
  ASSERT_NE(host, nullptr);
  const auto& folders = host->search_folders();
  ASSERT_EQ(folders.size(), 5u);
  EXPECT_EQ(folders[0].path, dir.path() / "option");
  EXPECT_EQ(folders[0].origin, "option");
  EXPECT_TRUE(folders[0].exists);
  EXPECT_EQ(folders[1].path, dir.path() / "absent");
  EXPECT_FALSE(folders[1].exists);
  EXPECT_EQ(folders[2].path, dir.path() / "env");
  EXPECT_EQ(folders[2].origin, "LOOM_PLUGIN_PATH");
  EXPECT_TRUE(folders[2].exists);
  // This test program is not linked with libloom.so: the program's folder
  // only, <dir of the program>/../lib/loom/plugins.
  EXPECT_FALSE(loom_library_file().has_value());
  EXPECT_EQ(folders[3].origin, "program");
  EXPECT_EQ(folders[3].path.filename(), "plugins");
  EXPECT_EQ(folders[4].path, dir.path() / "user" / "loom" / "plugins");
  EXPECT_EQ(folders[4].origin, "user");
  EXPECT_TRUE(folders[4].exists);

  // The option folder's plugin wins; the user folder's copy stands by.
  auto loaded = host->load("fake");
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  size_t fakes = 0;
  for (const auto& record : host->plugins()) {
    if (record.name != "fake") continue;
    ++fakes;
    if (record.state == PluginState::kLoaded) {
      EXPECT_EQ(record.manifest_path.parent_path(), dir.path() / "option");
    }
  }
  EXPECT_EQ(fakes, 2u);
}

}  // namespace
}  // namespace loom::host
