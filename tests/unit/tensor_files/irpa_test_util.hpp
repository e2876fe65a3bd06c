// Helpers for the .irpa tests: a small known archive to corrupt, field
// patching, and checks that opening fails with a message naming the problem.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "loom/irpa.hpp"
#include "tensor_files/irpa_format.hpp"

namespace loom::io::irpa::testing {

// Offsets in small_archive(), as laid out in irpa_layout_test.cpp.
inline constexpr uint64_t kEntry0 = 96;    // data "a", 8 bytes, metadata "x"
inline constexpr uint64_t kEntry1 = 176;   // splat "b", 16 bytes of AA BB
inline constexpr uint64_t kMetadata = 261;  // "axb"
inline constexpr uint64_t kStorage = 320;

inline std::vector<std::byte> small_archive() {
  ArchiveBuilder builder;
  std::array<std::byte, 8> data{};
  for (int i = 0; i < 8; ++i) data[i] = static_cast<std::byte>(i + 1);
  EXPECT_TRUE(builder.add_data("a", data, "x").ok());
  std::array<std::byte, 2> pattern = {std::byte{0xaa}, std::byte{0xbb}};
  EXPECT_TRUE(builder.add_splat("b", 16, pattern).ok());
  auto bytes = builder.write_buffer();
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : std::vector<std::byte>();
}

template <typename T>
void put(std::vector<std::byte>& bytes, uint64_t at, T value) {
  format::store<T>(bytes, at, value);
}

template <typename T>
T get(std::span<const std::byte> bytes, uint64_t at) {
  return format::load<T>(bytes, at);
}

// Opening must fail, and the message must contain every one of `parts`.
inline void expect_open_error(std::span<const std::byte> bytes,
                              std::initializer_list<std::string_view> parts,
                              const std::filesystem::path& base_dir = {}) {
  // An exact-size copy, so a read past the end is caught by ASan.
  std::vector<std::byte> copy(bytes.begin(), bytes.end());
  auto reader = ArchiveReader::open_buffer(copy, base_dir);
  ASSERT_FALSE(reader.ok()) << "opened, but expected an error containing '" << *parts.begin()
                            << "'";
  for (std::string_view part : parts) {
    EXPECT_NE(reader.status().message().find(part), std::string::npos)
        << "message: " << reader.status().message() << "\nexpected to contain: " << part;
  }
}

// Replaces the only occurrence of `from` by `to` (same length) in `bytes`.
inline void replace_text(std::vector<std::byte>& bytes, std::string_view from, std::string_view to) {
  ASSERT_EQ(from.size(), to.size());
  std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  size_t at = all.find(from);
  ASSERT_NE(at, std::string_view::npos);
  ASSERT_EQ(all.find(from, at + 1), std::string_view::npos);
  for (size_t i = 0; i < to.size(); ++i) bytes[at + i] = static_cast<std::byte>(to[i]);
}

}  // namespace loom::io::irpa::testing
