// DeviceSelector and parse_device_uri (loom/device.hpp): every form of the
// selector grammar, its errors, and matching against device descriptions.
#include <gtest/gtest.h>

#include "loom/device.hpp"
#include "loom/plugin.h"

namespace loom {
namespace {

DeviceInfo device(std::string uri, DeviceKind kind, uint64_t caps = 0,
                  uint64_t dtypes = LOOM_DTYPE_BIT(LOOM_DTYPE_F32)) {
  DeviceInfo d;
  d.plugin = uri.substr(0, uri.find("://"));
  d.uri = std::move(uri);
  d.kind = kind;
  d.capabilities = caps;
  d.dtype_mask = dtypes;
  return d;
}

std::string error_of(std::string_view text) {
  auto s = DeviceSelector::parse(text);
  EXPECT_FALSE(s.ok()) << "'" << text << "' parsed";
  return s.ok() ? std::string() : s.status().message();
}

TEST(DeviceUri, SplitsPluginAndDevice) {
  auto uri = parse_device_uri("vulkan-compute://1");
  ASSERT_TRUE(uri.ok());
  EXPECT_EQ(uri->plugin, "vulkan-compute");
  EXPECT_EQ(uri->device, "1");
}

TEST(DeviceUri, MalformedUrisAreRefusedWithTheForm) {
  for (std::string_view bad : {"cpu-simd", "://0", "cpu-simd://", ""}) {
    auto uri = parse_device_uri(bad);
    ASSERT_FALSE(uri.ok()) << bad;
    EXPECT_NE(uri.status().message().find("cpu-simd://0"), std::string::npos)
        << uri.status().message();
  }
}

TEST(DeviceSelector, EmptyIsTheDefault) {
  auto s = DeviceSelector::parse("  ");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->is_default());
  EXPECT_TRUE(s->named_plugins().empty());
}

TEST(DeviceSelector, EveryTermFormParses) {
  auto s = DeviceSelector::parse(
      "cpu-simd://0, vulkan-compute ,kind:gpu&dtype:f16&cap:async,policy:fastest,"
      "policy:prefer-accelerator&kind:accelerator,any");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const auto& alts = s->alternatives();
  ASSERT_EQ(alts.size(), 6u);
  EXPECT_EQ(alts[0].terms[0].type, SelectorTerm::Type::kUri);
  EXPECT_EQ(alts[1].text, "vulkan-compute");
  EXPECT_EQ(alts[1].terms[0].type, SelectorTerm::Type::kPlugin);
  ASSERT_EQ(alts[2].terms.size(), 3u);
  EXPECT_EQ(alts[2].terms[0].kind, DeviceKind::kGpu);
  EXPECT_EQ(alts[2].terms[1].dtype, DType::kF16);
  EXPECT_EQ(alts[2].terms[2].capability, LOOM_DEVICE_CAP_ASYNC);
  EXPECT_EQ(alts[3].policy, PlacementPolicy::kFastest);
  EXPECT_EQ(alts[4].policy, PlacementPolicy::kPreferAccelerator);
  EXPECT_EQ(alts[5].terms[0].type, SelectorTerm::Type::kAny);
  // kind:..., policy:... and any may match any plugin's devices.
  EXPECT_TRUE(s->named_plugins().empty());
}

TEST(DeviceSelector, NamedPluginsWhenEveryAlternativeNamesOne) {
  auto s = DeviceSelector::parse("vulkan-compute&kind:gpu,cpu-simd://0,cpu-simd");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->named_plugins(), (std::vector<std::string>{"vulkan-compute", "cpu-simd"}));
}

TEST(DeviceSelector, NearMissesGetASuggestion) {
  EXPECT_NE(error_of("kind:gpuu").find("did you mean 'kind:gpu'?"), std::string::npos);
  EXPECT_NE(error_of("knd:gpu").find("did you mean 'kind:gpu'?"), std::string::npos);
  EXPECT_NE(error_of("policy:fastets").find("did you mean 'policy:fastest'?"),
            std::string::npos);
  EXPECT_NE(error_of("cap:asnc").find("did you mean 'cap:async'?"), std::string::npos);
  EXPECT_NE(error_of("dtype:f61").find("(f32, f16"), std::string::npos);
}

TEST(DeviceSelector, MalformedSelectorsNameTheProblem) {
  EXPECT_NE(error_of("cpu-simd,,kind:gpu").find("alternative 2 is empty"), std::string::npos);
  EXPECT_NE(error_of("kind:gpu,").find("alternative 2 is empty"), std::string::npos);
  EXPECT_NE(error_of("kind:gpu&").find("empty term"), std::string::npos);
  EXPECT_NE(error_of("policy:fastest&policy:prefer-accelerator").find("more than one policy"),
            std::string::npos);
  EXPECT_NE(error_of("cpu simd").find("is not a plugin name"), std::string::npos);
  EXPECT_NE(error_of("cpu-simd://").find("empty device part"), std::string::npos);
  EXPECT_NE(error_of("color:red").find("unknown selector term 'color:red'"), std::string::npos);
  // Every error quotes the whole selector.
  EXPECT_NE(error_of("any,kind:tpu").find("device selector 'any,kind:tpu'"), std::string::npos);
}

TEST(DeviceSelector, AlternativesMatchOnEveryTerm) {
  const DeviceInfo gpu = device("vk://0", DeviceKind::kGpu, LOOM_DEVICE_CAP_ASYNC,
                                LOOM_DTYPE_BIT(LOOM_DTYPE_F32) | LOOM_DTYPE_BIT(LOOM_DTYPE_F16));
  const DeviceInfo cpu = device("cpu-simd://0", DeviceKind::kCpu);
  auto s = DeviceSelector::parse("kind:gpu&dtype:f16&cap:async,cpu-simd,vk://0,cap:async");
  ASSERT_TRUE(s.ok());
  const auto& a = s->alternatives();
  EXPECT_TRUE(a[0].matches(gpu));
  EXPECT_FALSE(a[0].matches(cpu));
  EXPECT_EQ(a[0].mismatch(cpu), "a cpu device, not gpu");
  EXPECT_TRUE(a[1].matches(cpu));
  EXPECT_EQ(a[1].mismatch(gpu), "a device of plugin vk");
  EXPECT_TRUE(a[2].matches(gpu));
  EXPECT_EQ(a[2].mismatch(cpu), "not vk://0");
  EXPECT_EQ(a[3].mismatch(cpu), "lacks capability async");
  auto f64 = DeviceSelector::parse("dtype:f64");
  ASSERT_TRUE(f64.ok());
  EXPECT_EQ(f64->alternatives()[0].mismatch(gpu), "does not compute in f64");
}

}  // namespace
}  // namespace loom
