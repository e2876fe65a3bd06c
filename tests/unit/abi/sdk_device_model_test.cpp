// loom::sdk's device-model cache (loom/sdk/device_model.hpp): where the file
// lives, that a written model reads back, and that a file from another
// device, driver or plugin version, or any damaged file, is refused (so the
// plugin measures again) without a crash.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "loom/sdk/device_model.hpp"

namespace {

namespace fs = std::filesystem;
using loom::sdk::DeviceModelValues;

// A scratch folder removed at the end of the test.
class DeviceModelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("loom_device_model_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path() const { return (dir_ / "models" / "cpu-simd-test.txt").string(); }
  void write_text(const std::string& text) {
    fs::create_directories(fs::path(path()).parent_path());
    std::ofstream(path(), std::ios::trunc) << text;
  }
  fs::path dir_;
};

// Sets an environment variable for the scope, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) ::setenv(name, value, 1); else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1); else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST_F(DeviceModelCache, WrittenModelReadsBackUnderItsIdentity) {
  const DeviceModelValues values = {{"matmul_flops_t1", 1.5e11}, {"step_ns_t1", 70}};
  ASSERT_TRUE(loom::sdk::write_device_model(path(), "cpu X threads 2 plugin 1.0", values));
  DeviceModelValues read;
  ASSERT_TRUE(loom::sdk::read_device_model(path(), "cpu X threads 2 plugin 1.0", &read));
  EXPECT_DOUBLE_EQ(read.at("matmul_flops_t1"), 1.5e11);
  EXPECT_DOUBLE_EQ(read.at("step_ns_t1"), 70);
  // Nothing but the file is left behind (the temporary was renamed).
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(fs::path(path()).parent_path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1u);
}

TEST_F(DeviceModelCache, OtherIdentityIsRefused) {
  ASSERT_TRUE(loom::sdk::write_device_model(path(), "gpu A driver 1 plugin 1.0", {{"bw", 1e9}}));
  DeviceModelValues read = {{"stale", 1}};
  EXPECT_FALSE(loom::sdk::read_device_model(path(), "gpu A driver 2 plugin 1.0", &read));
  EXPECT_TRUE(read.empty());
  EXPECT_FALSE(loom::sdk::read_device_model(path(), "gpu A driver 1 plugin 1.1", &read));
}

TEST_F(DeviceModelCache, MissingFileIsRefused) {
  DeviceModelValues read;
  EXPECT_FALSE(loom::sdk::read_device_model(path(), "x", &read));
  EXPECT_FALSE(loom::sdk::read_device_model("", "x", &read));
}

TEST_F(DeviceModelCache, DamagedFilesAreRefused) {
  const char* const kBad[] = {
      "",
      "garbage\n",
      "loom-device-model 2\nidentity x\nbw 1\n",
      "loom-device-model 1\n",
      "loom-device-model 1\nidentity y\nbw 1\n",
      "loom-device-model 1\nidentity x\nbw\n",
      "loom-device-model 1\nidentity x\nbw one\n",
      "loom-device-model 1\nidentity x\nbw 1e9x\n",
      "loom-device-model 1\nidentity x\nbw -5\n",
      "loom-device-model 1\nidentity x\nbw 0\n",
      "loom-device-model 1\nidentity x\nbw nan\n",
      "loom-device-model 1\nidentity x\nbw inf\n",
      "loom-device-model 1\nidentity x\n 5\n",
      "loom-device-model 1\nidentity x\nbw\r 5\n",  // a name write_device_model cannot write
      "loom-device-model 1\nidentity x\nb\x01w 5\n",
      "\x00\x01\x02\xff",
  };
  for (const char* text : kBad) {
    write_text(text);
    DeviceModelValues read;
    EXPECT_FALSE(loom::sdk::read_device_model(path(), "x", &read)) << text;
  }
  write_text("loom-device-model 1\nidentity x\n" + std::string(70 * 1024, 'a') + " 1\n");
  DeviceModelValues read;
  EXPECT_FALSE(loom::sdk::read_device_model(path(), "x", &read)) << "a file past 64 KiB";
  write_text("loom-device-model 1\nidentity x\nbw 1\n");
  EXPECT_TRUE(loom::sdk::read_device_model(path(), "x", &read));
}

TEST_F(DeviceModelCache, FolderFollowsTheOverrideThenXdgThenHome) {
  ScopedEnv over(loom::sdk::kDeviceModelDirEnv, "/scratch/models");
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  ScopedEnv home("HOME", "/home/u");
  EXPECT_EQ(loom::sdk::device_model_folder(), "/scratch/models");
  {
    ScopedEnv relative(loom::sdk::kDeviceModelDirEnv, "relative/dir");
    EXPECT_EQ(loom::sdk::device_model_folder(), "/xdg/loom/device-models");
  }
  ScopedEnv none(loom::sdk::kDeviceModelDirEnv, nullptr);
  EXPECT_EQ(loom::sdk::device_model_folder(), "/xdg/loom/device-models");
  {
    ScopedEnv relative(loom::sdk::kDeviceModelDirEnv, nullptr);
    ScopedEnv no_xdg("XDG_CACHE_HOME", "relative");
    EXPECT_EQ(loom::sdk::device_model_folder(), "/home/u/.cache/loom/device-models");
    ScopedEnv no_home("HOME", nullptr);
    EXPECT_EQ(loom::sdk::device_model_folder(), "");
  }
}

TEST_F(DeviceModelCache, PathIsPerPluginAndDeviceKey) {
  const std::string a = loom::sdk::device_model_path("/c", "vulkan-compute", "llvmpipe 1 0");
  const std::string b = loom::sdk::device_model_path("/c", "vulkan-compute", "llvmpipe 1 1");
  EXPECT_EQ(a.rfind("/c/vulkan-compute-", 0), 0u) << a;
  EXPECT_NE(a, b);
  EXPECT_EQ(loom::sdk::device_model_path("", "cpu-simd", "x"), "");
}

TEST(DeviceModelRoofline, IsTheLongerOfComputeAndMemory) {
  EXPECT_DOUBLE_EQ(loom::sdk::roofline_ns(2e9, 1e9, 1e9, 1e9), 2e9);  // compute bound
  EXPECT_DOUBLE_EQ(loom::sdk::roofline_ns(1e9, 1e9, 4e9, 1e9), 4e9);  // memory bound
  EXPECT_DOUBLE_EQ(loom::sdk::roofline_ns(1e9, 0, 3e9, 1e9), 3e9);    // no compute rate
}

}  // namespace
