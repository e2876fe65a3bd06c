// Loads the vulkan-compute plugin with dlopen and drives it through its C
// ABI only. Every plugin is created with vulkan.validation=1: the host's
// logger counts the validation messages, and each test ends by expecting
// none. Tests that need a device skip (with the plugin's reason) when the
// machine has none.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "loom/plugin.h"

namespace loom::vulkan::test {

// "ok" or "<code>: <message>"; releases the status.
inline std::string take(const loom_plugin_api_t* api, loom_status_t* s) {
  if (s == nullptr) return "ok";
  std::string out = std::to_string(api->status_code(s)) + ": " + api->status_message(s);
  api->status_destroy(s);
  return out;
}

inline std::string code(loom_status_code_t c) { return std::to_string(c) + ": "; }
inline bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Host services whose logger records error lines.
struct HostLog {
  std::mutex mu;
  std::vector<std::string> errors;
  std::atomic<int> validation{0};
  loom_host_services_t services{};

  HostLog() {
    services.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
    services.user_data = this;
    services.allocate = [](void*, size_t size, size_t alignment) -> void* {
      return std::aligned_alloc(alignment < 16 ? 16 : alignment,
                                (size + alignment - 1) / alignment * alignment);
    };
    services.free = [](void*, void* p) { std::free(p); };
    services.log = [](void* user, loom_log_level_t level, const char* message) {
      auto* self = static_cast<HostLog*>(user);
      if (level < LOOM_LOG_ERROR) return;
      std::lock_guard<std::mutex> lock(self->mu);
      self->errors.emplace_back(message);
      if (std::strstr(message, "validation") != nullptr) ++self->validation;
    };
  }
};

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(LOOM_VULKAN_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto query = reinterpret_cast<loom_plugin_query_fn_t>(dlsym(handle_, LOOM_PLUGIN_ENTRY_POINT_NAME));
    ASSERT_NE(query, nullptr);
    char reason[256] = {};
    loom_plugin_query_t q{};
    q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
    q.host_abi_min = LOOM_ABI_VERSION(1, 0);
    q.host_abi_max = LOOM_ABI_CURRENT;
    q.host = &log_.services;
    q.reason = reason;
    q.reason_capacity = sizeof reason;
    ASSERT_EQ(query(&q), LOOM_STATUS_OK) << reason;
    api_ = q.out_api;
  }
  void TearDown() override {
    for (loom_plugin_t* p : plugins_) api_->plugin_destroy(p);
    std::lock_guard<std::mutex> lock(log_.mu);
    EXPECT_EQ(log_.validation.load(), 0) << "first: " << (log_.errors.empty() ? "" : log_.errors[0]);
    if (handle_ != nullptr) dlclose(handle_);
  }

  // Creates a plugin (destroyed in TearDown); nullptr with *error on failure.
  loom_plugin_t* create(std::vector<std::pair<const char*, const char*>> options,
                        std::string* error = nullptr) {
    std::vector<loom_option_t> opts;
    for (auto& [k, v] : options) opts.push_back({LOOM_OPTION_STRUCT_SIZE, k, v});
    std::vector<const loom_option_t*> ptrs;
    for (auto& o : opts) ptrs.push_back(&o);
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.host = &log_.services;
    args.option_count = ptrs.size();
    args.options = ptrs.data();
    std::string s = take(api_, api_->plugin_create(&args));
    if (error != nullptr) *error = s;
    if (args.out_plugin != nullptr) plugins_.push_back(args.out_plugin);
    return args.out_plugin;
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
    return take(api_, api_->device_get(p, 0, &device_)) == "ok";
  }

  loom_buffer_t* allocate(uint64_t size, uint32_t flags = LOOM_BUFFER_DEVICE_LOCAL,
                          std::string* error = nullptr) {
    loom_buffer_allocate_args_t args{};
    args.struct_size = LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE;
    args.device = device_;
    args.size = size;
    args.flags = flags;
    std::string s = take(api_, api_->buffer_allocate(&args));
    if (error != nullptr) *error = s;
    return args.out_buffer;
  }
  std::string copy(loom_buffer_t* b, uint64_t offset, void* host, uint64_t size, bool to_device) {
    loom_buffer_copy_args_t args{};
    args.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
    args.buffer = b;
    args.buffer_offset = offset;
    args.host_pointer = host;
    args.size = size;
    return take(api_, to_device ? api_->buffer_copy_from_host(&args)
                                : api_->buffer_copy_to_host(&args));
  }

  void* handle_ = nullptr;
  HostLog log_;
  const loom_plugin_api_t* api_ = nullptr;
  std::vector<loom_plugin_t*> plugins_;
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
