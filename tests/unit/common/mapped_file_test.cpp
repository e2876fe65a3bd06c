// MappedFile: the read-only whole-file mapping shared by the program reader
// and the parameter archive reader.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "common/mapped_file.hpp"

namespace loom {
namespace {

namespace fs = std::filesystem;

class MappedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("loom_mapped_file_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
            "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path write(const std::string& name, const std::string& content) {
    fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path;
  }
  fs::path dir_;
};

TEST_F(MappedFileTest, MapsTheWholeFile) {
  auto file = MappedFile::open(write("a.bin", "hello, mapping"));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->size(), 14u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(file->bytes().data()), file->size()),
            "hello, mapping");
  EXPECT_GE(file->descriptor(), 0);
  file->close_descriptor();
  EXPECT_EQ(file->descriptor(), -1);
  EXPECT_EQ(static_cast<char>(file->bytes()[0]), 'h') << "the mapping outlives the descriptor";
}

TEST_F(MappedFileTest, EmptyFileMapsToNoBytes) {
  auto file = MappedFile::open(write("empty.bin", ""));
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  EXPECT_EQ(file->size(), 0u);
  EXPECT_TRUE(file->bytes().empty());
}

TEST_F(MappedFileTest, MoveTransfersTheMapping) {
  auto file = MappedFile::open(write("m.bin", "xyz"));
  ASSERT_TRUE(file.ok());
  MappedFile moved = std::move(*file);
  EXPECT_TRUE(file->bytes().empty());
  EXPECT_EQ(file->descriptor(), -1);
  ASSERT_EQ(moved.size(), 3u);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(static_cast<char>(assigned.bytes()[2]), 'z');
}

TEST_F(MappedFileTest, ErrorsNameThePath) {
  auto missing = MappedFile::open(dir_ / "absent.bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("absent.bin"), std::string::npos);

  auto folder = MappedFile::open(dir_);
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(folder.status().message().find("not a regular file"), std::string::npos);

  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  auto fifo = MappedFile::open(dir_ / "fifo");  // must not wait for a writer
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.status().message().find("not a regular file"), std::string::npos);
}

}  // namespace
}  // namespace loom
