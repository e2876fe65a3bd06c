// The compile entries plugin.hpp makes of a Plugin's optional members
// (loom/sdk/compile.hpp): set only when the members exist; ABI structs
// checked and outputs zeroed; the graph verified before the plugin sees it;
// claims bounds-checked; the blob handed back in memory from the host's
// allocator with the loader key of plugin_info, and every plugin mistake
// (empty blob, unknown key, version outside the key's range) refused.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/plugin.hpp"
#include "loom/sdk/graph.hpp"
#include "graph_builder.hpp"

namespace {

using loom::sdk::Status;

struct Fence {
  Status signal() { return Status(); }
  Status wait(uint64_t) { return Status(); }
  Status query(bool* out) { return *out = true, Status(); }
};
struct Buffer {
  Status map(void**) { return loom::sdk::unimplemented("map"); }
  void unmap() {}
  Status copy_from_host(uint64_t, const void*, uint64_t) { return Status(); }
  Status copy_to_host(uint64_t, void*, uint64_t) { return Status(); }
};
struct Executable {
  Status execute(const loom::sdk::ExecuteCallT<Fence>&) { return Status(); }
};
struct Device {
  void info(loom_device_info_t*) {}
  Status check_executable(const loom::sdk::Blob&) { return Status(); }
  Status load_executable(const loom::sdk::Blob&, const loom::sdk::Options&, std::unique_ptr<Executable>*) {
    return loom::sdk::unimplemented("load");
  }
  Status allocate_buffer(uint64_t, uint64_t, uint32_t, std::unique_ptr<Buffer>*) {
    return loom::sdk::unimplemented("allocate");
  }
  Status create_fence(std::unique_ptr<Fence>*) { return loom::sdk::unimplemented("fence"); }
};

struct RunOnlyPlugin {
  Status check_available() { return Status(); }
  size_t device_count() { return 0; }
  Device* device(size_t) { return nullptr; }
};

// Claims every Relu; node "Bad" makes it claim a node that does not exist.
// compile's behaviour comes from compile option "mode".
struct CompilingPlugin : RunOnlyPlugin {
  Status compile_supported(const loom::sdk::GraphView& graph, loom::sdk::Claims* claims) {
    for (size_t n = 0; n < graph.node_count(); ++n) {
      if (graph.node(n).op_type() == "Relu") LOOM_SDK_RETURN_IF_ERROR(claims->claim(n));
      if (graph.node(n).op_type() == "Bad") LOOM_SDK_RETURN_IF_ERROR(claims->claim(n + 100));
    }
    return Status();
  }
  Status compile(const loom::sdk::GraphView& graph, const loom::sdk::Options& options,
                 loom::sdk::CompiledBlob* out) {
    const std::string mode = options.find("mode") == nullptr ? "" : options.find("mode");
    if (mode == "throw") throw std::runtime_error("boom");
    if (mode == "fail") return loom::sdk::invalid_argument("no such luck");
    if (mode != "empty") {
      loom::sdk::BlobWriter w("MINIBLOB", 2);
      w.u32(static_cast<uint32_t>(graph.node_count()));
      out->bytes = w.finish();
    }
    out->loader_key = mode == "wrong-key" ? "other" : "mini";
    out->format_version = mode == "wrong-version" ? 9 : 2;
    if (mode == "odd-alignment") out->alignment = 24;
    return Status();
  }
};

template <typename PluginT, uint64_t kCapabilities = 0>
struct Mini {
  using Plugin = PluginT;
  using Device = ::Device;
  using Executable = ::Executable;
  using Buffer = ::Buffer;
  using Fence = ::Fence;
  static const loom_plugin_info_t* info() {
    static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, "mini", 1, 2};
    static const loom_loader_key_t* const kKeys[] = {&kKey};
    static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "mini", "test", "1", 1, kKeys,
                                             kCapabilities};
    return &kInfo;
  }
  static Status create(const loom::sdk::CreateContext&, std::unique_ptr<Plugin>* out) {
    *out = std::make_unique<Plugin>();
    return Status();
  }
};

struct HostState {
  int live = 0;
  bool refuse = false;
};

class SdkCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = loom::sdk::make_api<Mini<CompilingPlugin>>();
    host_.struct_size = LOOM_HOST_SERVICES_STRUCT_SIZE;
    host_.user_data = &state_;
    host_.allocate = [](void* user, size_t size, size_t alignment) -> void* {
      auto* s = static_cast<HostState*>(user);
      if (s->refuse) return nullptr;
      ++s->live;
      return std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
    };
    host_.free = [](void* user, void* p) {
      --static_cast<HostState*>(user)->live;
      std::free(p);
    };
    loom_plugin_create_args_t args{};
    args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
    args.host = &host_;
    ASSERT_EQ(take(api_->plugin_create(&args)), "ok");
    plugin_ = args.out_plugin;
    loom::testing::GraphBuilder g;
    const int32_t x = g.input({2}), y = g.tensor({2}), z = g.tensor({2});
    g.node("Relu", {x}, {y}).name.clear();
    g.node("Add", {y, y}, {z}).name.clear();
    g.output(z);
    graph_ = g.finish();
  }
  void TearDown() override {
    api_->plugin_destroy(plugin_);
    EXPECT_EQ(state_.live, 0);
  }
  std::string take(loom_status_t* s) {
    if (s == nullptr) return "ok";
    std::string m = api_->status_message(s);
    api_->status_destroy(s);
    return m;
  }
  std::string supported(const std::vector<uint8_t>& graph, size_t nodes, std::vector<int>* out) {
    bool flags[8];
    std::memset(flags, 1, sizeof flags);
    loom_compile_supported_args_t a{};
    a.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE;
    a.plugin = plugin_;
    a.graph = graph.data();
    a.graph_size = graph.size();
    a.node_count = nodes;
    a.out_supported = flags;
    const std::string r = take(api_->compile_supported(&a));
    out->assign(flags, flags + nodes);
    return r;
  }
  std::string compile(const char* mode, loom_compile_args_t* a) {
    loom_option_t o{LOOM_OPTION_STRUCT_SIZE, "mode", mode};
    const loom_option_t* opts[] = {&o};
    *a = loom_compile_args_t{};
    a->struct_size = LOOM_COMPILE_ARGS_V1_0_SIZE;
    a->plugin = plugin_;
    a->graph = graph_.data();
    a->graph_size = graph_.size();
    a->option_count = 1;
    a->options = opts;
    a->out_blob = reinterpret_cast<void*>(0x1);  // must be reset
    a->out_loader_key = "stale";
    return take(api_->compile(a));
  }
  void release(loom_compile_args_t* a) {
    if (a->out_blob != nullptr) host_.free(host_.user_data, a->out_blob);
  }

  const loom_plugin_api_t* api_ = nullptr;
  loom_host_services_t host_{};
  HostState state_;
  loom_plugin_t* plugin_ = nullptr;
  std::vector<uint8_t> graph_;
};

TEST(SdkCompileEntries, DeclineNotesSayEachReasonOnceWithTheFirstNodeAndACount) {
  EXPECT_TRUE(loom::sdk::is_quantized_op("QuantizeLinear"));
  EXPECT_TRUE(loom::sdk::is_quantized_op("QLinearConv"));
  EXPECT_TRUE(loom::sdk::is_quantized_op("MatMulInteger"));
  EXPECT_FALSE(loom::sdk::is_quantized_op("Conv"));
  EXPECT_FALSE(loom::sdk::is_quantized_op("Quantize"));
  loom::sdk::DeclineNotes notes;
  EXPECT_TRUE(notes.lines().empty());
  notes.add("node a (QuantizeLinear)", "no device");
  notes.add("node b (QLinearConv)", "x_scale is per row");
  notes.add("node c (DequantizeLinear)", "no device");
  notes.add("node d (DequantizeLinear)", "no device");
  EXPECT_EQ(notes.lines(), (std::vector<std::string>{"declined: node a (QuantizeLinear) and 2 more: no device",
                                                     "declined: node b (QLinearConv): x_scale is per row"}));
}

TEST(SdkCompileEntries, SetOnlyWhenThePluginHasTheMembers) {
  const loom_plugin_api_t* run_only = loom::sdk::make_api<Mini<RunOnlyPlugin>>();
  EXPECT_EQ(run_only->compile_supported, nullptr);
  EXPECT_EQ(run_only->compile, nullptr);
  const loom_plugin_api_t* compiling = loom::sdk::make_api<Mini<CompilingPlugin>>();
  EXPECT_NE(compiling->compile_supported, nullptr);
  EXPECT_NE(compiling->compile, nullptr);
  // Both ABI versions' tables carry them.
  const loom_plugin_api_t* v1_0 = loom::sdk::make_api<Mini<CompilingPlugin>, LOOM_ABI_VERSION(1, 0)>();
  EXPECT_NE(v1_0->compile, nullptr);
}

TEST_F(SdkCompile, ClaimsComeBackAsFlags) {
  std::vector<int> flags;
  ASSERT_EQ(supported(graph_, 2, &flags), "ok");
  EXPECT_EQ(flags, (std::vector<int>{1, 0}));
}

TEST_F(SdkCompile, NodeCountMismatchAndBadGraphsAreRefusedWithFlagsCleared) {
  std::vector<int> flags;
  EXPECT_EQ(supported(graph_, 3, &flags), "compile_supported: node_count is 3, the graph has 2 nodes");
  EXPECT_EQ(flags, (std::vector<int>{0, 0, 0}));
  std::vector<uint8_t> bad = graph_;
  bad[4] = 'X';
  EXPECT_EQ(supported(bad, 2, &flags), "compile_supported: graph.fbs: missing file identifier \"LMGR\"");
}

TEST_F(SdkCompile, AClaimOutOfRangeIsAnErrorAndClaimsNothing) {
  loom::testing::GraphBuilder g;
  const int32_t x = g.input({2}), y = g.tensor({2}), z = g.tensor({2});
  g.node("Relu", {x}, {y}).name.clear();
  g.node("Bad", {y}, {z}).name.clear();
  g.output(z);
  std::vector<int> flags;
  EXPECT_EQ(supported(g.finish(), 2, &flags),
            "compile_supported: cannot claim node 101: the graph has 2 nodes");
  EXPECT_EQ(flags, (std::vector<int>{0, 0}));
}

TEST_F(SdkCompile, TheBlobComesFromTheHostAllocatorWithTheInfoKey) {
  loom_compile_args_t a;
  ASSERT_EQ(compile("", &a), "ok");
  ASSERT_NE(a.out_blob, nullptr);
  EXPECT_EQ(state_.live, 1);
  EXPECT_EQ(a.out_blob_size, loom::sdk::kBlobHeaderSize + 4);
  EXPECT_EQ(a.out_format_version, 2u);
  EXPECT_STREQ(a.out_loader_key, "mini");
  EXPECT_EQ(a.out_loader_key, Mini<CompilingPlugin>::info()->loader_keys[0]->key);
  loom::sdk::BlobHeader h;
  EXPECT_TRUE(loom::sdk::read_blob_header(a.out_blob, a.out_blob_size, "MINIBLOB", 1, 2, &h).ok());
  release(&a);
}

TEST_F(SdkCompile, PluginMistakesAreRefusedAndOutputsStayEmpty) {
  const std::vector<std::pair<const char*, std::string>> cases = {
      {"empty", "compile: the plugin produced an empty blob"},
      {"wrong-key", "compile: the plugin's blob names loader key \"other\", which its plugin_info "
                    "does not list (it lists \"mini\")"},
      {"wrong-version", "compile: the plugin's blob has format version 9, outside loader key "
                        "\"mini\"'s range 1 to 2 in its plugin_info"},
      {"odd-alignment", "compile: the plugin asked for blob alignment 24, not a power of two"},
      {"fail", "no such luck"},
      {"throw", "compile: unexpected exception: boom"},
  };
  for (const auto& [mode, message] : cases) {
    loom_compile_args_t a;
    EXPECT_EQ(compile(mode, &a), message) << mode;
    EXPECT_EQ(a.out_blob, nullptr) << mode;
    EXPECT_EQ(a.out_loader_key, nullptr) << mode;
    EXPECT_EQ(state_.live, 0) << mode;
  }
}

TEST_F(SdkCompile, AHostWithoutAllocatorOrMemoryIsAClearError) {
  loom_compile_args_t a;
  state_.refuse = true;
  EXPECT_EQ(compile("", &a), "compile: the host could not allocate 36 bytes for the blob");
  state_.refuse = false;
  host_.allocate = nullptr;
  EXPECT_EQ(compile("", &a), "compile: the host offers no allocate service for the blob");
  EXPECT_EQ(a.out_blob, nullptr);
}

TEST_F(SdkCompile, StructsAndOptionsAreChecked) {
  loom_compile_args_t a{};
  EXPECT_EQ(take(api_->compile(nullptr)), "compile: args is NULL");
  a.struct_size = LOOM_COMPILE_ARGS_V1_0_SIZE - 1;
  EXPECT_EQ(take(api_->compile(&a)),
            "compile: loom_compile_args_t.struct_size is " +
                std::to_string(LOOM_COMPILE_ARGS_V1_0_SIZE - 1) + ", the 1.0 size is " +
                std::to_string(LOOM_COMPILE_ARGS_V1_0_SIZE));
  a.struct_size = LOOM_COMPILE_ARGS_V1_0_SIZE;
  a.plugin = plugin_;
  a.option_count = 1;
  const loom_option_t* none[] = {nullptr};
  a.options = none;
  EXPECT_EQ(take(api_->compile(&a)), "compile option 0 is NULL");
  loom_compile_supported_args_t s{};
  s.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE;
  s.plugin = plugin_;
  s.node_count = 2;
  EXPECT_EQ(take(api_->compile_supported(&s)), "compile_supported: out_supported is NULL");
}

TEST(SdkClaims, BoundsAreChecked) {
  bool flags[3] = {false, false, false};
  loom::sdk::Claims c(flags, 3);
  EXPECT_TRUE(c.claim(2).ok());
  EXPECT_EQ(c.claim(3).code(), LOOM_STATUS_OUT_OF_RANGE);
  EXPECT_EQ(c.release(7).message(), "compile_supported: cannot release node 7: the graph has 3 nodes");
  EXPECT_TRUE(c.claimed(2));
  EXPECT_FALSE(c.claimed(9));
  c.claim_all();
  EXPECT_EQ(c.claimed_count(), 3u);
  EXPECT_TRUE(c.release(0).ok());
  EXPECT_EQ(c.claimed_count(), 2u);
}

// ABI 1.2: the compile entries open a graph with open dimensions (-1) only
// for a plugin whose info declares LOOM_PLUGIN_CAP_OPEN_SHAPES.
TEST_F(SdkCompile, OpenGraphsReachOnlyPluginsThatServeOpenShapes) {
  loom::testing::GraphBuilder g;
  const int32_t x = g.input({-1, 2}), y = g.tensor({-1, 2}), z = g.tensor({-1, 2});
  g.node("Relu", {x}, {y}).name.clear();
  g.node("Add", {y, y}, {z}).name.clear();
  g.output(z);
  const std::vector<uint8_t> open = g.finish();
  std::vector<int> flags;
  EXPECT_EQ(supported(open, 2, &flags),
            "compile_supported: graph.fbs: tensor 0 (t0): dimension 0 is -1; shapes are static");

  const loom_plugin_api_t* open_api =
      loom::sdk::make_api<Mini<CompilingPlugin, LOOM_PLUGIN_CAP_OPEN_SHAPES>>();
  loom_plugin_create_args_t args{};
  args.struct_size = LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE;
  args.host = &host_;
  ASSERT_EQ(take(open_api->plugin_create(&args)), "ok");
  bool out[2] = {false, false};
  loom_compile_supported_args_t a{};
  a.struct_size = LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE;
  a.plugin = args.out_plugin;
  a.graph = open.data();
  a.graph_size = open.size();
  a.node_count = 2;
  a.out_supported = out;
  EXPECT_EQ(take(open_api->compile_supported(&a)), "ok");
  EXPECT_TRUE(out[0]);
  // Constants stay static in an open graph.
  loom::testing::GraphBuilder c;
  const int32_t cx = c.input({-1}), cc = c.constant_f32({1}, {1.f}), cy = c.tensor({-1});
  c.tensors[static_cast<size_t>(cc)].shape = {-1};
  c.node("Add", {cx, cc}, {cy}).name.clear();
  c.output(cy);
  const std::vector<uint8_t> bad = c.finish();
  a.graph = bad.data();
  a.graph_size = bad.size();
  a.node_count = 1;
  EXPECT_EQ(take(open_api->compile_supported(&a)),
            "compile_supported: graph.fbs: tensor 1 (t1): dimension 0 is open (-1), but a "
            "constant's shape is static");
  open_api->plugin_destroy(args.out_plugin);
}

}  // namespace
