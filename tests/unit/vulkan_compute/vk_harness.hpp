// The vulkan-compute plugin through its C ABI only, on the shared plugin
// harness (tests/support/plugin_harness). Every plugin is created with vulkan.validation=1: the host's
// logger counts the validation messages, and each test ends by expecting
// none. Tests that need a device skip (with the plugin's reason) when the
// machine has none.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "loom/plugin.h"
#include "plugin_harness.hpp"

namespace loom::vulkan::test {

using ::loom::testing::code_prefix;
using ::loom::testing::starts_with;
using ::loom::testing::take;

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(harness_.api(), nullptr) << harness_.error();
    api_ = harness_.api();
  }
  void TearDown() override {
    harness_.destroy_all();
    const std::vector<std::string> errors = harness_.recorder().errors();
    const auto validation = std::count_if(errors.begin(), errors.end(), [](const std::string& e) {
      return e.find("validation") != std::string::npos;
    });
    EXPECT_EQ(validation, 0) << "first: " << (errors.empty() ? "" : errors[0]);
  }

  // Creates a plugin (destroyed in TearDown); nullptr with *error on failure.
  loom_plugin_t* create(std::vector<std::pair<const char*, const char*>> options,
                        std::string* error = nullptr) {
    return harness_.create(::loom::testing::Options(options.begin(), options.end()), error);
  }

  // A validated plugin and its first device; false (with *why) when there is
  // no device.
  bool open_device(std::string* why, std::vector<std::pair<const char*, const char*>> extra = {}) {
    extra.emplace_back("vulkan.validation", "1");
    loom_plugin_t* p = create(extra, why);
    if (p == nullptr) return false;
    size_t count = 0;
    if (take(api_, api_->device_count(p, &count)) != "ok" || count == 0) {
      *why = take(api_, api_->plugin_check_available(p));
      return false;
    }
    plugin_ = p;
    return harness_.device(p, 0, &device_) == "ok";
  }

  loom_buffer_t* allocate(uint64_t size, uint32_t flags = LOOM_BUFFER_DEVICE_LOCAL,
                          std::string* error = nullptr) {
    loom_buffer_t* buffer = nullptr;
    std::string s = harness_.allocate(device_, size, flags, &buffer);
    if (error != nullptr) *error = s;
    return buffer;
  }
  std::string copy(loom_buffer_t* b, uint64_t offset, void* host, uint64_t size, bool to_device) {
    return to_device ? harness_.copy_from_host(b, offset, host, size) : harness_.copy_to_host(b, offset, host, size);
  }

  ::loom::testing::PluginHarness harness_{LOOM_VULKAN_PLUGIN_PATH};
  const loom_plugin_api_t* api_ = nullptr;
  loom_plugin_t* plugin_ = nullptr;
  loom_device_t* device_ = nullptr;
};

// Skips the test, saying why, when there is no Vulkan device; where every
// suite is required (LOOM_REQUIRE_ALL_SUITES=1: setup.sh installed lavapipe)
// it fails instead.
#define LOOM_VK_REQUIRE_DEVICE(...)                                      \
  do {                                                                   \
    std::string why_;                                                    \
    if (!open_device(&why_, std::vector<std::pair<const char*, const char*>>{__VA_ARGS__})) { \
      const char* required_ = std::getenv("LOOM_REQUIRE_ALL_SUITES");    \
      if (required_ != nullptr && std::string(required_) == "1") {       \
        FAIL() << "no Vulkan device: " << why_                           \
               << " (LOOM_REQUIRE_ALL_SUITES=1 requires one: lavapipe, Debian mesa-vulkan-drivers)"; \
      }                                                                  \
      GTEST_SKIP() << "no Vulkan device: " << why_;                      \
    }                                                                    \
  } while (0)

}  // namespace loom::vulkan::test
