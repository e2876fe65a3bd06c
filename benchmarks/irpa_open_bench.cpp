// Start-up cost of an IREE parameter archive: open_file + find + view of one
// small parameter + touching its bytes, for archives of 1 MiB, 256 MiB and
// 4 GiB. The time must not grow with the file's size: opening maps the file
// and reads only its headers, and a view is a pointer into the mapping.
//
// The archives are written at start-up into a temporary folder with the
// writer API: one large all-zero data entry (add_zero_data, which write_file
// leaves as a hole, so the files are sparse) followed by the 256-byte
// parameter "small", which thus lies at the far end of the file. They are
// removed at exit.
//
// BM_PreadReference is the floor to compare with: open + pread of the same
// 256 bytes + close, no parsing.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "loom/irpa.hpp"

namespace {

namespace fs = std::filesystem;
using loom::io::irpa::ArchiveBuilder;
using loom::io::irpa::ArchiveReader;

constexpr uint64_t kSmallLength = 256;

struct Archive {
  std::string label;
  fs::path path;
  uint64_t small_offset = 0;  // absolute, for the pread reference
};

// Writes an archive of `size` bytes whose data region is a hole.
bool make_archive(const fs::path& path, uint64_t size, uint64_t* small_offset) {
  std::vector<std::byte> small(kSmallLength);
  for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<std::byte>(i);
  ArchiveBuilder builder;
  loom::Status status = builder.add_zero_data("big", size - 4096 - 512);
  if (status.ok()) status = builder.add_data("small", small, R"({"dtype":"u8","shape":[256]})");
  if (status.ok()) status = builder.write_file(path);
  if (!status.ok()) {
    std::fprintf(stderr, "cannot write %s: %s\n", path.c_str(), status.to_string().c_str());
    return false;
  }
  auto reader = ArchiveReader::open_file(path);
  if (!reader.ok()) return false;
  *small_offset = (*reader)->find("small")->data_offset;
  return true;
}

void BM_OpenFindView(benchmark::State& state, const Archive* archive) {
  uint64_t sum = 0;
  for (auto _ : state) {
    auto reader = ArchiveReader::open_file(archive->path);
    if (!reader.ok()) {
      state.SkipWithError(reader.status().to_string().c_str());
      return;
    }
    const auto* entry = (*reader)->find("small");
    auto view = (*reader)->view(*entry);
    if (!view.ok()) {
      state.SkipWithError(view.status().to_string().c_str());
      return;
    }
    for (std::byte b : *view) sum += static_cast<uint8_t>(b);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["file_MiB"] = static_cast<double>(fs::file_size(archive->path)) / (1 << 20);
  struct stat st {};
  if (::stat(archive->path.c_str(), &st) == 0) {
    state.counters["on_disk_KiB"] = static_cast<double>(st.st_blocks) * 512 / 1024;
  }

}

void BM_PreadReference(benchmark::State& state, const Archive* archive) {
  std::vector<std::byte> buffer(kSmallLength);
  uint64_t sum = 0;
  for (auto _ : state) {
    int fd = ::open(archive->path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(archive->small_offset)) !=
                      static_cast<ssize_t>(buffer.size())) {
      if (fd >= 0) ::close(fd);
      state.SkipWithError("pread failed");
      return;
    }
    ::close(fd);
    for (std::byte b : buffer) sum += static_cast<uint8_t>(b);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations());
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  fs::path dir = fs::temp_directory_path() / ("loom_irpa_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<Archive> archives = {{"1MiB", dir / "1MiB.irpa"},
                                   {"256MiB", dir / "256MiB.irpa"},
                                   {"4GiB", dir / "4GiB.irpa"}};
  const uint64_t sizes[] = {uint64_t{1} << 20, uint64_t{256} << 20, uint64_t{4} << 30};
  int status = 0;
  for (size_t i = 0; i < archives.size(); ++i) {
    if (!make_archive(archives[i].path, sizes[i], &archives[i].small_offset)) {
      status = 1;
      break;
    }
  }
  if (status == 0) {
    for (const Archive& a : archives) {
      benchmark::RegisterBenchmark(("BM_OpenFindView/" + a.label).c_str(), BM_OpenFindView, &a);
    }
    for (const Archive& a : archives) {
      benchmark::RegisterBenchmark(("BM_PreadReference/" + a.label).c_str(), BM_PreadReference, &a);
    }
    benchmark::RunSpecifiedBenchmarks();
  }
  benchmark::Shutdown();
  std::error_code ec;
  fs::remove_all(dir, ec);
  return status;
}
