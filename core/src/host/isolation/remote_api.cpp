// The forwarding function table of an isolated plugin: each entry turns
// its C arguments into a request, sends it through RemotePlugin::call and
// turns the reply back into the ABI's outputs and status objects.
#include <cstdlib>
#include <cstring>

#include "host/isolation/remote_plugin_impl.hpp"

namespace loom::host {

using wire::Op;
using wire::WireReader;
using wire::WireWriter;

namespace {

struct ProxyStatus {
  loom_status_code_t code;
  std::string message;
};

loom_status_t* to_c(const Status& status) {
  if (status.ok()) return nullptr;
  auto* s = new (std::nothrow) ProxyStatus{static_cast<loom_status_code_t>(status.code()), status.message()};
  return reinterpret_cast<loom_status_t*>(s);
}


// The instance handle points at RemotePlugin::self_.
RemotePlugin* remote_of(loom_plugin_t* p) { return *reinterpret_cast<RemotePlugin**>(p); }
RemotePlugin::Device* dev(loom_device_t* d) { return reinterpret_cast<RemotePlugin::Device*>(d); }
RemotePlugin::Executable* exe(loom_executable_t* e) { return reinterpret_cast<RemotePlugin::Executable*>(e); }
RemotePlugin::Buffer* buf(loom_buffer_t* b) { return reinterpret_cast<RemotePlugin::Buffer*>(b); }
RemotePlugin::Fence* fen(loom_fence_t* f) { return reinterpret_cast<RemotePlugin::Fence*>(f); }

// ---- the forwarding table ----

loom_status_code_t p_status_code(const loom_status_t* s) {
  return reinterpret_cast<const ProxyStatus*>(s)->code;
}
const char* p_status_message(const loom_status_t* s) {
  return reinterpret_cast<const ProxyStatus*>(s)->message.c_str();
}
void p_status_destroy(loom_status_t* s) { delete reinterpret_cast<ProxyStatus*>(s); }

const loom_plugin_info_t* p_plugin_info() {
  static const loom_plugin_info_t info = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "isolated", "", "", 0, nullptr, 0};
  return &info;
}
loom_status_t* p_plugin_create(loom_plugin_create_args_t*) {
  return to_c(failed_precondition("an isolated plugin is created in its own process"));
}
void p_plugin_destroy(loom_plugin_t*) {}

loom_status_t* p_check_available(loom_plugin_t* p) {
  RemotePlugin* r = remote_of(p);
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kCheckAvailable));
  return to_c(r->call(w, {}, r->call_timeout_ms(), "plugin_check_available").status());
}

loom_status_t* p_device_count(loom_plugin_t* p, size_t* out) {
  *out = remote_of(p)->devices_.size();
  return nullptr;
}
loom_status_t* p_device_get(loom_plugin_t* p, size_t index, loom_device_t** out) {
  RemotePlugin* r = remote_of(p);
  if (index >= r->devices_.size()) return to_c(out_of_range("device index " + std::to_string(index)));
  *out = reinterpret_cast<loom_device_t*>(r->devices_[index].get());
  return nullptr;
}
loom_status_t* p_device_info(loom_device_t* d, loom_device_info_t* info) {
  const DeviceInfo& in = dev(d)->info;
  loom_device_info_t full{};
  full.struct_size = info->struct_size;
  full.uri = in.uri.c_str();
  full.name = in.name.c_str();
  full.kind = static_cast<loom_device_kind_t>(in.kind);
  full.device_memory_bytes = in.device_memory_bytes;
  full.host_visible_memory_bytes = in.host_visible_memory_bytes;
  full.capabilities = in.capabilities;
  full.dtype_mask = in.dtype_mask;
  std::memcpy(info, &full, std::min(info->struct_size, sizeof full));
  return nullptr;
}

void write_blob_args(WireWriter& w, Op op, loom_device_t* device, const char* key, uint32_t format,
                     const void* blob, size_t size) {
  w.u32(static_cast<uint32_t>(op));
  w.u64(dev(device)->index);
  w.str(key != nullptr ? key : "");
  w.u32(format);
  w.bytes(std::span(static_cast<const std::byte*>(blob), blob != nullptr ? size : 0));
}

loom_status_t* p_executable_check(loom_executable_check_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  WireWriter w;
  write_blob_args(w, Op::kExecutableCheck, a->device, a->loader_key, a->format_version, a->blob, a->blob_size);
  return to_c(r->call(w, {}, r->call_timeout_ms(), "executable_check").status());
}

loom_status_t* p_executable_estimate(loom_executable_estimate_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  WireWriter w;
  write_blob_args(w, Op::kExecutableEstimate, a->device, a->loader_key, a->format_version, a->blob, a->blob_size);
  auto body = r->call(w, {}, r->call_timeout_ms(), "executable_estimate");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  a->out_time_ns = in.u64("estimate");
  return to_c(in.finish("executable_estimate reply"));
}

loom_status_t* p_executable_load(loom_executable_load_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  WireWriter w;
  write_blob_args(w, Op::kExecutableLoad, a->device, a->loader_key, a->format_version, a->blob, a->blob_size);
  w.u64(a->spec_count);
  for (size_t i = 0; i < a->spec_count; ++i) {
    w.str(a->specs[i]->key != nullptr ? a->specs[i]->key : "");
    w.str(a->specs[i]->value != nullptr ? a->specs[i]->value : "");
  }
  auto body = r->call(w, {}, r->call_timeout_ms(), "executable_load");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t id = in.u64("executable id");
  if (Status s = in.finish("executable_load reply"); !s.ok()) return to_c(s);
  a->out_executable = reinterpret_cast<loom_executable_t*>(new RemotePlugin::Executable{r, id});
  return nullptr;
}

void p_executable_destroy(loom_executable_t* e) {
  if (e == nullptr) return;
  std::unique_ptr<RemotePlugin::Executable> owned(exe(e));
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kExecutableDestroy));
  w.u64(owned->id);
  (void)owned->remote->call(w, {}, owned->remote->call_timeout_ms(), "executable_destroy");
}

loom_status_t* p_execute(loom_execute_args_t* a) {
  RemotePlugin* r = exe(a->executable)->remote;
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kExecute));
  w.u64(exe(a->executable)->id);
  w.u64(a->input_count + a->output_count);
  w.u64(a->input_count);
  for (size_t t = 0; t < a->input_count + a->output_count; ++t) {
    const loom_tensor_t* tensor = t < a->input_count ? a->inputs[t] : a->outputs[t - a->input_count];
    if (tensor->buffer == nullptr) {
      return to_c(invalid_argument("tensor " + std::to_string(t) +
                                   " is in host memory; the devices of an isolated plugin take buffers"));
    }
    w.u32(static_cast<uint32_t>(tensor->dtype));
    w.u64(tensor->rank);
    for (uint32_t d = 0; d < tensor->rank && d < LOOM_MAX_RANK; ++d) w.i64(tensor->shape[d]);
    w.u64(buf(tensor->buffer)->id);
    w.u64(tensor->offset);
    w.u64(tensor->byte_size);
  }
  w.u64(a->wait_fence_count);
  for (size_t i = 0; i < a->wait_fence_count; ++i) w.u64(fen(a->wait_fences[i])->id);
  w.u64(a->signal_fence != nullptr ? fen(a->signal_fence)->id : 0);
  return to_c(r->call(w, {}, r->call_timeout_ms(), "execute").status());
}

loom_status_t* p_buffer_allocate(loom_buffer_allocate_args_t* a) {
  RemotePlugin* r = dev(a->device)->remote;
  auto shared = wire::SharedMemory::create(a->size, "loom-buffer");
  if (!shared.ok()) return to_c(shared.status());
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kBufferAllocate));
  w.u64(dev(a->device)->index);
  w.u64(a->size);
  const int fd = shared->fd();
  auto body = r->call(w, std::span(&fd, 1), r->call_timeout_ms(), "buffer_allocate");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t id = in.u64("buffer id");
  const bool mirrored = in.boolean("mirrored");
  if (Status s = in.finish("buffer_allocate reply"); !s.ok()) return to_c(s);
  a->out_buffer = reinterpret_cast<loom_buffer_t*>(
      new RemotePlugin::Buffer{r, id, std::move(*shared), mirrored});
  return nullptr;
}

void p_buffer_free(loom_buffer_t* b) {
  if (b == nullptr) return;
  std::unique_ptr<RemotePlugin::Buffer> owned(buf(b));
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kBufferFree));
  w.u64(owned->id);
  (void)owned->remote->call(w, {}, owned->remote->call_timeout_ms(), "buffer_free");
}

Status sync(RemotePlugin::Buffer* b, Op op, uint64_t offset, uint64_t size) {
  if (!b->mirrored) return b->remote->lost_status();
  WireWriter w;
  w.u32(static_cast<uint32_t>(op));
  w.u64(b->id);
  w.u64(offset);
  w.u64(size);
  return b->remote->call(w, {}, b->remote->call_timeout_ms(), op == Op::kBufferPush ? "buffer copy in" : "buffer copy out").status();
}

Status check_copy(const RemotePlugin::Buffer* b, uint64_t offset, uint64_t size) {
  if (offset > b->shared.size() || size > b->shared.size() - offset) {
    return out_of_range("copy of " + std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                        " past a buffer of " + std::to_string(b->shared.size()) + " bytes");
  }
  return Status();
}

loom_status_t* p_buffer_map(loom_buffer_t* b, void** out) {
  if (Status s = sync(buf(b), Op::kBufferPull, 0, buf(b)->shared.size()); !s.ok()) return to_c(s);
  *out = buf(b)->shared.data();
  return nullptr;
}
void p_buffer_unmap(loom_buffer_t* b) { (void)sync(buf(b), Op::kBufferPush, 0, buf(b)->shared.size()); }

loom_status_t* p_copy_from_host(loom_buffer_copy_args_t* a) {
  RemotePlugin::Buffer* b = buf(a->buffer);
  if (Status s = check_copy(b, a->buffer_offset, a->size); !s.ok()) return to_c(s);
  std::memcpy(b->shared.data() + a->buffer_offset, a->host_pointer, a->size);
  return to_c(sync(b, Op::kBufferPush, a->buffer_offset, a->size));
}

loom_status_t* p_copy_to_host(loom_buffer_copy_args_t* a) {
  RemotePlugin::Buffer* b = buf(a->buffer);
  if (Status s = check_copy(b, a->buffer_offset, a->size); !s.ok()) return to_c(s);
  if (Status s = sync(b, Op::kBufferPull, a->buffer_offset, a->size); !s.ok()) return to_c(s);
  std::memcpy(a->host_pointer, b->shared.data() + a->buffer_offset, a->size);
  return nullptr;
}

loom_status_t* p_fence_create(loom_device_t* d, loom_fence_t** out) {
  RemotePlugin* r = dev(d)->remote;
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kFenceCreate));
  w.u64(dev(d)->index);
  auto body = r->call(w, {}, r->call_timeout_ms(), "fence_create");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t id = in.u64("fence id");
  if (Status s = in.finish("fence_create reply"); !s.ok()) return to_c(s);
  *out = reinterpret_cast<loom_fence_t*>(new RemotePlugin::Fence{r, id});
  return nullptr;
}

void p_fence_destroy(loom_fence_t* f) {
  if (f == nullptr) return;
  std::unique_ptr<RemotePlugin::Fence> owned(fen(f));
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kFenceDestroy));
  w.u64(owned->id);
  (void)owned->remote->call(w, {}, owned->remote->call_timeout_ms(), "fence_destroy");
}

loom_status_t* fence_call(loom_fence_t* f, Op op, uint64_t timeout_ns, bool* out_signaled, const char* what) {
  RemotePlugin* r = fen(f)->remote;
  WireWriter w;
  w.u32(static_cast<uint32_t>(op));
  w.u64(fen(f)->id);
  int timeout_ms = r->call_timeout_ms();
  if (op == Op::kFenceWait) {
    w.u64(timeout_ns);
    // The child's wait, plus the usual allowance for an answer.
    const uint64_t wait_ms = timeout_ns / 1'000'000;
    timeout_ms = timeout_ns == UINT64_MAX || wait_ms > 24ull * 3600 * 1000
                     ? -1
                     : static_cast<int>(wait_ms) + std::max(timeout_ms, 0);
  }
  auto body = r->call(w, {}, timeout_ms, what);
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  if (out_signaled != nullptr) *out_signaled = in.boolean("signaled");
  return to_c(in.finish("fence reply"));
}

loom_status_t* p_fence_signal(loom_fence_t* f) { return fence_call(f, Op::kFenceSignal, 0, nullptr, "fence_signal"); }
loom_status_t* p_fence_wait(loom_fence_t* f, uint64_t t) { return fence_call(f, Op::kFenceWait, t, nullptr, "fence_wait"); }
loom_status_t* p_fence_query(loom_fence_t* f, bool* out) { return fence_call(f, Op::kFenceQuery, 0, out, "fence_query"); }

loom_status_t* p_compile_supported(loom_compile_supported_args_t* a) {
  RemotePlugin* r = remote_of(a->plugin);
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kCompileSupported));
  w.bytes(std::span(static_cast<const std::byte*>(a->graph), a->graph_size));
  w.u64(a->node_count);
  auto body = r->call(w, {}, r->call_timeout_ms(), "compile_supported");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  const uint64_t n = in.count("node count", a->node_count, 4);
  if (in.ok() && n != a->node_count) return to_c(data_loss("compile_supported answered for " + std::to_string(n) + " nodes"));
  for (uint64_t i = 0; i < n; ++i) a->out_supported[i] = in.boolean("supported");
  return to_c(in.finish("compile_supported reply"));
}

loom_status_t* p_compile(loom_compile_args_t* a) {
  RemotePlugin* r = remote_of(a->plugin);
  WireWriter w;
  w.u32(static_cast<uint32_t>(Op::kCompile));
  w.bytes(std::span(static_cast<const std::byte*>(a->graph), a->graph_size));
  w.u64(a->option_count);
  for (size_t i = 0; i < a->option_count; ++i) {
    w.str(a->options[i]->key != nullptr ? a->options[i]->key : "");
    w.str(a->options[i]->value != nullptr ? a->options[i]->value : "");
  }
  auto body = r->call(w, {}, r->call_timeout_ms(), "compile");
  if (!body.ok()) return to_c(body.status());
  WireReader in(*body);
  auto blob = in.bytes("blob");
  const std::string key = in.str("loader key", 256);
  const uint32_t format = in.u32("format version");
  if (Status s = in.finish("compile reply"); !s.ok()) return to_c(s);
  // The host frees the blob with its `free` service (std::free), and takes
  // the loader key as one of the plugin's static strings: the key is matched
  // against the plugin's own (kept in the loaded plugin's records).
  void* out = std::malloc(blob.empty() ? 1 : blob.size());
  if (out == nullptr) return to_c(resource_exhausted("no memory for a compiled blob of " + std::to_string(blob.size()) + " bytes"));
  std::memcpy(out, blob.data(), blob.size());
  a->out_blob = out;
  a->out_blob_size = blob.size();
  a->out_format_version = format;
  a->out_loader_key = r->intern_key(key);
  return nullptr;
}

}  // namespace

void fill_forwarding_table(RemotePlugin& r, uint32_t abi_version) {
  loom_plugin_api_t& api = r.api_;
  api.struct_size = LOOM_PLUGIN_API_STRUCT_SIZE;
  api.abi_version = abi_version;
  api.status_code = p_status_code;
  api.status_message = p_status_message;
  api.status_destroy = p_status_destroy;
  api.plugin_info = p_plugin_info;
  api.plugin_create = p_plugin_create;
  api.plugin_destroy = p_plugin_destroy;
  api.plugin_check_available = p_check_available;
  api.device_count = p_device_count;
  api.device_get = p_device_get;
  api.device_info = p_device_info;
  api.executable_check = p_executable_check;
  api.executable_load = p_executable_load;
  api.executable_destroy = p_executable_destroy;
  api.execute = p_execute;
  api.buffer_allocate = p_buffer_allocate;
  api.buffer_free = p_buffer_free;
  api.buffer_map = p_buffer_map;
  api.buffer_unmap = p_buffer_unmap;
  api.buffer_copy_from_host = p_copy_from_host;
  api.buffer_copy_to_host = p_copy_to_host;
  api.buffer_import_host = nullptr;
  api.fence_create = p_fence_create;
  api.fence_destroy = p_fence_destroy;
  api.fence_signal = p_fence_signal;
  api.fence_wait = p_fence_wait;
  api.fence_query = p_fence_query;
  api.compile_supported = r.has_compile_ ? p_compile_supported : nullptr;
  api.compile = r.has_compile_ ? p_compile : nullptr;
  api.executable_estimate = r.has_estimate_ ? p_executable_estimate : nullptr;
}

}  // namespace loom::host
