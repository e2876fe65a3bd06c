// EXTERNAL entries may only reach files inside the archive's folder: no
// absolute paths, no '..', no symlink leading out (checked on canonical
// paths). Paths are patched into a valid archive, since the builder itself
// refuses bad ones.
#include <sys/stat.h>

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "loom/irpa.hpp"
#include "irpa_test_util.hpp"
#include "npy_test_util.hpp"

namespace loom::io::irpa {
namespace {

using loom::io::testing::TempDir;
using namespace loom::io::irpa::testing;
namespace fs = std::filesystem;

void write_text(const fs::path& path, std::string_view text) {
  std::ofstream(path, std::ios::binary) << text;
}

class IrpaExternal : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_ = dir_.path() / "archive";
    fs::create_directories(folder_);
    write_text(folder_ / "inside.bin", "0123456789abcdef");
    write_text(dir_.path() / "outside.bin", "secret secret secret");
  }

  // An archive with one external entry whose stored path is `path`.
  std::vector<std::byte> archive_with_path(const std::string& path, uint64_t offset = 0,
                                           uint64_t length = 4) {
    std::string placeholder(path.size(), 'P');
    ArchiveBuilder builder;
    EXPECT_TRUE(builder.add_external("e", placeholder, offset, length).ok());
    auto bytes = builder.write_buffer();
    EXPECT_TRUE(bytes.ok());
    replace_text(*bytes, placeholder, path);
    return *bytes;
  }

  // Writes the archive into the folder and opens it as a file.
  Result<std::unique_ptr<ArchiveReader>> open_in_folder(const std::vector<std::byte>& bytes) {
    fs::path path = folder_ / "x.irpa";
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.close();
    return ArchiveReader::open_file(path);
  }

  void expect_refused(const std::string& path, std::string_view why) {
    auto bytes = archive_with_path(path);
    auto reader = open_in_folder(bytes);
    ASSERT_FALSE(reader.ok()) << path << " was accepted";
    EXPECT_NE(reader.status().message().find("entry 0 ('e')"), std::string::npos)
        << reader.status().message();
    EXPECT_NE(reader.status().message().find(why), std::string::npos) << reader.status().message();
    expect_open_error(bytes, {why}, folder_);
  }

  TempDir dir_;
  fs::path folder_;
};

TEST_F(IrpaExternal, RelativePathInsideTheFolderIsRead) {
  auto reader = open_in_folder(archive_with_path("inside.bin", 10, 6));
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
  auto view = (*reader)->view(*(*reader)->find("e"));
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(loom::io::testing::to_string(*view), "abcdef");
}

TEST_F(IrpaExternal, SymlinkStayingInsideIsAllowed) {
  fs::create_symlink("inside.bin", folder_ / "alias.bin");
  auto reader = open_in_folder(archive_with_path("alias.bin"));
  ASSERT_TRUE(reader.ok()) << reader.status().to_string();
}

TEST_F(IrpaExternal, AbsolutePathIsRefused) {
  expect_refused((dir_.path() / "outside.bin").string(), "is absolute");
}

TEST_F(IrpaExternal, DotDotIsRefused) {
  expect_refused("../outside.bin", "'..' component");
  expect_refused("sub/../../outside.bin", "'..' component");
  expect_refused("..", "'..' component");
}

TEST_F(IrpaExternal, SymlinkToAFileOutsideIsRefused) {
  fs::create_symlink("../outside.bin", folder_ / "escape.bin");
  expect_refused("escape.bin", "outside the archive's folder");
}

TEST_F(IrpaExternal, SymlinkedFolderLeadingOutIsRefused) {
  fs::create_symlink(dir_.path(), folder_ / "up");
  expect_refused("up/outside.bin", "outside the archive's folder");
}

TEST_F(IrpaExternal, PathNamingTheFolderItselfIsRefused) {
  expect_refused("./.", "outside the archive's folder");
}

TEST_F(IrpaExternal, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(::mkfifo((folder_ / "pipe").c_str(), 0600), 0);
  expect_refused("pipe", "not a regular file");
}

TEST_F(IrpaExternal, MissingFileIsNotFound) {
  auto reader = open_in_folder(archive_with_path("absent.bin"));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
  EXPECT_NE(reader.status().message().find("absent.bin"), std::string::npos);
}

TEST_F(IrpaExternal, RangePastTheExternalFileIsRefused) {
  auto reader = open_in_folder(archive_with_path("inside.bin", 10, 7));
  ASSERT_FALSE(reader.ok());
  EXPECT_NE(reader.status().message().find("external range [10, 17) runs past the end of "
                                           "'inside.bin' (size 16)"),
            std::string::npos)
      << reader.status().message();
}

TEST_F(IrpaExternal, RangeWrappingIsRefused) {
  auto bytes = archive_with_path("inside.bin", 1, 1);
  put<uint64_t>(bytes, kEntry0 + format::kExternalRangeAt, UINT64_MAX);
  expect_open_error(bytes, {"entry 0 ('e'): external range", "wraps past 2^64"}, folder_);
}

}  // namespace
}  // namespace loom::io::irpa
