// vulkan-compute through its C ABI: loading Vulkan, devices and their
// properties, options, device memory and fences. Runs on lavapipe (or any
// Vulkan device) with the validation layer on.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <numeric>

#include "vk_harness.hpp"

namespace loom::vulkan::test {
namespace {

TEST_F(VulkanTest, DeviceReportsUriKindMemoryAndLimits) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_device_info_t info{};
  info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  EXPECT_STREQ(info.uri, "vulkan-compute://0");
  const std::string name = info.name;
  EXPECT_NE(name.find("[Vulkan 1."), std::string::npos) << name;
  EXPECT_NE(name.find("subgroup "), std::string::npos) << name;
  EXPECT_NE(name.find("shared "), std::string::npos) << name;
  if (name.find("llvmpipe") != std::string::npos) {
    EXPECT_EQ(info.kind, LOOM_DEVICE_KIND_CPU);
    // vulkan.wait=auto never spins on a CPU implementation.
    EXPECT_NE(name.find(", wait block]"), std::string::npos) << name;
  }
  EXPECT_GT(info.device_memory_bytes, 0u);
  EXPECT_TRUE(info.capabilities & LOOM_DEVICE_CAP_ASYNC);
  EXPECT_FALSE(info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE);
  // f32, and u8, i8, i32 where the int8 kernels run (named in the name).
  const uint64_t int8 = LOOM_DTYPE_BIT(LOOM_DTYPE_U8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I8) | LOOM_DTYPE_BIT(LOOM_DTYPE_I32);
  EXPECT_EQ(info.dtype_mask,
            LOOM_DTYPE_BIT(LOOM_DTYPE_F32) | (name.find(", int8 kernels") != std::string::npos ? int8 : 0));
  EXPECT_EQ(take(api_, api_->plugin_check_available(plugin_)), "ok");
}

TEST_F(VulkanTest, MissingLoaderLibraryLeavesNoDevicesAndSaysWhy) {
  loom_plugin_t* p = create({{"vulkan.loader", "libloom-no-such-vulkan.so.1"}});
  ASSERT_NE(p, nullptr);
  size_t count = 7;
  ASSERT_EQ(take(api_, api_->device_count(p, &count)), "ok");
  EXPECT_EQ(count, 0u);
  const std::string why = take(api_, api_->plugin_check_available(p));
  EXPECT_TRUE(starts_with(why, code_prefix(LOOM_STATUS_UNAVAILABLE))) << why;
  EXPECT_NE(why.find("libloom-no-such-vulkan.so.1"), std::string::npos) << why;
  loom_device_t* d = nullptr;
  EXPECT_TRUE(starts_with(take(api_, api_->device_get(p, 0, &d)), code_prefix(LOOM_STATUS_NOT_FOUND)));
}

TEST_F(VulkanTest, LibraryThatIsNotALoaderIsNamed) {
  loom_plugin_t* p = create({{"vulkan.loader", "libm.so.6"}});
  ASSERT_NE(p, nullptr);
  const std::string why = take(api_, api_->plugin_check_available(p));
  EXPECT_NE(why.find("is not a Vulkan loader"), std::string::npos) << why;
}

// volk holds one loader per process: once a plugin instance runs on
// libvulkan.so.1, another instance naming a different loader library (here a
// copy of the same file, which dlopen loads as a second library) is refused
// (no devices, UNAVAILABLE with the reason), and the first loader keeps
// serving new instances.
TEST_F(VulkanTest, SecondLoaderLibraryInOneProcessIsRefusedAndNamed) {
  LOOM_VK_REQUIRE_DEVICE();
  Dl_info where{};
  void* self = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ASSERT_NE(self, nullptr) << "the fixture's plugin has not loaded libvulkan.so.1";
  ASSERT_NE(dladdr(dlsym(self, "vkGetInstanceProcAddr"), &where), 0);
  dlclose(self);
  const std::filesystem::path copy =
      std::filesystem::temp_directory_path() /
      ("loom-vk-second-loader-" + std::to_string(getpid()) + ".so");
  std::filesystem::copy_file(where.dli_fname, copy,
                             std::filesystem::copy_options::overwrite_existing);
  loom_plugin_t* p = create({{"vulkan.loader", copy.c_str()}});
  ASSERT_NE(p, nullptr);
  size_t count = 7;
  ASSERT_EQ(take(api_, api_->device_count(p, &count)), "ok");
  EXPECT_EQ(count, 0u);
  const std::string why = take(api_, api_->plugin_check_available(p));
  EXPECT_TRUE(starts_with(why, code_prefix(LOOM_STATUS_UNAVAILABLE))) << why;
  EXPECT_NE(why.find(copy.string()), std::string::npos) << why;
  EXPECT_NE(why.find("one loader per process"), std::string::npos) << why;
  loom_plugin_t* again = create({{"vulkan.loader", "libvulkan.so.1"}});
  ASSERT_NE(again, nullptr);
  ASSERT_EQ(take(api_, api_->device_count(again, &count)), "ok");
  EXPECT_GT(count, 0u);
  std::filesystem::remove(copy);
}

TEST_F(VulkanTest, NoDriverLeavesNoDevicesAndSaysWhy) {
  // The loader reads these when an instance is made; no driver file exists.
  const char* old_icd = std::getenv("VK_ICD_FILENAMES");
  const std::string saved = old_icd != nullptr ? old_icd : "";
  setenv("VK_ICD_FILENAMES", "/nonexistent/loom-no-driver.json", 1);
  setenv("VK_DRIVER_FILES", "/nonexistent/loom-no-driver.json", 1);
  loom_plugin_t* p = create({});
  if (old_icd != nullptr) setenv("VK_ICD_FILENAMES", saved.c_str(), 1); else unsetenv("VK_ICD_FILENAMES");
  unsetenv("VK_DRIVER_FILES");
  ASSERT_NE(p, nullptr);
  size_t count = 7;
  ASSERT_EQ(take(api_, api_->device_count(p, &count)), "ok");
  EXPECT_EQ(count, 0u);
  const std::string why = take(api_, api_->plugin_check_available(p));
  EXPECT_TRUE(starts_with(why, code_prefix(LOOM_STATUS_UNAVAILABLE))) << why;
  EXPECT_NE(why.find("driver"), std::string::npos) << why;
}

TEST_F(VulkanTest, AllowCpuZeroHidesCpuImplementations) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_device_info_t info{};
  info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  size_t all = 0;
  ASSERT_EQ(take(api_, api_->device_count(plugin_, &all)), "ok");
  loom_plugin_t* p = create({{"vulkan.allow_cpu", "0"}});
  ASSERT_NE(p, nullptr);
  size_t count = 0;
  ASSERT_EQ(take(api_, api_->device_count(p, &count)), "ok");
  for (size_t i = 0; i < count; ++i) {
    loom_device_t* d = nullptr;
    ASSERT_EQ(take(api_, api_->device_get(p, i, &d)), "ok");
    loom_device_info_t di{};
    di.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
    ASSERT_EQ(take(api_, api_->device_info(d, &di)), "ok");
    EXPECT_NE(di.kind, LOOM_DEVICE_KIND_CPU) << di.name;
  }
  if (count == 0) {
    const std::string why = take(api_, api_->plugin_check_available(p));
    EXPECT_NE(why.find("vulkan.allow_cpu=0"), std::string::npos) << why;
  }
  if (info.kind == LOOM_DEVICE_KIND_CPU) {
    EXPECT_LT(count, all);
  }
}

TEST_F(VulkanTest, BadOptionsAreRejectedAndForeignOnesIgnored) {
  std::string error;
  EXPECT_EQ(create({{"vulkan.allow_cpu", "maybe"}}, &error), nullptr);
  EXPECT_NE(error.find("vulkan.allow_cpu=\"maybe\""), std::string::npos) << error;
  EXPECT_EQ(create({{"vulkan.frobnicate", "1"}}, &error), nullptr);
  EXPECT_NE(error.find("unknown option vulkan.frobnicate"), std::string::npos) << error;
  EXPECT_EQ(create({{"vulkan.loader", ""}}, &error), nullptr);
  EXPECT_EQ(create({{"vulkan.wait", "sometimes"}}, &error), nullptr);
  EXPECT_NE(error.find("vulkan.wait=\"sometimes\" must be auto, block, spin or timeline"),
            std::string::npos)
      << error;
  EXPECT_NE(create({{LOOM_OPTION_THREADS, "2"}, {"cpu-simd.other", "x"}}, &error), nullptr) << error;
}

// ------------------------------------------------------------------ memory

class VulkanMemory : public VulkanTest {
 protected:
  void round_trip(size_t floats) {
    std::vector<float> in(floats), out(floats, -1.0f);
    std::iota(in.begin(), in.end(), 0.5f);
    loom_buffer_t* b = allocate(floats * 4);
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(copy(b, 0, in.data(), floats * 4, true), "ok");
    ASSERT_EQ(copy(b, 0, out.data(), floats * 4, false), "ok");
    EXPECT_EQ(in, out);
    // A copy at an offset touches only its bytes.
    float patch[2] = {-7.0f, -8.0f};
    ASSERT_EQ(copy(b, 4 * 3, patch, 8, true), "ok");
    ASSERT_EQ(copy(b, 0, out.data(), floats * 4, false), "ok");
    EXPECT_EQ(out[2], in[2]);
    EXPECT_EQ(out[3], -7.0f);
    EXPECT_EQ(out[4], -8.0f);
    EXPECT_EQ(out[5], in[5]);
    api_->buffer_free(b);
  }
};

TEST_F(VulkanMemory, CopiesRoundTripThroughMappedMemory) {
  LOOM_VK_REQUIRE_DEVICE();
  round_trip(1000);
}

TEST_F(VulkanMemory, CopiesRoundTripThroughStagingInChunks) {
  LOOM_VK_REQUIRE_DEVICE({"vulkan.staging", "1"});
  round_trip((9u << 20) / 4 + 3);  // more than two 4 MiB staging chunks
}

TEST_F(VulkanMemory, OutOfRangeCopiesAndBadFlagsAreErrors) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_buffer_t* b = allocate(64);
  ASSERT_NE(b, nullptr);
  float host[32] = {};
  EXPECT_TRUE(starts_with(copy(b, 60, host, 8, true), code_prefix(LOOM_STATUS_OUT_OF_RANGE)));
  EXPECT_TRUE(starts_with(copy(b, UINT64_MAX, host, 8, false), code_prefix(LOOM_STATUS_OUT_OF_RANGE)));
  EXPECT_EQ(copy(b, 0, host, 0, true), "ok");
  api_->buffer_free(b);
  std::string error;
  EXPECT_EQ(allocate(64, 0x80, &error), nullptr);
  EXPECT_TRUE(starts_with(error, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << error;
  EXPECT_EQ(allocate(uint64_t{1} << 62, 0, &error), nullptr);
  EXPECT_TRUE(starts_with(error, code_prefix(LOOM_STATUS_RESOURCE_EXHAUSTED))) << error;
}

TEST_F(VulkanMemory, HostVisibleBufferMapsAndSeesCopies) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_buffer_t* b = allocate(256, LOOM_BUFFER_HOST_VISIBLE);
  ASSERT_NE(b, nullptr);
  void* p = nullptr;
  ASSERT_EQ(take(api_, api_->buffer_map(b, &p)), "ok");
  ASSERT_NE(p, nullptr);
  float v[4] = {1, 2, 3, 4};
  ASSERT_EQ(copy(b, 16, v, 16, true), "ok");
  EXPECT_EQ(std::memcmp(static_cast<char*>(p) + 16, v, 16), 0);
  api_->buffer_unmap(b);
  api_->buffer_free(b);
}

TEST_F(VulkanMemory, HostImportSharesMemoryWithoutCopy) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_device_info_t info{};
  info.struct_size = LOOM_DEVICE_INFO_STRUCT_SIZE;
  ASSERT_EQ(take(api_, api_->device_info(device_, &info)), "ok");
  if (!(info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT)) {
    GTEST_SKIP() << info.name << " has no VK_EXT_external_memory_host";
  }
  const size_t bytes = 64 * 1024;
  float* host = static_cast<float*>(std::aligned_alloc(64 * 1024, bytes));
  for (size_t i = 0; i < bytes / 4; ++i) host[i] = static_cast<float>(i);
  loom_buffer_import_args_t args{};
  args.struct_size = LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE;
  args.device = device_;
  args.host_pointer = host;
  args.size = bytes;
  ASSERT_EQ(take(api_, api_->buffer_import_host(&args)), "ok");
  float out[4] = {};
  ASSERT_EQ(copy(args.out_buffer, 40, out, 16, false), "ok");
  EXPECT_EQ(out[0], 10.0f);
  host[11] = -1.0f;  // the buffer is the host memory
  ASSERT_EQ(copy(args.out_buffer, 44, out, 4, false), "ok");
  EXPECT_EQ(out[0], -1.0f);
  api_->buffer_free(args.out_buffer);
  // A misaligned pointer is refused with the alignment named.
  args.host_pointer = reinterpret_cast<char*>(host) + 4;
  args.size = 4096;
  const std::string error = take(api_, api_->buffer_import_host(&args));
  EXPECT_TRUE(starts_with(error, code_prefix(LOOM_STATUS_INVALID_ARGUMENT))) << error;
  EXPECT_NE(error.find("multiples of"), std::string::npos) << error;
  EXPECT_EQ(args.out_buffer, nullptr);
  std::free(host);
}

// ------------------------------------------------------------------ fences

TEST_F(VulkanTest, UnsignaledFenceTimesOutThenHostSignalCompletesIt) {
  LOOM_VK_REQUIRE_DEVICE();
  loom_fence_t* f = nullptr;
  ASSERT_EQ(take(api_, api_->fence_create(device_, &f)), "ok");
  bool signaled = true;
  ASSERT_EQ(take(api_, api_->fence_query(f, &signaled)), "ok");
  EXPECT_FALSE(signaled);
  const std::string timeout = take(api_, api_->fence_wait(f, 1'000'000));
  EXPECT_TRUE(starts_with(timeout, code_prefix(LOOM_STATUS_DEADLINE_EXCEEDED))) << timeout;
  EXPECT_NE(timeout.find("vulkan-compute://0"), std::string::npos) << timeout;
  ASSERT_EQ(take(api_, api_->fence_signal(f)), "ok");
  EXPECT_EQ(take(api_, api_->fence_wait(f, 0)), "ok");
  ASSERT_EQ(take(api_, api_->fence_query(f, &signaled)), "ok");
  EXPECT_TRUE(signaled);
  api_->fence_destroy(f);
}

}  // namespace
}  // namespace loom::vulkan::test
