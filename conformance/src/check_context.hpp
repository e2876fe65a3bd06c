// What the checks share: the plugin under test, the options, and the way a
// check reports. Private to the suite.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "host/plugin_host.hpp"
#include "loom/conformance.hpp"
#include "loom/plugin.h"
#include "loom/runtime.hpp"

namespace loom::conformance::detail {

struct Verdict {
  CheckOutcome outcome = CheckOutcome::kFail;
  std::string message;
};
inline Verdict pass(std::string note = {}) { return {CheckOutcome::kPass, std::move(note)}; }
inline Verdict fail(std::string why) { return {CheckOutcome::kFail, std::move(why)}; }
inline Verdict skip(std::string why) { return {CheckOutcome::kSkip, std::move(why)}; }

// A blob the executable checks use: one the plugin compiled, or one given.
struct TestBlob {
  std::string origin;  // "compiled from test_add", "file x.bin"
  std::string loader_key;
  uint32_t format_version = 0;
  std::vector<std::byte> bytes;
  // The tensors one execution takes and makes (from the program's delegate
  // call), when known; empty for a blob given as a file.
  struct Spec {
    loom_dtype_t dtype = LOOM_DTYPE_F32;
    std::vector<int64_t> shape;
    uint64_t byte_size = 0;
  };
  std::vector<Spec> inputs, outputs;
};

// Runs `exe` once: `inputs` (resized to the specs, zero-filled when
// empty) are handed over as host pointers when the device executes on them,
// else copied into buffers of its own; `outputs` receive the results. With
// `signal`, the execution signals it and this waits up to `wait_ns`.
// Returns the plugin's error text, "" when it ran.
std::string execute_blob(const host::LoadedPlugin& plugin, loom_device_t* device,
                         uint64_t capabilities, loom_executable_t* exe, const TestBlob& blob,
                         std::vector<std::vector<std::byte>>& inputs,
                         std::vector<std::vector<std::byte>>& outputs,
                         loom_fence_t* signal = nullptr, uint64_t wait_ns = 0);

class CheckContext {
 public:
  CheckContext(const SuiteOptions& options, host::PluginManifest manifest,
               std::function<void(std::string_view)> note_sink)
      : options_(options), manifest_(std::move(manifest)), note_sink_(std::move(note_sink)) {}

  const SuiteOptions& options() const { return options_; }
  const host::PluginManifest& manifest() const { return manifest_; }
  bool full() const { return options_.level == Level::kFull; }
  // basic or full count.
  size_t count(size_t basic, size_t full) const { return this->full() ? full : basic; }

  // Tells the parent what the check is doing, so that a crash or a hang is
  // reported with it ("during execute of mutation 37").
  void note(std::string_view what) const {
    if (note_sink_) note_sink_(what);
  }

  // Loads the plugin into this process as the host does (hash, negotiation,
  // instance, devices), with the suite's plugin options plus `extra`.
  Result<std::shared_ptr<host::LoadedPlugin>> load(
      const std::vector<std::pair<std::string, std::string>>& extra = {}) const;
  // The index of the device under test among `plugin`'s devices.
  Result<size_t> device_index(const host::LoadedPlugin& plugin) const;
  // The warnings and errors the plugin logged since the last call.
  std::vector<std::string> take_log() const;

  // The blobs for the executable checks: SuiteOptions::blobs, then blobs
  // the plugin compiles from small ONNX node tests (up to `max` in all).
  // Empty with `why` set when there are none.
  std::vector<TestBlob> blobs(size_t max, std::string* why) const;

 private:
  const SuiteOptions& options_;
  host::PluginManifest manifest_;
  std::function<void(std::string_view)> note_sink_;
  struct Log {
    std::mutex mutex;
    std::vector<std::string> lines;
  };
  std::shared_ptr<Log> log_ = std::make_shared<Log>();
};

using CheckFn = Verdict (*)(CheckContext&);
struct CheckDef {
  const char* id;
  const char* summary;
  CheckFn run;
};

// The manifest of SuiteOptions::plugin (a manifest, a library or a name
// searched as the host does); errors say what was looked for and where.
Result<host::PluginManifest> resolve_plugin(const SuiteOptions& options);

// Options for a Runtime that finds the plugin under test in its manifest's
// folder only (not $LOOM_PLUGIN_PATH, not the default folder, no probing),
// hands it `plugin_options`, and drops its log lines.
RuntimeOptions plugin_runtime_options(const host::PluginManifest& manifest,
                                      const std::vector<std::pair<std::string, std::string>>& plugin_options);
// Removes a scratch folder (make_scratch_dir) and all in it when the scope
// ends; errors are ignored (a temporary folder left behind harms nothing).
struct ScratchCleanup {
  std::filesystem::path dir;
  explicit ScratchCleanup(std::filesystem::path d) : dir(std::move(d)) {}
  ScratchCleanup(const ScratchCleanup&) = delete;
  ScratchCleanup& operator=(const ScratchCleanup&) = delete;
  ~ScratchCleanup() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

// Sets `inputs` (by name) on `session`, runs it once and returns its
// outputs by name, or the first error.
Result<std::vector<NamedTensor>> run_session_once(Session& session, const std::vector<NamedTensor>& inputs);

// The checks of each family, in run order.
std::span<const CheckDef> abi_checks();
std::span<const CheckDef> device_checks();    // devices, memory, fences
std::span<const CheckDef> executable_checks();  // executables, execution
std::span<const CheckDef> stress_checks();    // threads, lifecycle
// execution.open_shapes (checks_open_shapes.cpp), listed with the
// executable checks.
Verdict open_shape_bindings(CheckContext& ctx);

// A status object turned into text and destroyed: "" for NULL (OK),
// otherwise "CODE: message" (an empty message is flagged).
std::string take(const loom_plugin_api_t& api, loom_status_t* status);
std::string_view code_name(loom_status_code_t code);

// Plugin-side objects freed when the scope ends.
struct BufferGuard {
  const loom_plugin_api_t* api = nullptr;
  loom_buffer_t* buffer = nullptr;
  BufferGuard(const loom_plugin_api_t* a, loom_buffer_t* m) : api(a), buffer(m) {}
  BufferGuard(BufferGuard&& other) noexcept : api(other.api), buffer(other.buffer) {
    other.buffer = nullptr;
  }
  BufferGuard(const BufferGuard&) = delete;
  BufferGuard& operator=(const BufferGuard&) = delete;
  ~BufferGuard() {
    if (buffer != nullptr) api->buffer_free(buffer);
  }
};
struct FenceGuard {
  const loom_plugin_api_t* api = nullptr;
  loom_fence_t* fence = nullptr;
  FenceGuard(const loom_plugin_api_t* a, loom_fence_t* m) : api(a), fence(m) {}
  FenceGuard(FenceGuard&& other) noexcept : api(other.api), fence(other.fence) {
    other.fence = nullptr;
  }
  FenceGuard(const FenceGuard&) = delete;
  FenceGuard& operator=(const FenceGuard&) = delete;
  ~FenceGuard() {
    if (fence != nullptr) api->fence_destroy(fence);
  }
};
struct ExecutableGuard {
  const loom_plugin_api_t* api = nullptr;
  loom_executable_t* executable = nullptr;
  ExecutableGuard(const loom_plugin_api_t* a, loom_executable_t* m) : api(a), executable(m) {}
  ExecutableGuard(ExecutableGuard&& other) noexcept : api(other.api), executable(other.executable) {
    other.executable = nullptr;
  }
  ExecutableGuard(const ExecutableGuard&) = delete;
  ExecutableGuard& operator=(const ExecutableGuard&) = delete;
  ~ExecutableGuard() {
    if (executable != nullptr) api->executable_destroy(executable);
  }
};

// The plugin loaded as the host loads it, and the device under test.
struct DeviceUnderTest {
  std::shared_ptr<host::LoadedPlugin> plugin;
  const loom_plugin_api_t* api = nullptr;
  loom_device_t* device = nullptr;
  loom_device_info_t info{};
  uint64_t capabilities = 0;  // info.capabilities
  std::string error;          // why there is none: the check fails with it
};
DeviceUnderTest open_device(CheckContext& ctx);

// The device's info through the plugin's entry (struct of the current size).
Result<loom_device_info_t> device_info(const host::LoadedPlugin& plugin, size_t index);

// Loads `blob` on device `index`; the error text names the plugin's status.
std::string load_blob(const host::LoadedPlugin& plugin, loom_device_t* device,
                      const TestBlob& blob, std::span<const std::byte> bytes,
                      loom_executable_t** out);
// executable_check on the same; "" when the plugin accepts it.
std::string check_blob(const host::LoadedPlugin& plugin, loom_device_t* device,
                       const TestBlob& blob, std::span<const std::byte> bytes);

}  // namespace loom::conformance::detail
