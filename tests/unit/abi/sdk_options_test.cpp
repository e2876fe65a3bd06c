// loom::sdk::Options, the option reader every plugin uses: get_uint accepts
// exactly the whole numbers from 0 to max and names the key and value of
// anything else.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/plugin.hpp"

namespace {

struct OptionList {
  std::vector<loom_option_t> items;
  std::vector<const loom_option_t*> ptrs;
  OptionList(std::initializer_list<std::pair<const char*, const char*>> kv) {
    for (const auto& [k, v] : kv) {
      loom_option_t o{};
      o.struct_size = LOOM_OPTION_STRUCT_SIZE;
      o.key = k;
      o.value = v;
      items.push_back(o);
    }
    for (const auto& o : items) ptrs.push_back(&o);
  }
  loom::sdk::Options options() const { return {ptrs.data(), ptrs.size()}; }
};

TEST(SdkOptions, GetUintReadsWholeNumbersUpToMax) {
  uint64_t out = 99;
  ASSERT_TRUE(OptionList({}).options().get_uint("n", 7, 10, &out).ok());
  EXPECT_EQ(out, 7u);
  ASSERT_TRUE(OptionList({{"n", "0"}}).options().get_uint("n", 7, 10, &out).ok());
  EXPECT_EQ(out, 0u);
  ASSERT_TRUE(OptionList({{"n", "10"}}).options().get_uint("n", 7, 10, &out).ok());
  EXPECT_EQ(out, 10u);
  ASSERT_TRUE(OptionList({{"n", "3"}, {"n", "1"}}).options().get_uint("n", 7, 10, &out).ok());
  EXPECT_EQ(out, 1u) << "the last entry wins";
  ASSERT_TRUE(OptionList({{"n", "18446744073709551615"}})
                  .options().get_uint("n", 0, UINT64_MAX, &out).ok());
  EXPECT_EQ(out, UINT64_MAX);
}

TEST(SdkOptions, GetUintRejectsWhatIsNotInRange) {
  // "5" with max 1 is a single digit above the maximum: it used to pass
  // because the overflow check only looked at the running value.
  for (const auto& [value, max] : std::vector<std::pair<const char*, uint64_t>>{
           {"5", 1}, {"2", 1}, {"11", 10}, {"100", 99}, {"-1", 10}, {"1x", 10}, {" 1", 10},
           {"", 10}, {"18446744073709551616", UINT64_MAX}}) {
    uint64_t out = 42;
    const loom::sdk::Status st = OptionList({{"cpu.n", value}}).options().get_uint("cpu.n", 0, max, &out);
    EXPECT_FALSE(st.ok()) << "value \"" << value << "\" max " << max;
    EXPECT_EQ(st.code(), LOOM_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(st.message().find("cpu.n"), std::string::npos) << st.message();
    EXPECT_EQ(out, 42u) << "out is left alone on error";
  }
}

}  // namespace
