// Descriptions of plugins and devices as the runtime reports them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/status.hpp"
#include "loom/tensor.hpp"

namespace loom {

enum class DeviceKind : uint8_t { kCpu = 0, kGpu = 1, kAccelerator = 2, kVirtual = 3 };

std::string_view device_kind_name(DeviceKind kind);

// One device as enumerated by its plugin.
struct DeviceInfo {
  std::string uri;     // "cpu-simd://0"
  std::string name;
  std::string plugin;  // the plugin's name
  DeviceKind kind = DeviceKind::kCpu;
  uint64_t device_memory_bytes = 0;
  uint64_t host_visible_memory_bytes = 0;
  uint64_t capabilities = 0;  // LOOM_DEVICE_CAP_* bits
  uint64_t dtype_mask = 0;    // LOOM_DTYPE_BIT bits
};

// Names of the capability bits set in `capabilities`, e.g. {"async"}.
std::vector<std::string> capability_names(uint64_t capabilities);

enum class PluginState : uint8_t {
  kFound = 0,     // manifest accepted, library not loaded yet
  kLoaded = 1,    // library loaded, ABI negotiated, instance created
  kRejected = 2,  // see PluginRecord::reason
};

std::string_view plugin_state_name(PluginState state);

// One plugin the host found, whatever became of it.
struct PluginRecord {
  std::filesystem::path manifest_path;
  std::string name;  // from the manifest, or the file name if unreadable
  std::string version;
  std::vector<std::string> loader_keys;
  PluginState state = PluginState::kFound;
  std::string reason;  // why it was rejected, or why it has no devices
  uint32_t abi_version = 0;  // negotiated, when loaded
  bool isolated = false;     // loaded, in a process of its own
  std::vector<DeviceInfo> devices;  // when loaded
  // The conformance stamp beside the manifest, in one line: when valid,
  // "basic, suite 1.0, 2026-11-25, 41 passed"; otherwise why not ("not
  // stamped ...", "stamp does not match the library (rebuilt since?): ...").
  // Empty when the manifest could not be read.
  std::string conformance;
  bool conformance_valid = false;  // the stamp vouches for this library
};

// One folder searched for plugin manifests (Runtime::plugin_folders()).
struct PluginFolder {
  std::filesystem::path path;
  // Why it was searched: "option" (RuntimeOptions::plugin_paths),
  // "LOOM_PLUGIN_PATH", "program" (<program dir>/../lib/loom/plugins),
  // "library" (<dir of libloom.so>/loom/plugins) or "user"
  // ($XDG_DATA_HOME/loom/plugins, else ~/.local/share/loom/plugins).
  std::string origin;
  bool exists = false;  // a folder when the search ran
};

}  // namespace loom

namespace loom {

// A device URI split at its "://": "cpu-simd://0" is plugin "cpu-simd",
// device "0". Views into the text it was parsed from.
struct DeviceUri {
  std::string_view plugin;
  std::string_view device;
};

// Splits `text`; an error when it has no "://" or either side is empty.
Result<DeviceUri> parse_device_uri(std::string_view text);

// How an alternative of a DeviceSelector orders the devices it matches.
enum class PlacementPolicy : uint8_t {
  kNone = 0,               // the order the plugins and their devices are found in
  kFastest = 1,            // the plugins' estimates (see DeviceSelector)
  kPreferAccelerator = 2,  // accelerators, then GPUs, then CPUs, then virtual devices
};

std::string_view placement_policy_name(PlacementPolicy policy);

// The rank of `device` under `policy`, higher first: 0 under kNone; else by
// kind, accelerator 3, GPU 2, CPU 1, virtual 0. (policy:fastest puts the
// plugins' estimates before this; see DeviceSelector.)
double policy_rank(PlacementPolicy policy, const DeviceInfo& device);

// One condition of a selector alternative.
struct SelectorTerm {
  enum class Type : uint8_t {
    kAny,         // "any": every device
    kUri,         // "cpu-simd://0": that device
    kPlugin,      // "cpu-simd": the plugin's devices
    kKind,        // "kind:gpu"
    kDType,       // "dtype:f16": the device computes in that type
    kCapability,  // "cap:async": the device has that capability
    kPolicy,      // "policy:fastest": orders the alternative's devices
  };
  Type type = Type::kAny;
  std::string text;   // as written, e.g. "kind:gpu"
  std::string value;  // kUri, kPlugin: the URI or plugin name
  DeviceKind kind = DeviceKind::kCpu;
  DType dtype = DType::kInvalid;
  uint64_t capability = 0;  // one LOOM_DEVICE_CAP_* bit
  PlacementPolicy policy = PlacementPolicy::kNone;
};

// Terms joined by '&': a device matches when it meets every term.
struct SelectorAlternative {
  std::string text;
  std::vector<SelectorTerm> terms;
  PlacementPolicy policy = PlacementPolicy::kNone;

  bool matches(const DeviceInfo& device) const;
  // Why `device` does not match (the first term it fails), or "" if it does.
  std::string mismatch(const DeviceInfo& device) const;
};

// Which devices a program may use, in order of preference. Written as
// alternatives separated by ',' and tried in order; each is one or more terms
// joined by '&':
//
//   cpu-simd://0                         exactly that device
//   vulkan-compute                       the plugin's devices, first usable one
//   kind:gpu,kind:accelerator,kind:cpu   a GPU, else an accelerator, else a CPU
//   vulkan-compute,fpga-stub,cpu-simd    a preference list of plugins
//   policy:fastest                       every device, by the plugins' estimates
//   policy:prefer-accelerator            accelerators, GPUs, CPUs, virtual
//   kind:gpu&dtype:f16                   a GPU that computes in f16
//   cap:async                            a device with that capability
//   any                                  every device, in the order found
//
// The empty selector is the default: each delegate takes the first of its
// variants, in the program's order, that a device can load. Kinds are cpu,
// gpu, accelerator, virtual; dtypes as in dtype_name (f32, f16, i8, ...);
// capabilities as in capability_names (async, host-visible-memory, ...).
// policy:fastest asks each plugin to estimate one execution of the variant
// on the device (ABI 1.1 executable_estimate) and tries the fastest first;
// candidates without an estimate follow, ranked by kind as under
// policy:prefer-accelerator.
class DeviceSelector {
 public:
  DeviceSelector() = default;
  // Errors name the term, the position and what was expected, with a
  // suggestion for a near miss ("kind:gpuu": did you mean 'kind:gpu'?).
  static Result<DeviceSelector> parse(std::string_view text);

  bool is_default() const { return alternatives_.empty(); }
  const std::string& text() const { return text_; }
  const std::vector<SelectorAlternative>& alternatives() const { return alternatives_; }
  // The plugins named by URI or plugin terms when every alternative names
  // one: only those need loading. Empty when any alternative may match a
  // device of any plugin.
  std::vector<std::string> named_plugins() const;
  // The devices of `devices` that the selector matches, best first, each
  // once: (index in `devices`, index of the first alternative matching it).
  // Alternatives in order; within one, by policy_rank under its policy,
  // else in the order given.
  std::vector<std::pair<size_t, size_t>> order(const std::vector<DeviceInfo>& devices) const;

 private:
  std::string text_;
  std::vector<SelectorAlternative> alternatives_;
};

}  // namespace loom
