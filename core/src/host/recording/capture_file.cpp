// Reading and writing capture files (schemas/capture.fbs). The reader trusts
// nothing: the flatbuffers Verifier first, then every index against the
// table it points into and every tensor's size against its shape and dtype.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "common/hash.hpp"
#include "host/recording/capture_model.hpp"
#include "loom/fb/capture_generated.h"

namespace loom::host::capture {

namespace fb = ::loom::capfb;

namespace {

// The elements of an int64 vector. The flatbuffers Verifier (2.0) checks a
// vector's 4-byte alignment, not its elements': in a crafted file the int64s
// may sit at an address that is not a multiple of 8, so they are copied as
// bytes, not loaded as int64 (UBSan caught it in the capture fuzzer).
void copy_int64s(const flatbuffers::Vector<int64_t>& v, std::vector<int64_t>* out) {
  out->resize(v.size());
  if (v.size() != 0) std::memcpy(out->data(), v.Data(), v.size() * sizeof(int64_t));
}

constexpr size_t kCaptureMaxTables = 50'000'000;
constexpr size_t kCaptureMaxDepth = 16;

// Bytes per element of a loom_dtype_t, 0 for an unknown one (13 kinds).
uint64_t capture_dtype_bytes(uint32_t dtype) {
  switch (dtype) {
    case 1: case 7: case 11: return 4;      // f32 i32 u32
    case 2: case 3: case 6: case 10: return 2;  // f16 bf16 i16 u16
    case 4: case 8: case 12: return 8;      // f64 i64 u64
    case 5: case 9: case 13: return 1;      // i8 u8 bool
    default: return 0;
  }
}

flatbuffers::Offset<fb::Tensor> encode_tensor(flatbuffers::FlatBufferBuilder& b,
                                              const TensorRecord& t) {
  auto shape = b.CreateVector(t.shape);
  fb::TensorBuilder tb(b);
  tb.add_dtype(t.dtype);
  tb.add_shape(shape);
  tb.add_byte_size(t.byte_size);
  tb.add_payload(t.payload);
  tb.add_in_buffer(t.in_buffer);
  tb.add_buffer_id(t.buffer_id);
  tb.add_offset(t.offset);
  return tb.Finish();
}

std::string capture_str(const flatbuffers::String* s) {
  return s != nullptr ? std::string(s->data(), s->size()) : std::string();
}

}  // namespace

std::string_view call_kind_name(CallKind kind) {
  static constexpr std::string_view kNames[] = {
      "negotiate",        "plugin_create",      "plugin_check_available", "device_info",
      "executable_check", "executable_load",    "executable_destroy",     "execute",
      "buffer_allocate",  "buffer_import_host", "buffer_free",            "buffer_copy_from_host",
      "buffer_copy_to_host", "fence_create",    "fence_destroy",          "fence_signal",
      "fence_wait",       "fence_query",        "compile_supported",      "compile",
      "executable_estimate", "plugin_destroy",  "buffer_map",             "buffer_unmap"};
  const auto i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : std::string_view("unknown");
}

std::string payload_hash(std::span<const std::byte> bytes) {
  return "xxh3-128:" + xxh3_128_hex(bytes);
}

std::vector<uint8_t> encode_capture(const Capture& c) {
  flatbuffers::FlatBufferBuilder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::Plugin>> plugins;
  for (const PluginEntry& p : c.plugins) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> keys;
    for (const auto& k : p.loader_keys) keys.push_back(b.CreateString(k));
    plugins.push_back(fb::CreatePlugin(b, b.CreateString(p.name), b.CreateString(p.version),
                                       b.CreateString(p.vendor), p.abi_version,
                                       b.CreateString(p.library_hash), b.CreateVector(keys),
                                       p.isolated));
  }
  std::vector<flatbuffers::Offset<fb::Device>> devices;
  for (const DeviceEntry& d : c.devices) {
    devices.push_back(fb::CreateDevice(b, d.plugin, b.CreateString(d.uri), b.CreateString(d.name),
                                       d.kind, d.device_memory_bytes, d.capabilities,
                                       d.dtype_mask));
  }
  std::vector<flatbuffers::Offset<fb::Payload>> payloads;
  for (const Payload& p : c.payloads) {
    auto bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(p.bytes.data()), p.bytes.size());
    payloads.push_back(fb::CreatePayload(b, b.CreateString(p.hash), bytes));
  }
  std::vector<flatbuffers::Offset<fb::Call>> calls;
  calls.reserve(c.calls.size());
  for (const CallRecord& r : c.calls) {
    auto message = r.message.empty() ? 0 : b.CreateString(r.message);
    auto key = r.loader_key.empty() ? 0 : b.CreateString(r.loader_key);
    flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::KeyValue>>> options = 0;
    if (!r.options.empty()) {
      std::vector<flatbuffers::Offset<fb::KeyValue>> kvs;
      for (const auto& [k, v] : r.options) {
        kvs.push_back(fb::CreateKeyValue(b, b.CreateString(k), b.CreateString(v)));
      }
      options = b.CreateVector(kvs);
    }
    auto tensors = [&](const std::vector<TensorRecord>& list)
        -> flatbuffers::Offset<flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>> {
      if (list.empty()) return 0;
      std::vector<flatbuffers::Offset<fb::Tensor>> out;
      for (const TensorRecord& t : list) out.push_back(encode_tensor(b, t));
      return b.CreateVector(out);
    };
    auto inputs = tensors(r.inputs);
    auto outputs = tensors(r.outputs);
    auto waits = r.wait_fences.empty() ? 0 : b.CreateVector(r.wait_fences);
    fb::CallBuilder cb(b);
    cb.add_kind(static_cast<fb::CallKind>(r.kind));
    cb.add_plugin(r.plugin);
    cb.add_thread(r.thread);
    cb.add_start_ns(r.start_ns);
    cb.add_duration_ns(r.duration_ns);
    cb.add_status_code(r.status_code);
    if (!message.IsNull()) cb.add_message(message);
    cb.add_device(r.device);
    cb.add_object(r.object);
    if (!key.IsNull()) cb.add_loader_key(key);
    cb.add_format_version(r.format_version);
    cb.add_payload(r.payload);
    if (!options.IsNull()) cb.add_options(options);
    if (!inputs.IsNull()) cb.add_inputs(inputs);
    if (!outputs.IsNull()) cb.add_outputs(outputs);
    if (!waits.IsNull()) cb.add_wait_fences(waits);
    cb.add_signal_fence(r.signal_fence);
    cb.add_size(r.size);
    cb.add_offset(r.offset);
    cb.add_timeout_ns(r.timeout_ns);
    cb.add_flag(r.flag);
    cb.add_value(r.value);
    cb.add_result_payload(r.result_payload);
    cb.add_abi_min(r.abi_min);
    cb.add_abi_max(r.abi_max);
    calls.push_back(cb.Finish());
  }
  auto root = fb::CreateCapture(b, c.schema_version, b.CreateString(c.loom_version),
                                c.created_unix_s, b.CreateString(c.host), b.CreateVector(plugins),
                                b.CreateVector(devices), b.CreateVector(payloads),
                                b.CreateVector(calls));
  b.Finish(root, fb::CaptureIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

namespace {

// Validates a tensor record against the capture's tables.
Status decode_tensor(const fb::Tensor* t, const Capture& c, const std::string& where,
                     TensorRecord* out) {
  if (t == nullptr) return data_loss(where + ": missing tensor");
  out->dtype = t->dtype();
  const uint64_t elem = capture_dtype_bytes(out->dtype);
  if (elem == 0) return data_loss(where + ": unknown dtype " + std::to_string(out->dtype));
  if (t->shape() != nullptr) {
    if (t->shape()->size() > 8) {
      return data_loss(where + ": rank " + std::to_string(t->shape()->size()) + " exceeds 8");
    }
    copy_int64s(*t->shape(), &out->shape);
  }
  uint64_t count = 1;
  for (int64_t d : out->shape) {
    if (d < 0) return data_loss(where + ": negative dimension " + std::to_string(d));
    if (d != 0 && count > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) {
      return data_loss(where + ": element count overflows");
    }
    count *= static_cast<uint64_t>(d);
  }
  out->byte_size = t->byte_size();
  if (count > (uint64_t{1} << 60) || count * elem != out->byte_size) {
    return data_loss(where + ": byte_size " + std::to_string(out->byte_size) +
                     " does not match its shape (" + std::to_string(count) + " elements of " +
                     std::to_string(elem) + " bytes)");
  }
  out->payload = t->payload();
  if (out->payload < -1 || out->payload >= static_cast<int64_t>(c.payloads.size())) {
    return data_loss(where + ": payload " + std::to_string(out->payload) + " out of range (" +
                     std::to_string(c.payloads.size()) + " payloads)");
  }
  if (out->payload >= 0 && c.payloads[out->payload].bytes.size() != out->byte_size) {
    return data_loss(where + ": payload " + std::to_string(out->payload) + " has " +
                     std::to_string(c.payloads[out->payload].bytes.size()) + " bytes, the tensor " +
                     std::to_string(out->byte_size));
  }
  out->in_buffer = t->in_buffer();
  out->buffer_id = t->buffer_id();
  out->offset = t->offset();
  return Status();
}

Status check_payload_index(int64_t index, const Capture& c, const std::string& where,
                           std::string_view field) {
  if (index < -1 || index >= static_cast<int64_t>(c.payloads.size())) {
    return data_loss(where + ": " + std::string(field) + " " + std::to_string(index) +
                     " out of range (" + std::to_string(c.payloads.size()) + " payloads)");
  }
  return Status();
}

}  // namespace

Result<Capture> decode_capture(std::span<const std::byte> bytes, std::string_view where_in) {
  const std::string where(where_in);
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || !flatbuffers::BufferHasIdentifier(data, fb::CaptureIdentifier())) {
    return data_loss(where + ": not a Loom capture (no 'LCAP' identifier in its first 8 bytes)");
  }
  flatbuffers::Verifier::Options vo;
  vo.max_depth = kCaptureMaxDepth;
  vo.max_tables = kCaptureMaxTables;
  flatbuffers::Verifier verifier(data, bytes.size(), vo);
  if (!fb::VerifyCaptureBuffer(verifier)) {
    return data_loss(where + ": the capture's flatbuffer fails verification (truncated or corrupt)");
  }
  const fb::Capture* root = fb::GetCapture(data);
  Capture c;
  c.schema_version = root->schema_version();
  if (c.schema_version == 0 || c.schema_version > kCaptureSchemaVersion) {
    return incompatible(where + ": capture schema version " + std::to_string(c.schema_version) +
                        "; this Loom reads versions 1 to " +
                        std::to_string(kCaptureSchemaVersion));
  }
  c.loom_version = capture_str(root->loom_version());
  c.created_unix_s = root->created_unix_s();
  c.host = capture_str(root->host());
  if (root->plugins() != nullptr) {
    for (const fb::Plugin* p : *root->plugins()) {
      PluginEntry e;
      e.name = capture_str(p->name());
      if (e.name.empty()) {
        return data_loss(where + ": plugin " + std::to_string(c.plugins.size()) + " has no name");
      }
      e.version = capture_str(p->version());
      e.vendor = capture_str(p->vendor());
      e.abi_version = p->abi_version();
      e.library_hash = capture_str(p->library_hash());
      if (p->loader_keys() != nullptr) {
        for (const auto* k : *p->loader_keys()) e.loader_keys.push_back(capture_str(k));
      }
      e.isolated = p->isolated();
      c.plugins.push_back(std::move(e));
    }
  }
  if (root->devices() != nullptr) {
    for (const fb::Device* d : *root->devices()) {
      DeviceEntry e;
      e.plugin = d->plugin();
      if (e.plugin >= c.plugins.size()) {
        return data_loss(where + ": device " + std::to_string(c.devices.size()) + " names plugin " +
                         std::to_string(e.plugin) + ", out of range (" +
                         std::to_string(c.plugins.size()) + " plugins)");
      }
      e.uri = capture_str(d->uri());
      e.name = capture_str(d->name());
      e.kind = d->kind();
      e.device_memory_bytes = d->device_memory_bytes();
      e.capabilities = d->capabilities();
      e.dtype_mask = d->dtype_mask();
      c.devices.push_back(std::move(e));
    }
  }
  if (root->payloads() != nullptr) {
    for (const fb::Payload* p : *root->payloads()) {
      Payload e;
      e.hash = capture_str(p->hash());
      if (p->bytes() != nullptr) {
        const auto* b = reinterpret_cast<const std::byte*>(p->bytes()->data());
        e.bytes.assign(b, b + p->bytes()->size());
      }
      const std::string actual = payload_hash(e.bytes);
      if (actual != e.hash) {
        return data_loss(where + ": payload " + std::to_string(c.payloads.size()) + " has hash " +
                         actual + ", the capture records " + escape_control(e.hash));
      }
      c.payloads.push_back(std::move(e));
    }
  }
  if (root->calls() != nullptr) {
    c.calls.reserve(root->calls()->size());
    for (const fb::Call* r : *root->calls()) {
      const std::string at = where + ": call " + std::to_string(c.calls.size());
      CallRecord e;
      const auto kind = static_cast<uint16_t>(r->kind());
      if (kind > kLastCallKind) return data_loss(at + ": unknown call kind " + std::to_string(kind));
      e.kind = static_cast<CallKind>(kind);
      e.plugin = r->plugin();
      if (e.plugin >= c.plugins.size()) {
        return data_loss(at + ": plugin " + std::to_string(e.plugin) + " out of range (" +
                         std::to_string(c.plugins.size()) + " plugins)");
      }
      e.thread = r->thread();
      e.start_ns = r->start_ns();
      e.duration_ns = r->duration_ns();
      e.status_code = r->status_code();
      if (e.status_code > 14) {
        return data_loss(at + ": unknown status code " + std::to_string(e.status_code));
      }
      e.message = capture_str(r->message());
      e.device = r->device();
      if (e.device < -1 || e.device >= static_cast<int64_t>(c.devices.size())) {
        return data_loss(at + ": device " + std::to_string(e.device) + " out of range (" +
                         std::to_string(c.devices.size()) + " devices)");
      }
      e.object = r->object();
      if (e.object < -1) return data_loss(at + ": object id " + std::to_string(e.object));
      e.loader_key = capture_str(r->loader_key());
      e.format_version = r->format_version();
      e.payload = r->payload();
      LOOM_RETURN_IF_ERROR(check_payload_index(e.payload, c, at, "payload"));
      if (r->options() != nullptr) {
        for (const fb::KeyValue* kv : *r->options()) {
          e.options.emplace_back(capture_str(kv->key()), capture_str(kv->value()));
        }
      }
      if (r->inputs() != nullptr) {
        for (const fb::Tensor* t : *r->inputs()) {
          TensorRecord tr;
          LOOM_RETURN_IF_ERROR(
              decode_tensor(t, c, at + " input " + std::to_string(e.inputs.size()), &tr));
          e.inputs.push_back(std::move(tr));
        }
      }
      if (r->outputs() != nullptr) {
        for (const fb::Tensor* t : *r->outputs()) {
          TensorRecord tr;
          LOOM_RETURN_IF_ERROR(
              decode_tensor(t, c, at + " output " + std::to_string(e.outputs.size()), &tr));
          e.outputs.push_back(std::move(tr));
        }
      }
      if (r->wait_fences() != nullptr) {
        copy_int64s(*r->wait_fences(), &e.wait_fences);
      }
      e.signal_fence = r->signal_fence();
      e.size = r->size();
      e.offset = r->offset();
      e.timeout_ns = r->timeout_ns();
      e.flag = r->flag();
      e.value = r->value();
      e.result_payload = r->result_payload();
      e.abi_min = r->abi_min();
      e.abi_max = r->abi_max();
      LOOM_RETURN_IF_ERROR(check_payload_index(e.result_payload, c, at, "result_payload"));
      if (e.kind == CallKind::kExecutableLoad && e.status_code == 0 && e.payload < 0) {
        return data_loss(at + ": executable_load without its blob");
      }
      c.calls.push_back(std::move(e));
    }
  }
  return c;
}

Result<Capture> read_capture_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return not_found("cannot open capture " + name + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument("capture " + name + " is not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxCaptureFileBytes) {
    ::close(fd);
    return resource_exhausted("capture " + name + " has " + std::to_string(st.st_size) +
                              " bytes, more than the " + std::to_string(kMaxCaptureFileBytes) +
                              " a capture may have");
  }
  std::vector<std::byte> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return data_loss("capture " + name + ": read failed after " + std::to_string(done) +
                       " bytes");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return decode_capture(bytes, "capture " + name);
}

Status write_capture_file(const Capture& capture, const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = encode_capture(capture);
  const std::filesystem::path temp = path.string() + ".part";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return not_found("cannot write capture " + temp.string() + ": " + std::strerror(errno));
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) return data_loss("writing capture " + temp.string() + " failed");
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) return data_loss("cannot rename " + temp.string() + " to " + path.string() + ": " + ec.message());
  return Status();
}

}  // namespace loom::host::capture
