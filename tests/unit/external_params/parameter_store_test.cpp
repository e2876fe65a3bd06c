// ParameterStore on programs that hold only parameters: where archives are
// looked up, that each is opened once, what is copied and what is viewed,
// and that copies are bounded.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/hash.hpp"
#include "loom/irpa.hpp"
#include "loom/program.hpp"
#include "runtime/parameter_store.hpp"

namespace loom::runtime {
namespace {

namespace irpa = io::irpa;
using Overrides = std::vector<std::pair<std::string, std::filesystem::path>>;

std::vector<std::byte> floats(std::initializer_list<float> values) {
  std::vector<std::byte> out(values.size() * sizeof(float));
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

ParameterDef external(std::string name, std::string scope, std::string archive,
                      std::span<const std::byte> bytes) {
  ParameterDef p;
  p.name = std::move(name);
  p.scope = std::move(scope);
  p.archive = std::move(archive);
  p.dtype = DType::kF32;
  p.shape = {static_cast<int64_t>(bytes.size() / sizeof(float))};
  p.size = bytes.size();
  p.checksum = xxh3_64(bytes);
  return p;
}

class ParameterStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("loom_param_store_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `program` (parameters only) and opens it.
  std::unique_ptr<ProgramReader> program(std::vector<ParameterDef> parameters,
                                         std::span<const std::byte> inline_bytes = {}) {
    ProgramWriter writer;
    if (!inline_bytes.empty()) writer.add_segment(inline_bytes, 64);
    writer.program().parameters = std::move(parameters);
    EXPECT_TRUE(writer.write_file(dir_ / "p.loom").ok());
    auto reader = ProgramReader::open_file(dir_ / "p.loom");
    EXPECT_TRUE(reader.ok()) << reader.status().to_string();
    return reader.ok() ? std::move(*reader) : nullptr;
  }

  std::filesystem::path dir_;
  const std::vector<std::byte> a_ = floats({1, 2, 3, 4});
  const std::vector<std::byte> b_ = floats({-1, -2});
};

TEST_F(ParameterStoreTest, InlineAndExternalParametersResolveToTheirBytes) {
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "w.irpa").ok());
  ParameterDef in;
  in.name = "inline";
  in.dtype = DType::kF32;
  in.shape = {2};
  in.segment = 0;
  in.size = b_.size();
  auto reader = program({external("a", "s", "w.irpa", a_), in}, b_);
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  ASSERT_EQ(store->size(), 2u);
  EXPECT_TRUE(std::ranges::equal(store->bytes(0), a_));
  EXPECT_TRUE(std::ranges::equal(store->bytes(1), b_));
  // The inline one is a view into the program file, not a copy.
  EXPECT_EQ(store->bytes(1).data(), reader->parameter_bytes(1).value().data());
  EXPECT_EQ(store->archive_paths(), std::vector<std::filesystem::path>{dir_ / "w.irpa"});
}

TEST_F(ParameterStoreTest, EachArchiveIsOpenedOncePerProgram) {
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  ASSERT_TRUE(archive.add_data("b", b_).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "w.irpa").ok());
  ASSERT_TRUE(archive.write_file(dir_ / "v.irpa").ok());
  auto reader = program({external("a", "one", "w.irpa", a_), external("b", "one", "./w.irpa", b_),
                         external("a", "two", "v.irpa", a_)});
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(store->archive_paths().size(), 2u);
  // Both scopes sent to one file: one archive.
  Overrides overrides = {{"one", dir_ / "v.irpa"}, {"two", dir_ / "." / "v.irpa"}};
  store = ParameterStore::open(*reader, dir_, overrides);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_EQ(store->archive_paths(), std::vector<std::filesystem::path>{dir_ / "v.irpa"});
  EXPECT_TRUE(std::ranges::equal(store->bytes(1), b_));
}

TEST_F(ParameterStoreTest, DataEntriesAreZeroCopyAndSplatsAreOwnedAndAligned) {
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  const float seven = 7.0f;
  ASSERT_TRUE(archive.add_splat("s", 4096, std::as_bytes(std::span(&seven, 1))).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "w.irpa").ok());
  std::vector<float> sevens(1024, 7.0f);
  auto reader = program({external("a", "", "w.irpa", a_),
                         external("s", "", "w.irpa", std::as_bytes(std::span(sevens)))});
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  auto opened = irpa::ArchiveReader::open_file(dir_ / "w.irpa").value();
  // The data entry lies at its offset in some mapping of the file; the splat
  // is a 64-byte-aligned buffer of the expanded pattern.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(store->bytes(0).data()) % 64,
            opened->find("a")->data_offset % 64);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(store->bytes(1).data()) % 64, 0u);
  EXPECT_TRUE(std::ranges::equal(store->bytes(1), std::as_bytes(std::span(sevens))));
}

TEST_F(ParameterStoreTest, ZeroByteParameterResolves) {
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("empty", {}).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "w.irpa").ok());
  ParameterDef p = external("empty", "", "w.irpa", {});
  p.shape = {0, 3};
  auto reader = program({p});
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE(store->bytes(0).empty());
}

TEST_F(ParameterStoreTest, HugeSplatIsRefusedBeforeAnythingIsAllocated) {
  constexpr uint64_t kHuge = uint64_t{1} << 52;  // 4 PiB from a 4 KiB file
  irpa::ArchiveBuilder archive;
  const std::byte zero{0};
  ASSERT_TRUE(archive.add_splat("big", kHuge, std::span(&zero, 1)).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "w.irpa").ok());
  ParameterDef p;
  p.name = "big";
  p.scope = "s";
  p.archive = "w.irpa";
  p.dtype = DType::kU8;
  p.shape = {static_cast<int64_t>(kHuge)};
  p.size = kHuge;
  auto reader = program({p});
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(store.status().message().find("parameter 'big' (scope 's') in archive"),
            std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("splat entry of 4503599627370496 bytes"),
            std::string::npos) << store.status().message();
}

TEST_F(ParameterStoreTest, EmptyOverridePathIsAnError) {
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "w.irpa").ok());
  auto reader = program({external("a", "s", "w.irpa", a_)});
  Overrides overrides = {{"s", ""}};
  auto store = ParameterStore::open(*reader, dir_, overrides);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(), "parameter archives: scope 's' is given an empty path");
}

TEST_F(ParameterStoreTest, EmptyScopeCanBeOverridden) {
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "elsewhere.irpa").ok());
  auto reader = program({external("a", "", "w.irpa", a_)});
  Overrides overrides = {{"", dir_ / "elsewhere.irpa"}};
  auto store = ParameterStore::open(*reader, dir_, overrides);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE(std::ranges::equal(store->bytes(0), a_));
}


// The program's folder is dir_/prog; dir_/outside holds what a hostile
// program would like to read through a symlink.
TEST_F(ParameterStoreTest, ArchiveSymlinkOutOfTheProgramFolderIsRefusedUnread) {
  namespace fs = std::filesystem;
  fs::create_directories(dir_ / "outside");
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "outside" / "w.irpa").ok());
  {
    std::ofstream secret(dir_ / "outside" / "secret.txt");
    secret << "SECRETBYTES";
  }
  auto reader = program({external("a", "s", "link.irpa", a_)});
  for (const char* target : {"w.irpa", "secret.txt"}) {
    fs::create_directories(dir_ / "prog");
    fs::create_symlink(dir_ / "outside" / target, dir_ / "prog" / "link.irpa");
    auto store = ParameterStore::open(*reader, dir_ / "prog", {});
    fs::remove(dir_ / "prog" / "link.irpa");
    ASSERT_FALSE(store.ok()) << target;
    EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
    const std::string m = store.status().message();
    EXPECT_NE(m.find("parameter 'a' (scope 's'): archive 'link.irpa' resolves to "),
              std::string::npos) << m;
    EXPECT_NE(m.find(", outside the program's folder "), std::string::npos) << m;
    EXPECT_NE(m.find("--params s=FILE.irpa"), std::string::npos) << m;
    EXPECT_EQ(m.find("SECR"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  // The same file named by the host is taken.
  Overrides overrides = {{"s", dir_ / "outside" / "w.irpa"}};
  auto store = ParameterStore::open(*reader, dir_ / "prog", overrides);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE(std::ranges::equal(store->bytes(0), a_));
}

TEST_F(ParameterStoreTest, ArchiveSymlinkInsideTheProgramFolderIsFollowed) {
  namespace fs = std::filesystem;
  fs::create_directories(dir_ / "shared");
  irpa::ArchiveBuilder archive;
  ASSERT_TRUE(archive.add_data("a", a_).ok());
  ASSERT_TRUE(archive.write_file(dir_ / "shared" / "w.irpa").ok());
  fs::create_symlink(fs::path("shared") / "w.irpa", dir_ / "link.irpa");
  auto reader = program({external("a", "s", "link.irpa", a_)});
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_TRUE(std::ranges::equal(store->bytes(0), a_));
}

TEST_F(ParameterStoreTest, ArchiveThatIsAFifoOrAFolderIsRefusedBeforeOpening) {
  namespace fs = std::filesystem;
  ASSERT_EQ(::mkfifo((dir_ / "fifo.irpa").c_str(), 0600), 0);
  fs::create_directories(dir_ / "folder.irpa");
  auto reader = program({external("a", "s", "fifo.irpa", a_), external("b", "t", "folder.irpa", b_)});
  auto store = ParameterStore::open(*reader, dir_, {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "parameter 'a' (scope 's'): " + (dir_ / "fifo.irpa").string() +
                " is a FIFO, not a regular file");
  Overrides overrides = {{"s", dir_ / "fifo.irpa"}, {"t", dir_ / "folder.irpa"}};
  store = ParameterStore::open(*reader, dir_, overrides);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "parameter 'a' (scope 's'): " + (dir_ / "fifo.irpa").string() +
                " is a FIFO, not a regular file");
  overrides = {{"s", dir_ / "folder.irpa"}};
  store = ParameterStore::open(*reader, dir_, overrides);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("folder.irpa is a directory, not a regular file"),
            std::string::npos) << store.status().message();
}

}  // namespace
}  // namespace loom::runtime
