// The in-memory form of a capture file (schemas/capture.fbs): what the
// recorder fills and what the reader returns after validating a file. Ids
// in it are checked against the tables they index when a file is read, so
// code handed a Capture may index without checking again.
//
// Private to the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loom/status.hpp"

namespace loom::host::capture {

// The schema version this code writes and the newest it reads.
inline constexpr uint32_t kCaptureSchemaVersion = 1;
// The largest capture file the reader opens (a bound on memory, not on the
// format: a capture is bytes of tensors and blobs, read whole).
inline constexpr uint64_t kMaxCaptureFileBytes = uint64_t{4} << 30;

// What a call was; the values are capture.fbs's CallKind.
enum class CallKind : uint16_t {
  kNegotiate = 0,
  kPluginCreate = 1,
  kCheckAvailable = 2,
  kDeviceInfo = 3,
  kExecutableCheck = 4,
  kExecutableLoad = 5,
  kExecutableDestroy = 6,
  kExecute = 7,
  kBufferAllocate = 8,
  kBufferImport = 9,
  kBufferFree = 10,
  kCopyFromHost = 11,
  kCopyToHost = 12,
  kFenceCreate = 13,
  kFenceDestroy = 14,
  kFenceSignal = 15,
  kFenceWait = 16,
  kFenceQuery = 17,
  kCompileSupported = 18,
  kCompile = 19,
  kEstimate = 20,
  kPluginDestroy = 21,
  kBufferMap = 22,
  kBufferUnmap = 23,
};
inline constexpr uint16_t kLastCallKind = 23;

// The ABI entry's name of a call kind ("execute", "executable_load").
std::string_view call_kind_name(CallKind kind);

struct TensorRecord {
  uint32_t dtype = 0;  // loom_dtype_t
  std::vector<int64_t> shape;
  uint64_t byte_size = 0;
  int64_t payload = -1;  // -1: bytes not recorded
  bool in_buffer = false;
  int64_t buffer_id = -1;
  uint64_t offset = 0;
};

struct PluginEntry {
  std::string name, version, vendor;
  uint32_t abi_version = 0;
  std::string library_hash;
  std::vector<std::string> loader_keys;
  bool isolated = false;
};

struct DeviceEntry {
  uint32_t plugin = 0;
  std::string uri, name;
  uint32_t kind = 0;
  uint64_t device_memory_bytes = 0;
  uint64_t capabilities = 0;
  uint64_t dtype_mask = 0;
};

struct CallRecord {
  CallKind kind = CallKind::kNegotiate;
  uint32_t plugin = 0;
  uint32_t thread = 0;
  uint64_t start_ns = 0;
  uint64_t duration_ns = 0;
  uint32_t status_code = 0;
  std::string message;
  int64_t device = -1;
  int64_t object = -1;
  std::string loader_key;
  uint32_t format_version = 0;
  int64_t payload = -1;
  std::vector<std::pair<std::string, std::string>> options;
  std::vector<TensorRecord> inputs, outputs;
  std::vector<int64_t> wait_fences;
  int64_t signal_fence = -1;
  uint64_t size = 0;
  uint64_t offset = 0;
  uint64_t timeout_ns = 0;
  bool flag = false;
  uint64_t value = 0;
  int64_t result_payload = -1;
  uint32_t abi_min = 0, abi_max = 0;  // negotiate: the range offered
};

struct Payload {
  std::string hash;  // "xxh3-128:..."
  std::vector<std::byte> bytes;
};

struct Capture {
  uint32_t schema_version = kCaptureSchemaVersion;
  std::string loom_version;
  uint64_t created_unix_s = 0;
  std::string host;
  std::vector<PluginEntry> plugins;
  std::vector<DeviceEntry> devices;
  std::vector<Payload> payloads;
  std::vector<CallRecord> calls;
};

// "xxh3-128:<hex>" of bytes, the payload hash.
std::string payload_hash(std::span<const std::byte> bytes);

// The capture as capture.fbs bytes.
std::vector<uint8_t> encode_capture(const Capture& capture);
// Parses and validates capture bytes (identifier, flatbuffers Verifier,
// schema version, every index in range, tensor sizes against their shapes
// and payloads, payload hashes). Errors start with `where`.
Result<Capture> decode_capture(std::span<const std::byte> bytes, std::string_view where);
// Reads and decodes a capture file (a regular file of at most
// kMaxCaptureFileBytes).
Result<Capture> read_capture_file(const std::filesystem::path& path);
// Writes the capture to `path` (through a temporary file renamed over it).
Status write_capture_file(const Capture& capture, const std::filesystem::path& path);

}  // namespace loom::host::capture
