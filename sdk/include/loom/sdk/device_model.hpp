// Device models for executable_estimate (ABI 1.1): the small roofline a
// plugin turns a blob's work into time with, and where it keeps the numbers
// it measured on a device so that the micro-benchmark runs once per device,
// not once per process.
//
// Part of the header-only C++17 plugin SDK; not included by plugin.hpp (it
// needs <filesystem>): a plugin that estimates includes it itself.
//
// The cache is one text file per device in the user's cache folder:
//
//   loom-device-model 1
//   identity <one line: what the numbers were measured on>
//   <name> <value>            one per line, each a finite number > 0
//
// The plugin names the file (device_model_path) from what identifies the
// device, and writes every fact that must match into the identity line
// (device, driver, plugin version): a file whose identity differs, or that is
// not exactly this shape, is ignored and measured again, never trusted and
// never a crash. Writes go to a temporary file renamed into place, so
// concurrent writers leave one whole file.
#ifndef LOOM_SDK_DEVICE_MODEL_HPP_
#define LOOM_SDK_DEVICE_MODEL_HPP_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <system_error>
#include <thread>

#include <unistd.h>

namespace loom::sdk {

// Measured values by name ("matmul_flops_t1", "overhead_ns", ...).
using DeviceModelValues = std::map<std::string, double>;

// The environment variable that puts the device-model cache elsewhere (an
// absolute folder; tests point it at a scratch folder).
inline constexpr const char* kDeviceModelDirEnv = "LOOM_DEVICE_MODEL_DIR";

// The folder that holds device models: $LOOM_DEVICE_MODEL_DIR when set and
// absolute, else $XDG_CACHE_HOME/loom/device-models (XDG: a relative value
// is ignored), else $HOME/.cache/loom/device-models; "" when none applies (the
// model is then measured once per process and kept in memory only).
inline std::string device_model_folder() {
  if (const char* dir = std::getenv(kDeviceModelDirEnv); dir != nullptr && dir[0] == '/') {
    return dir;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/loom/device-models";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return std::string(home) + "/.cache/loom/device-models";
  }
  return std::string();
}

// `text` with every character that is not a letter, digit, '.', '-' or '_'
// turned into '_' (for file names).
inline std::string device_model_slug(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '-' || c == '_';
    out += keep ? c : '_';
  }
  return out;
}

// The file of one device: "<folder>/<plugin>-<16 hex digits of FNV-1a over
// `device_key`>.txt"; "" when `folder` is empty. `device_key` names the
// device (not the driver or plugin version, which go in the identity line,
// so that an update replaces the file instead of adding one).
inline std::string device_model_path(const std::string& folder, const std::string& plugin,
                                     const std::string& device_key) {
  if (folder.empty()) return std::string();
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : device_key) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return folder + "/" + device_model_slug(plugin) + "-" + hex + ".txt";
}

namespace detail {
inline std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}
}  // namespace detail

// Reads the model of `identity` from `path` into `out`. True only when the
// file exists, is at most 64 KiB, has the header, an identity line equal to
// `identity`, and every other line is "<name> <value>", the name of letters,
// digits, '.', '-' and '_', the value finite and > 0; false otherwise (missing, corrupt, measured on something else), and
// then `out` is left empty.
inline bool read_device_model(const std::string& path, const std::string& identity,
                              DeviceModelValues* out) {
  out->clear();
  if (path.empty()) return false;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > 64 * 1024) return false;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != "loom-device-model 1") return false;
  if (!std::getline(in, line) || line != "identity " + detail::one_line(identity)) return false;
  DeviceModelValues values;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0) return false;
    const std::string name = line.substr(0, space);
    if (device_model_slug(name) != name) return false;  // names are [A-Za-z0-9._-]
    const std::string number = line.substr(space + 1);
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (number.empty() || end == nullptr || *end != '\0' || !std::isfinite(v) || v <= 0) {
      return false;
    }
    values[name] = v;
  }
  *out = std::move(values);
  return true;
}

// Writes `values` for `identity` to `path`, creating its folder: a temporary
// file beside it, renamed into place. False on any failure (the caller keeps
// using the values it measured; the next process measures again).
inline bool write_device_model(const std::string& path, const std::string& identity,
                               const DeviceModelValues& values) {
  if (path.empty()) return false;
  std::error_code ec;
  const std::filesystem::path target(path);
  std::filesystem::create_directories(target.parent_path(), ec);
  if (ec) return false;
  // Unique per writer: the process id and the thread.
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%zx", static_cast<long>(::getpid()),
                std::hash<std::thread::id>()(std::this_thread::get_id()));
  const std::string tmp = path + suffix;
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << "loom-device-model 1\n" << "identity " << detail::one_line(identity) << "\n";
    char number[64];
    for (const auto& [name, value] : values) {
      std::snprintf(number, sizeof number, "%.9g", value);
      out << detail::one_line(name) << " " << number << "\n";
    }
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      return false;
    }
  }
  std::filesystem::rename(tmp, target, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return false;
  }
  return true;
}

// The roofline of one step: the longer of its arithmetic at `flops_per_s`
// and its memory traffic at `bytes_per_s`, in nanoseconds (a rate <= 0
// counts as no limit from that side).
inline double roofline_ns(double flops, double flops_per_s, double bytes, double bytes_per_s) {
  const double compute = flops_per_s > 0 ? flops / flops_per_s : 0;
  const double memory = bytes_per_s > 0 ? bytes / bytes_per_s : 0;
  return 1e9 * (compute > memory ? compute : memory);
}

// How long one calibration micro-benchmark runs: at least min_runs times,
// then until budget_ns has been spent or max_runs runs were made.
struct TimingBudget {
  int min_runs = 3;
  int max_runs = 30;
  double budget_ns = 10e6;
};

// Runs `run` (a callable returning a status with ok(), e.g. one execution
// of a warmed-up executable) as `budget` says and writes its fastest run in
// nanoseconds, at least 1: what the device does when nothing else holds it
// up (on a busy machine a run may wait a scheduler slice for a thread, which
// says nothing about the device and would differ on the next run). The first
// failed run ends it with that status.
template <typename Run>
auto time_fastest_run(const TimingBudget& budget, Run&& run, double* out_ns) -> decltype(run()) {
  using Clock = std::chrono::steady_clock;
  double fastest = 0, total = 0;
  for (int runs = 0; runs < budget.max_runs && (runs < budget.min_runs || total < budget.budget_ns);
       ++runs) {
    const auto start = Clock::now();
    auto status = run();
    if (!status.ok()) return status;
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    fastest = runs == 0 ? ns : std::min(fastest, ns);
    total += ns;
  }
  *out_ns = std::max(1.0, fastest);
  return decltype(run()){};
}

}  // namespace loom::sdk

#endif  // LOOM_SDK_DEVICE_MODEL_HPP_
