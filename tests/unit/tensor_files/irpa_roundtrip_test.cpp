// Round trips through ArchiveBuilder and ArchiveReader: every entry type,
// files and buffers, linked archives made by append_to_file.
#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "loom/irpa.hpp"
#include "npy_test_util.hpp"

namespace loom::io::irpa {
namespace {

using loom::io::testing::TempDir;

std::vector<std::byte> iota_bytes(size_t n, uint8_t start = 0) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(start + i);
  return out;
}

void write_raw(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

TEST(IrpaRoundTrip, DataAndSplatThroughABuffer) {
  auto weights = iota_bytes(1000);
  ArchiveBuilder builder;
  ASSERT_TRUE(builder.add_data("w", weights, R"({"dtype":"u8","shape":[1000]})").ok());
  std::array<std::byte, 4> one_f32 = {std::byte{0x00}, std::byte{0x00}, std::byte{0x80},
                                      std::byte{0x3f}};
  ASSERT_TRUE(builder.add_splat("ones", 4 * 1024, one_f32, "f32").ok());
  auto bytes = builder.write_buffer();
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();

  auto reader = ArchiveReader::open_buffer(*bytes);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  ASSERT_EQ((*reader)->headers().size(), 1u);
  ASSERT_EQ((*reader)->entries().size(), 2u);
  EXPECT_EQ((*reader)->find("missing"), nullptr);

  const Entry* w = (*reader)->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->type, EntryType::kData);
  EXPECT_EQ(w->length, 1000u);
  EXPECT_EQ(w->metadata, R"({"dtype":"u8","shape":[1000]})");
  auto view = (*reader)->view(*w);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(std::equal(view->begin(), view->end(), weights.begin(), weights.end()));
  EXPECT_EQ(view->data(), bytes->data() + w->data_offset) << "a view must not copy";

  const Entry* ones = (*reader)->find("ones");
  ASSERT_NE(ones, nullptr);
  EXPECT_EQ(ones->type, EntryType::kSplat);
  EXPECT_EQ(ones->length, 4096u);
  EXPECT_EQ(ones->pattern_length, 4);
  EXPECT_FALSE((*reader)->view(*ones).ok());
  std::vector<std::byte> out(10);
  ASSERT_TRUE((*reader)->read(*ones, 2, out).ok());  // starts mid-pattern
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], one_f32[(2 + i) % 4]) << i;
  ASSERT_TRUE((*reader)->read(*w, 990, std::span(out)).ok());
  EXPECT_EQ(out[0], std::byte{990 % 256});
  EXPECT_FALSE((*reader)->read(*w, 995, std::span(out)).ok()) << "read past the entry";
  EXPECT_FALSE((*reader)->read(*w, UINT64_MAX - 2, std::span(out)).ok()) << "offset wraps";
}

TEST(IrpaRoundTrip, WholeSplatReadExpandsThePattern) {
  ArchiveBuilder builder;
  std::array<std::byte, 16> pattern;
  for (int i = 0; i < 16; ++i) pattern[i] = static_cast<std::byte>(i * 3);
  ASSERT_TRUE(builder.add_splat("s", 16 * 37, pattern).ok());
  auto bytes = builder.write_buffer();
  ASSERT_TRUE(bytes.ok());
  auto reader = ArchiveReader::open_buffer(*bytes);
  ASSERT_TRUE(reader.ok());
  const Entry* s = (*reader)->find("s");
  std::vector<std::byte> out(s->length);
  ASSERT_TRUE((*reader)->read(*s, 0, out).ok());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], pattern[i % 16]) << i;
}

TEST(IrpaRoundTrip, WriteFileAndOpenFile) {
  TempDir dir;
  auto a = iota_bytes(64, 1), b = iota_bytes(3, 7);
  ArchiveBuilder builder;
  ASSERT_TRUE(builder.add_data("a", a).ok());
  ASSERT_TRUE(builder.add_data("b", b, "meta").ok());
  auto path = dir.path() / "w.irpa";
  ASSERT_TRUE(builder.write_file(path).ok());
  EXPECT_EQ(std::filesystem::file_size(path) % kFileAlignment, 0u);

  auto from_buffer = builder.write_buffer();
  ASSERT_TRUE(from_buffer.ok());
  auto reader = ArchiveReader::open_file(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  auto file = (*reader)->file_bytes();
  ASSERT_EQ(file.size(), from_buffer->size());
  EXPECT_TRUE(std::equal(file.begin(), file.end(), from_buffer->begin()))
      << "write_file and write_buffer make the same bytes";
  auto view = (*reader)->view(*(*reader)->find("b"));
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(std::equal(view->begin(), view->end(), b.begin(), b.end()));

  ArchiveBuilder replacement;
  ASSERT_TRUE(replacement.add_data("c", a).ok());
  ASSERT_TRUE(replacement.write_file(path).ok()) << "write_file replaces an existing file";
  auto again = ArchiveReader::open_file(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->find("a"), nullptr);
  EXPECT_NE((*again)->find("c"), nullptr);
}

TEST(IrpaRoundTrip, AppendLinksANewArchiveAndLaterEntriesWin) {
  TempDir dir;
  auto path = dir.path() / "chain.irpa";
  auto v1 = iota_bytes(100, 1), v2 = iota_bytes(50, 200), keep = iota_bytes(8, 42);
  ArchiveBuilder first;
  ASSERT_TRUE(first.add_data("w", v1).ok());
  ASSERT_TRUE(first.add_data("keep", keep).ok());
  ASSERT_TRUE(first.write_file(path).ok());
  uint64_t first_size = std::filesystem::file_size(path);

  ArchiveBuilder second;
  ASSERT_TRUE(second.add_data("w", v2).ok());
  std::array<std::byte, 1> zero{};
  ASSERT_TRUE(second.add_splat("z", 32, zero).ok());
  ASSERT_TRUE(second.append_to_file(path).ok());

  ArchiveBuilder third;
  ASSERT_TRUE(third.add_splat("keep", 8, zero).ok());
  ASSERT_TRUE(third.append_to_file(path).ok());

  auto reader = ArchiveReader::open_file(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const auto& headers = (*reader)->headers();
  ASSERT_EQ(headers.size(), 3u);
  EXPECT_EQ(headers[0].offset, 0u);
  EXPECT_EQ(headers[1].offset, first_size);
  EXPECT_EQ(headers[0].next_header_offset, first_size);
  EXPECT_EQ(headers[1].offset + headers[1].next_header_offset, headers[2].offset);
  EXPECT_EQ(headers[2].next_header_offset, 0u);

  EXPECT_EQ((*reader)->entries().size(), 3u) << "w, z and keep, each once";
  const Entry* w = (*reader)->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->header_index, 1u);
  auto view = (*reader)->view(*w);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(std::equal(view->begin(), view->end(), v2.begin(), v2.end()));
  const Entry* k = (*reader)->find("keep");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->type, EntryType::kSplat);
  EXPECT_EQ(k->header_index, 2u);
}

TEST(IrpaRoundTrip, AppendRefusesAFileThatIsNotAnArchive) {
  TempDir dir;
  auto path = dir.path() / "junk.irpa";
  write_raw(path, iota_bytes(200));
  ArchiveBuilder builder;
  ASSERT_TRUE(builder.add_splat("s", 4, std::array<std::byte, 1>{}).ok());
  Status status = builder.append_to_file(path);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("bad magic"), std::string::npos) << status.message();
  EXPECT_EQ(std::filesystem::file_size(path), 200u) << "the file is left alone";
}

TEST(IrpaRoundTrip, ExternalEntryReadsTheFileBesideTheArchive) {
  TempDir dir;
  auto payload = iota_bytes(256);
  write_raw(dir.path() / "side.bin", payload);
  std::filesystem::create_directories(dir.path() / "sub");
  write_raw(dir.path() / "sub" / "more.bin", payload);
  ArchiveBuilder builder;
  ASSERT_TRUE(builder.add_external("e", "side.bin", 16, 32, "ext").ok());
  ASSERT_TRUE(builder.add_external("f", "sub/more.bin", 0, 256).ok());
  ASSERT_TRUE(builder.add_external("g", "./side.bin", 0, 1).ok());
  auto path = dir.path() / "ext.irpa";
  ASSERT_TRUE(builder.write_file(path).ok());

  auto reader = ArchiveReader::open_file(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const Entry* e = (*reader)->find("e");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->type, EntryType::kExternal);
  EXPECT_EQ(e->external_path, "side.bin");
  EXPECT_EQ(e->external_offset, 16u);
  EXPECT_EQ(e->metadata, "ext");
  auto view = (*reader)->view(*e);
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  EXPECT_TRUE(std::equal(view->begin(), view->end(), payload.begin() + 16, payload.begin() + 48));
  auto g = (*reader)->view(*(*reader)->find("g"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->data(), view->data() - 16) << "one mapping per external file";
  std::vector<std::byte> out(4);
  ASSERT_TRUE((*reader)->read(*(*reader)->find("f"), 252, out).ok());
  EXPECT_EQ(out[3], std::byte{255});

  // From a buffer: refused without base_dir, resolved with it.
  auto file = (*reader)->file_bytes();
  std::vector<std::byte> copy(file.begin(), file.end());
  auto no_dir = ArchiveReader::open_buffer(copy);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("base_dir"), std::string::npos);
  auto with_dir = ArchiveReader::open_buffer(copy, dir.path());
  ASSERT_TRUE(with_dir.ok()) << with_dir.status().to_string();
}

TEST(IrpaRoundTrip, ArchivesPast4GiBUse64BitOffsets) {
  // 5 GiB of zeros written as a hole: the file is sparse, cheap to make.
  TempDir dir;
  auto path = dir.path() / "large.irpa";
  auto tail = iota_bytes(100, 9);
  ArchiveBuilder builder;
  ASSERT_TRUE(builder.add_zero_data("zeros", uint64_t{5} << 30).ok());
  ASSERT_TRUE(builder.add_data("tail", tail).ok());
  ASSERT_TRUE(builder.write_file(path).ok());
  ArchiveBuilder appended;
  ASSERT_TRUE(appended.add_data("after", tail).ok());
  ASSERT_TRUE(appended.append_to_file(path).ok());

  auto reader = ArchiveReader::open_file(path);
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  const Entry* t = (*reader)->find("tail");
  ASSERT_NE(t, nullptr);
  EXPECT_GT(t->data_offset, uint64_t{5} << 30);
  auto view = (*reader)->view(*t);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(std::equal(view->begin(), view->end(), tail.begin(), tail.end()));
  ASSERT_EQ((*reader)->headers().size(), 2u);
  EXPECT_GT((*reader)->headers()[1].offset, uint64_t{5} << 30);
  EXPECT_NE((*reader)->find("after"), nullptr);
  std::vector<std::byte> some(16, std::byte{1});
  ASSERT_TRUE((*reader)->read(*(*reader)->find("zeros"), (uint64_t{5} << 30) - 16, some).ok());
  EXPECT_TRUE(std::all_of(some.begin(), some.end(), [](std::byte b) { return b == std::byte{0}; }));
}

TEST(IrpaRoundTrip, BuilderRefusesBadInput) {
  ArchiveBuilder builder;
  auto bytes = iota_bytes(4);
  EXPECT_FALSE(builder.add_data("", bytes).ok());
  ASSERT_TRUE(builder.add_data("x", bytes).ok());
  EXPECT_EQ(builder.add_data("x", bytes).code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(builder.add_splat("x", 4, std::array<std::byte, 1>{}).ok());
  EXPECT_FALSE(builder.add_data("y", bytes, {}, 48).ok()) << "alignment not a power of two";
  EXPECT_FALSE(builder.add_splat("s", 12, std::array<std::byte, 3>{}).ok());
  EXPECT_FALSE(builder.add_splat("s", 12, std::array<std::byte, 8>{}).ok()) << "8 does not divide 12";
  EXPECT_FALSE(builder.add_splat("s", 16, std::span<const std::byte>()).ok());
  EXPECT_FALSE(builder.add_splat("s", 32, std::array<std::byte, 17>{}).ok());
  EXPECT_FALSE(builder.add_external("e", "/etc/passwd", 0, 1).ok());
  EXPECT_FALSE(builder.add_external("e", "a/../../b", 0, 1).ok());
  EXPECT_FALSE(builder.add_external("e", "..", 0, 1).ok());
  EXPECT_FALSE(builder.add_external("e", "f", UINT64_MAX, 2).ok());
  ArchiveBuilder bad_default(3);
  EXPECT_FALSE(bad_default.add_data("z", bytes).ok());
}

}  // namespace
}  // namespace loom::io::irpa
