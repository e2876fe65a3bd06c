// Placement with device selectors, against the fake plugins of tests/support:
// kinds, preference lists, policies, load-time fallback, the explanation, and
// the errors of selectors that match nothing.
#include <gtest/gtest.h>

#include <string>

#include "fake_sum_program.hpp"
#include "loom/runtime.hpp"

namespace loom {
namespace {

using Outcome = PlacementCandidate::Outcome;

// The sum program with one "fake:add" variant per loader key, preferred first.
std::vector<std::byte> sum_program(const std::vector<std::string>& keys) {
  std::vector<std::pair<std::string, std::string>> variants;
  for (const std::string& key : keys) variants.emplace_back(key, "fake:add");
  return testing::sum_program(variants);
}

// The plugins "fake" and "fake_large" (each serving its own name as loader
// key), both with `options`.
std::unique_ptr<Runtime> runtime_with(std::vector<std::pair<std::string, std::string>> options,
                                      std::vector<std::string> plugins = {"fake"}) {
  return testing::fake_plugins_runtime(std::move(options), plugins);
}

// Three fake devices: fake://0 a CPU, fake://1 a GPU, fake://2 an accelerator.
std::unique_ptr<Runtime> three_kinds(std::string fail_load = "") {
  std::vector<std::pair<std::string, std::string>> options = {
      {"fake.devices", "3"}, {"fake.kinds", "cpu,gpu,accelerator"}};
  if (!fail_load.empty()) options.emplace_back("fake.fail_load", fail_load);
  return runtime_with(options);
}

struct Placed {
  std::string device;
  std::string key;
  PlacementExplanation explanation;
};

// Loads the sum program with `selector`, checks that it computes a + b, and
// returns where it went.
Placed place(Runtime& runtime, const std::string& selector,
             const std::vector<std::string>& keys = {"fake"}) {
  auto bytes = sum_program(keys);
  LoadOptions load;
  load.device = selector;
  auto program = runtime.load_program(bytes, load);
  EXPECT_TRUE(program.ok()) << selector << ": " << program.status().to_string();
  if (!program.ok()) return {};
  Tensor a = Tensor::zeros(DType::kF32, {2, 3}).value(), b = a;
  for (int i = 0; i < 6; ++i) {
    a.data_as<float>()[i] = static_cast<float>(i);
    b.data_as<float>()[i] = 10.0f;
  }
  NamedTensor in[] = {{"a", a}, {"b", b}};
  auto out = (*program)->run("main", in);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (out.ok()) EXPECT_FLOAT_EQ((*out)[0].tensor.data_as<float>()[5], 15.0f);
  return {(*program)->placements().at(0).device, (*program)->placements().at(0).loader_key,
          (*program)->explain()};
}

Status load_error(Runtime& runtime, const std::string& selector,
                  PlacementExplanation* explanation = nullptr) {
  auto bytes = sum_program({"fake"});
  LoadOptions load;
  load.device = selector;
  load.explanation = explanation;
  auto program = runtime.load_program(bytes, load);
  EXPECT_FALSE(program.ok()) << selector << " loaded";
  return program.ok() ? Status() : program.status();
}

const PlacementCandidate* find(const PlacementExplanation& e, std::string_view device) {
  for (const PlacementCandidate& c : e.delegates.at(0).candidates) {
    if (c.device == device) return &c;
  }
  return nullptr;
}

TEST(Placement, KindSelectsADeviceOfThatKind) {
  auto runtime = three_kinds();
  EXPECT_EQ(place(*runtime, "kind:gpu").device, "fake://1");
  EXPECT_EQ(place(*runtime, "kind:accelerator").device, "fake://2");
  EXPECT_EQ(place(*runtime, "kind:cpu").device, "fake://0");
}

TEST(Placement, PreferenceListTakesTheFirstAlternativeThatMatches) {
  auto runtime = three_kinds();
  EXPECT_EQ(place(*runtime, "kind:virtual,kind:gpu,kind:cpu").device, "fake://1");
  EXPECT_EQ(place(*runtime, "fake://2,kind:gpu").device, "fake://2");
}

TEST(Placement, PoliciesRankAcceleratorsFirst) {
  auto runtime = three_kinds();
  Placed fastest = place(*runtime, "policy:fastest");
  EXPECT_EQ(fastest.device, "fake://2");
  // Every device was a candidate, ranked by score: 3, 2, 1.
  const auto& c = fastest.explanation.delegates.at(0).candidates;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].score, 3);
  EXPECT_EQ(c[1].device, "fake://1");
  EXPECT_EQ(c[2].device, "fake://0");
  EXPECT_EQ(c[2].outcome, Outcome::kNotTried);
  EXPECT_EQ(place(*runtime, "policy:prefer-accelerator&kind:cpu").device, "fake://0");
}

TEST(Placement, FastestFollowsThePluginsEstimates) {
  // ABI 1.1 executable_estimate: the CPU says 5 us, the GPU 2 us, the
  // accelerator 9 us, so the GPU goes first although accelerators rank higher
  // by kind.
  auto runtime = runtime_with({{"fake.devices", "3"},
                               {"fake.kinds", "cpu,gpu,accelerator"},
                               {"fake.estimate_ns", "5000,2000,9000"}});
  Placed p = place(*runtime, "policy:fastest");
  EXPECT_EQ(p.device, "fake://1");
  const auto& c = p.explanation.delegates.at(0).candidates;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].estimate_ns, 2000u);
  EXPECT_EQ(c[1].device, "fake://0");
  EXPECT_EQ(c[1].estimate_ns, 5000u);
  EXPECT_EQ(c[2].device, "fake://2");
  EXPECT_NE(p.explanation.to_string().find("estimate 2.0 us"), std::string::npos)
      << p.explanation.to_string();
  // The estimate orders only policy:fastest; other selectors keep their order.
  EXPECT_EQ(place(*runtime, "policy:prefer-accelerator").device, "fake://2");
  EXPECT_EQ(place(*runtime, "fake").device, "fake://0");
}

TEST(Placement, FastestPutsDevicesWithoutAnEstimateAfterThoseWithOne) {
  // Device 2 (the accelerator) answers 0, "no estimate": it keeps its kind
  // rank but comes after the devices that gave one.
  auto runtime = runtime_with({{"fake.devices", "3"},
                               {"fake.kinds", "cpu,gpu,accelerator"},
                               {"fake.estimate_ns", "7000,3000,0"}});
  Placed p = place(*runtime, "policy:fastest");
  EXPECT_EQ(p.device, "fake://1");
  const auto& c = p.explanation.delegates.at(0).candidates;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1].device, "fake://0");
  EXPECT_EQ(c[2].device, "fake://2");
  EXPECT_EQ(c[2].estimate_ns, 0u);
}

TEST(Placement, FastestWithoutEstimatesIsTheKindOrder) {
  // A 1.0 plugin (fake_large speaks only 1.0) has no executable_estimate:
  // the documented default is the kind ranking of prefer-accelerator.
  auto runtime = runtime_with({{"fake.devices", "3"},
                               {"fake.kinds", "cpu,gpu,accelerator"},
                               {"fake.estimate_ns", "1,1,1"}},
                              {"fake_large"});
  Placed p = place(*runtime, "policy:fastest", {"fake_large"});
  EXPECT_EQ(p.device, "fake_large://2");
  for (const auto& c : p.explanation.delegates.at(0).candidates) EXPECT_EQ(c.estimate_ns, 0u);
}

TEST(Placement, PluginNameTakesItsFirstUsableDevice) {
  EXPECT_EQ(place(*three_kinds(), "fake").device, "fake://0");
  // fake://0 cannot load the executable: the plugin's next device takes it.
  Placed p = place(*three_kinds("0"), "fake");
  EXPECT_EQ(p.device, "fake://1");
  const PlacementCandidate* refused = find(p.explanation, "fake://0");
  ASSERT_NE(refused, nullptr);
  EXPECT_EQ(refused->outcome, Outcome::kRefused);
  EXPECT_NE(refused->reason.find("out of memory"), std::string::npos) << refused->reason;
}

TEST(Placement, LoadFailureFallsBackInSelectorOrderAndIsExplained) {
  auto runtime = three_kinds("1");
  Placed p = place(*runtime, "kind:gpu,kind:cpu");
  EXPECT_EQ(p.device, "fake://0");
  const auto& c = p.explanation.delegates.at(0).candidates;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].device, "fake://1");
  EXPECT_EQ(c[0].outcome, Outcome::kRefused);
  EXPECT_EQ(c[0].matched_by, "kind:gpu");
  EXPECT_NE(c[0].reason.find("resource_exhausted"), std::string::npos) << c[0].reason;
  EXPECT_EQ(c[1].device, "fake://0");
  EXPECT_EQ(c[1].outcome, Outcome::kChosen);
  EXPECT_EQ(c[1].matched_by, "kind:cpu");
  // The accelerator is listed as not selected, with why.
  EXPECT_EQ(c[2].device, "fake://2");
  EXPECT_EQ(c[2].outcome, Outcome::kRefused);
  EXPECT_NE(c[2].reason.find("kind:gpu: an accelerator device, not gpu"), std::string::npos)
      << c[2].reason;
  const std::string text = p.explanation.to_string();
  EXPECT_NE(text.find("placement (selector: kind:gpu,kind:cpu)"), std::string::npos) << text;
  EXPECT_NE(text.find("chosen    variant 0 'fake' on fake://0 [kind:cpu]"), std::string::npos)
      << text;
}

TEST(Placement, EveryDeviceFailingToLoadKeepsTheCodeAndEveryReason) {
  auto runtime = three_kinds("0,1,2");
  PlacementExplanation explanation;
  Status st = load_error(*runtime, "fake", &explanation);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.to_string();
  for (const char* uri : {"fake://0", "fake://1", "fake://2"}) {
    EXPECT_NE(st.message().find(std::string("'fake' on ") + uri), std::string::npos) << st.message();
    ASSERT_NE(find(explanation, uri), nullptr) << uri;
    EXPECT_EQ(find(explanation, uri)->outcome, Outcome::kRefused);
  }
  EXPECT_NE(st.message().find("the devices selected by 'fake'"), std::string::npos) << st.message();
}

TEST(Placement, SelectorOrderOverridesTheProgramsVariantOrder) {
  auto runtime = runtime_with({}, {"fake", "fake_large"});
  // The program prefers fake_large; the default follows it.
  EXPECT_EQ(place(*runtime, "", {"fake_large", "fake"}).key, "fake_large");
  // A selector naming fake first takes fake's variant.
  Placed p = place(*runtime, "fake,fake_large", {"fake_large", "fake"});
  EXPECT_EQ(p.key, "fake");
  EXPECT_EQ(p.device, "fake://0");
  const PlacementCandidate* other = find(p.explanation, "fake_large://0");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->variant, 0u);
  EXPECT_EQ(other->outcome, Outcome::kNotTried);
}

TEST(Placement, AVariantNoSelectedDeviceServesIsExplained) {
  auto runtime = runtime_with({}, {"fake", "fake_large"});
  Placed p = place(*runtime, "fake", {"fake_large", "fake"});
  EXPECT_EQ(p.key, "fake");
  const auto& c = p.explanation.delegates.at(0).candidates;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].loader_key, "fake_large");
  EXPECT_TRUE(c[1].device.empty());
  EXPECT_NE(c[1].reason.find("no selected device serves loader key 'fake_large'"),
            std::string::npos) << c[1].reason;
}

TEST(Placement, SelectorMatchingNothingListsDevicesWithKinds) {
  auto runtime = three_kinds();
  Status st = load_error(*runtime, "kind:virtual");
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("no device 'kind:virtual'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("fake://1 (gpu)"), std::string::npos) << st.message();
  st = load_error(*runtime, "dtype:f16&kind:gpu,fake://7");
  EXPECT_NE(st.message().find("no device matches 'dtype:f16&kind:gpu,fake://7'"),
            std::string::npos) << st.message();
  EXPECT_NE(st.message().find("did you mean 'fake://"), std::string::npos) << st.message();
}

TEST(Placement, ABareKindNameGetsTheKindSyntax) {
  auto runtime = three_kinds();
  Status st = load_error(*runtime, "gpu");
  EXPECT_NE(st.message().find("write 'kind:gpu'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("no plugin named 'gpu'"), std::string::npos) << st.message();
}

TEST(Placement, MalformedSelectorIsInvalidArgument) {
  auto runtime = three_kinds();
  Status st = load_error(*runtime, "kind:gpu,,fake");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("alternative 2 is empty"), std::string::npos) << st.message();
}

TEST(Placement, ExplanationIsFilledWhenNothingCanLoad) {
  auto runtime = three_kinds();
  auto bytes = sum_program({"vulkan-compute"});
  PlacementExplanation explanation;
  LoadOptions load;
  load.explanation = &explanation;
  auto program = runtime->load_program(bytes, load);
  ASSERT_FALSE(program.ok());
  ASSERT_EQ(explanation.delegates.size(), 1u);
  const auto& c = explanation.delegates[0].candidates;
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].outcome, Outcome::kRefused);
  EXPECT_NE(c[0].reason.find("no plugin serves loader key 'vulkan-compute'"), std::string::npos)
      << c[0].reason;
}

}  // namespace
}  // namespace loom
