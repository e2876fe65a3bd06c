// The plugin ABI's struct sizes: every *_STRUCT_SIZE constant ends at the
// struct's last field, struct_size comes first, C and C++ agree on every
// size, and on LP64 targets the sizes are pinned so that an edit which moves
// a field shows up as a failing test instead of a silent ABI break.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/plugin.h"

extern "C" size_t loom_abi_test_c_sizes(size_t (*out)[2], size_t capacity);
extern "C" loom_plugin_query_fn_t loom_abi_test_c_query(void);

namespace {

#define LOOM_ABI_STRUCT(type, last, constant)                                        \
  static_assert((constant) == offsetof(type, last) + sizeof(((type*)nullptr)->last), \
                #constant " must end at " #type "." #last);                          \
  static_assert(offsetof(type, struct_size) == 0, #type " must start with struct_size"); \
  static_assert(sizeof(type) - (constant) < alignof(type),                           \
                #type "." #last " must be its last field");
#include "abi_struct_list.h"
#undef LOOM_ABI_STRUCT

struct StructFacts {
  std::string name;
  size_t constant;
  size_t computed;  // offsetof(last) + sizeof(last), at run time
  size_t size;      // sizeof
  size_t align;
};

std::vector<StructFacts> cpp_facts() {
  std::vector<StructFacts> out;
#define LOOM_ABI_STRUCT(type, last, constant)                                            \
  {                                                                                      \
    type probe{};                                                                        \
    out.push_back({#type, (constant),                                                    \
                   static_cast<size_t>(reinterpret_cast<const char*>(&probe.last) -      \
                                       reinterpret_cast<const char*>(&probe)) +          \
                       sizeof(probe.last),                                               \
                   sizeof(type), alignof(type)});                                        \
  }
#include "abi_struct_list.h"
#undef LOOM_ABI_STRUCT
  return out;
}

TEST(AbiStructSizes, ConstantsEndAtTheLastField) {
  for (const StructFacts& f : cpp_facts()) {
    EXPECT_EQ(f.constant, f.computed) << f.name;
    EXPECT_GE(f.size, f.constant) << f.name;
    EXPECT_LT(f.size - f.constant, f.align) << f.name << ": a field follows the sized one";
  }
}

TEST(AbiStructSizes, CAndCppAgree) {
  std::vector<StructFacts> cpp = cpp_facts();
  std::vector<size_t> flat(cpp.size() * 2 + 2);
  auto* c = reinterpret_cast<size_t(*)[2]>(flat.data());
  size_t n = loom_abi_test_c_sizes(c, cpp.size() + 1);
  ASSERT_EQ(n, cpp.size());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(c[i][0], cpp[i].constant) << cpp[i].name;
    EXPECT_EQ(c[i][1], cpp[i].size) << cpp[i].name;
  }
}

TEST(AbiStructSizes, PinnedOnLp64) {
  if (sizeof(void*) != 8 || sizeof(size_t) != 8) GTEST_SKIP() << "sizes pinned for LP64 only";
  EXPECT_EQ(LOOM_TENSOR_STRUCT_SIZE, 56u);
  EXPECT_EQ(LOOM_OPTION_STRUCT_SIZE, 24u);
  EXPECT_EQ(LOOM_TRACE_EVENT_STRUCT_SIZE, 40u);
  EXPECT_EQ(LOOM_HOST_SERVICES_STRUCT_SIZE, 48u);
  EXPECT_EQ(LOOM_LOADER_KEY_STRUCT_SIZE, 24u);
  EXPECT_EQ(LOOM_PLUGIN_INFO_STRUCT_SIZE, 56u);
  EXPECT_EQ(LOOM_PLUGIN_INFO_V1_0_SIZE, 48u);
  EXPECT_EQ(LOOM_DEVICE_INFO_STRUCT_SIZE, 64u);
  EXPECT_EQ(LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE, 40u);
  EXPECT_EQ(LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE, 48u);
  EXPECT_EQ(LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE, 72u);
  EXPECT_EQ(LOOM_EXECUTE_ARGS_STRUCT_SIZE, 72u);
  EXPECT_EQ(LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE, 48u);
  EXPECT_EQ(LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE, 40u);
  EXPECT_EQ(LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE, 40u);
  EXPECT_EQ(LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE, 48u);
  EXPECT_EQ(LOOM_COMPILE_ARGS_STRUCT_SIZE, 76u);
  EXPECT_EQ(LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE, 56u);
  // 8 (struct_size) + 4 (abi_version) + 4 (padding) + 28 entries; 1.1 adds one.
  EXPECT_EQ(LOOM_PLUGIN_API_V1_0_SIZE, 16u + 28u * sizeof(void*));
  EXPECT_EQ(LOOM_PLUGIN_API_V1_1_SIZE, 16u + 29u * sizeof(void*));
  EXPECT_EQ(LOOM_PLUGIN_QUERY_STRUCT_SIZE, 56u);
}

TEST(AbiStructSizes, CurrentApiSizeIsTheOneOneSize) {
  // 1.2 grew loom_plugin_info_t, not the table.
  EXPECT_EQ(LOOM_PLUGIN_API_STRUCT_SIZE, LOOM_PLUGIN_API_V1_2_SIZE);
  EXPECT_EQ(LOOM_PLUGIN_API_V1_2_SIZE, LOOM_PLUGIN_API_V1_1_SIZE);
  // The 1.0 size never changes: 1.1 only appended an entry.
  EXPECT_EQ(LOOM_PLUGIN_API_V1_0_SIZE, offsetof(loom_plugin_api_t, executable_estimate));
}

// The per-version constants (plugin.h's rule): each equals the offsetof-based
// end of its version's last field, checked at compile time and again at run
// time on a real object.
#define LOOM_ABI_VERSION_SIZE(type, last, constant)                                  \
  static_assert((constant) == offsetof(type, last) + sizeof(((type*)nullptr)->last), \
                #constant " must end at " #type "." #last);
#include "abi_version_list.h"
#undef LOOM_ABI_VERSION_SIZE

TEST(AbiVersionedSizes, EachEndsAtItsVersionsLastField) {
  size_t checked = 0;
#define LOOM_ABI_VERSION_SIZE(type, last, constant)                                          \
  {                                                                                          \
    type probe{};                                                                            \
    const size_t end = static_cast<size_t>(reinterpret_cast<const char*>(&probe.last) -      \
                                           reinterpret_cast<const char*>(&probe)) +          \
                       sizeof(probe.last);                                                   \
    EXPECT_EQ(static_cast<size_t>(constant), end) << #constant;                              \
    EXPECT_EQ(static_cast<size_t>(constant), offsetof(type, last) + sizeof(probe.last))      \
        << #constant;                                                                        \
    ++checked;                                                                               \
  }
#include "abi_version_list.h"
#undef LOOM_ABI_VERSION_SIZE
  EXPECT_EQ(checked, 22u);
}

TEST(AbiVersionedSizes, CurrentConstantsNameTheNewestVersion) {
  // Only the function table (1.1) and loom_plugin_info_t (1.2) have grown
  // since 1.0, so every other "current" constant is its struct's 1.0 size
  // (1.1 for the struct 1.1 introduced).
  EXPECT_EQ(LOOM_TENSOR_STRUCT_SIZE, LOOM_TENSOR_V1_0_SIZE);
  EXPECT_EQ(LOOM_OPTION_STRUCT_SIZE, LOOM_OPTION_V1_0_SIZE);
  EXPECT_EQ(LOOM_TRACE_EVENT_STRUCT_SIZE, LOOM_TRACE_EVENT_V1_0_SIZE);
  EXPECT_EQ(LOOM_HOST_SERVICES_STRUCT_SIZE, LOOM_HOST_SERVICES_V1_0_SIZE);
  EXPECT_EQ(LOOM_LOADER_KEY_STRUCT_SIZE, LOOM_LOADER_KEY_V1_0_SIZE);
  EXPECT_EQ(LOOM_PLUGIN_INFO_STRUCT_SIZE, LOOM_PLUGIN_INFO_V1_2_SIZE);
  EXPECT_EQ(LOOM_DEVICE_INFO_STRUCT_SIZE, LOOM_DEVICE_INFO_V1_0_SIZE);
  EXPECT_EQ(LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE, LOOM_PLUGIN_CREATE_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE, LOOM_EXECUTABLE_CHECK_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE, LOOM_EXECUTABLE_LOAD_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_EXECUTE_ARGS_STRUCT_SIZE, LOOM_EXECUTE_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE, LOOM_BUFFER_ALLOCATE_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_BUFFER_IMPORT_ARGS_STRUCT_SIZE, LOOM_BUFFER_IMPORT_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE, LOOM_BUFFER_COPY_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE, LOOM_COMPILE_SUPPORTED_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_COMPILE_ARGS_STRUCT_SIZE, LOOM_COMPILE_ARGS_V1_0_SIZE);
  EXPECT_EQ(LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE, LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE);
  EXPECT_EQ(LOOM_PLUGIN_API_STRUCT_SIZE, LOOM_PLUGIN_API_V1_2_SIZE);
  EXPECT_EQ(LOOM_PLUGIN_QUERY_STRUCT_SIZE, LOOM_PLUGIN_QUERY_V1_0_SIZE);
  // The 1.0 sizes are pinned on LP64 like the current ones: they never move.
  if (sizeof(void*) == 8 && sizeof(size_t) == 8) {
    EXPECT_EQ(LOOM_TENSOR_V1_0_SIZE, 56u);
    EXPECT_EQ(LOOM_EXECUTE_ARGS_V1_0_SIZE, 72u);
    EXPECT_EQ(LOOM_COMPILE_ARGS_V1_0_SIZE, 76u);
    EXPECT_EQ(LOOM_EXECUTABLE_ESTIMATE_ARGS_V1_1_SIZE, 56u);
    EXPECT_EQ(LOOM_PLUGIN_QUERY_V1_0_SIZE, 56u);
  }
}

TEST(AbiStructHas, ReadsOnlyFieldsThatFit) {
  EXPECT_TRUE(LOOM_STRUCT_HAS(loom_device_info_t, LOOM_DEVICE_INFO_STRUCT_SIZE, dtype_mask));
  EXPECT_FALSE(LOOM_STRUCT_HAS(loom_device_info_t, LOOM_DEVICE_INFO_STRUCT_SIZE - 1, dtype_mask));
  EXPECT_TRUE(LOOM_STRUCT_HAS(loom_device_info_t, offsetof(loom_device_info_t, name), uri));
  EXPECT_FALSE(LOOM_STRUCT_HAS(loom_device_info_t, sizeof(size_t), uri));
}

TEST(AbiVersionMacros, PackAndUnpack) {
  constexpr uint32_t v = LOOM_ABI_VERSION(3, 17);
  static_assert(LOOM_ABI_VERSION_MAJOR_OF(v) == 3 && LOOM_ABI_VERSION_MINOR_OF(v) == 17);
  EXPECT_LT(LOOM_ABI_VERSION(1, 65535), LOOM_ABI_VERSION(2, 0));
  EXPECT_LT(LOOM_ABI_VERSION(1, 0), LOOM_ABI_VERSION(1, 1));
  EXPECT_EQ(LOOM_ABI_CURRENT, LOOM_ABI_VERSION(LOOM_ABI_MAJOR, LOOM_ABI_MINOR));
  EXPECT_EQ(LOOM_ABI_CURRENT, LOOM_ABI_VERSION(1, 2));
}

TEST(AbiStatusCodes, MatchTheDocumentedNumbers) {
  EXPECT_EQ(LOOM_STATUS_OK, 0);
  EXPECT_EQ(LOOM_STATUS_INVALID_ARGUMENT, 1);
  EXPECT_EQ(LOOM_STATUS_INCOMPATIBLE, 4);
  EXPECT_EQ(LOOM_STATUS_INTERNAL, 9);
  EXPECT_EQ(LOOM_STATUS_ALREADY_EXISTS, 14);
}

TEST(AbiCTranslationUnit, EntryPointTypeIsUsableFromC) {
  loom_plugin_query_fn_t query = loom_abi_test_c_query();
  ASSERT_NE(query, nullptr);
  EXPECT_EQ(query(nullptr), LOOM_STATUS_INVALID_ARGUMENT);
  loom_plugin_query_t q{};
  q.struct_size = LOOM_PLUGIN_QUERY_STRUCT_SIZE;
  EXPECT_EQ(query(&q), LOOM_STATUS_INCOMPATIBLE);
}

}  // namespace
