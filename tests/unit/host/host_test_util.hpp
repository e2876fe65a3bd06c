// Helpers shared by the host tests: temporary folders, copies of the built
// fake plugins, and a log sink that records what plugins wrote.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "host/plugin_host.hpp"

namespace loom::host::testing {

namespace fs = std::filesystem;

// Folder holding the built fake plugin `variant` and its manifest.
inline fs::path variant_dir(const std::string& variant) {
  return fs::path(LOOM_TEST_PLUGIN_DIR) / variant;
}

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fresh folder, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("loom-host-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

  // Copies the manifest and library of `variant` into sub-folder `sub` (or
  // the root) and returns the copied manifest's path.
  fs::path copy_variant(const std::string& variant, const std::string& sub = "") const {
    fs::path dest = sub.empty() ? path_ : path_ / sub;
    fs::create_directories(dest);
    for (const auto& file : fs::directory_iterator(variant_dir(variant))) {
      fs::copy_file(file.path(), dest / file.path().filename(),
                    fs::copy_options::overwrite_existing);
    }
    return dest / (variant + ".loom-plugin.json");
  }

 private:
  fs::path path_;
};

// Log lines of plugins, recorded.
struct LogCapture {
  std::mutex mutex;
  std::vector<std::string> lines;

  LogSink sink() {
    return [this](loom_log_level_t, std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(line);
    };
  }
  bool contains(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& line : lines) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }
};

// Options that search only `folders`: never the environment or the build
// tree's plugin folder.
inline HostOptions isolated_options(std::vector<fs::path> folders) {
  HostOptions options;
  options.search_paths = std::move(folders);
  options.use_environment = false;
  options.use_default_folder = false;
  options.use_user_folder = false;
  return options;
}

inline std::unique_ptr<PluginHost> make_host(HostOptions options) {
  auto host = PluginHost::create(std::move(options));
  EXPECT_TRUE(host.ok()) << host.status().to_string();
  return host.ok() ? std::move(*host) : nullptr;
}

inline const PluginRecord* find_record(const std::vector<PluginRecord>& records,
                                       const std::string& name) {
  for (const auto& r : records) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

// The bytes of `text` (a view, no copy).
inline std::span<const std::byte> bytes_of(std::string_view text) {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

}  // namespace loom::host::testing
