// The fake plugin: a small, strict backend for testing the host and the
// runtime. One source built several times; FAKE_NAME and FAKE_VARIANT (a
// Variant enumerator) pick the plugin name and how it misbehaves.
//
// Blobs: "fake:add" (out = in0 + in1, f32, equal shapes) and "fake:copy"
// (out = in0). Options read at plugin_create:
//   fake.devices=N          number of devices (default 1)
//   fake.claimed_devices=N  device_count answers N (up to 2^62) whatever exists
//   fake.fail_create=1      plugin_create fails
//   fake.fail_execute=1     every execution fails (asynchronously: at the fence)
//   fake.async=1            devices are CAP_ASYNC; executions with a signal
//                           fence finish on a worker thread
//   fake.async_delay_ms=N   how long the worker waits before computing
//   fake.async_order=lifo   the worker starts the newest ready execution
//                           first (default fifo); wait fences still order
//   fake.async_hold=N       the worker starts nothing until N executions are
//                           queued at once: the test's Nth submission is the
//                           latch that releases them (default 0: no holding)
//   fake.separate_memory=1  no CAP_HOST_POINTER_EXECUTE: tensors must be buffers
//   fake.max_fences=N       fence_create fails with RESOURCE_EXHAUSTED after
//                           N fences (0: no limit), to count them
//   fake.import=1           CAP_HOST_POINTER_IMPORT: buffer_import_host wraps
//                           host memory whose address and size are
//                           multiples of 4096 (as Vulkan drivers ask)
//   fake.null_uri=1         device_info leaves uri NULL
//   fake.kinds=K,K,...      device i has kind K[i % count]: cpu, gpu,
//                           accelerator or virtual (default: virtual)
//   fake.fail_load=I,I,...  executable_load on these devices fails with
//                           RESOURCE_EXHAUSTED (executable_check still passes)
//   fake.estimate_ns=N,...  ABI 1.1 executable_estimate answers N for device i
//                           (N[i % count]; 0: no estimate); without it, 0
//   fake.lose=I,I,...       executions on these devices fail with DEVICE_LOST
//   fake.hang=I,I,...       asynchronous executions on these devices never
//                           signal their fence (a hung kernel)
//   fake.compile_ops, fake.compile_fault: see fake_compile.hpp
//   fake.misbehave=W        the plugin kills or hangs its process, to test
//                           isolation: create_segv, create_abort,
//                           create_exit0, create_hang (in plugin_create),
//                           execute_segv, execute_hang (in execute)
// Before any option can be read, $LOOM_FAKE_MISBEHAVE does the same in the
// library's constructor (constructor_abort) or the query (query_segv,
// query_hang, query_exit0, reason_overflow: writes 64 KiB past the reason
// buffer).
// At plugin_destroy it logs any objects the host leaked ("leaked 2 buffers")
// and frees them.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fake_compile.hpp"
#include "fake_objects.hpp"
#include "loom/plugin.h"

using namespace fake;  // the types and helpers of fake_objects.hpp

namespace {

loom_status_t* parse_flag(const char* key, const char* value, bool* out) {
  if (std::strcmp(value, "0") == 0 || std::strcmp(value, "1") == 0) {
    *out = value[0] == '1';
    return nullptr;
  }
  return invalid(std::string("option ") + key + " must be 0 or 1, got '" + value + "'");
}

loom_status_t* parse_count(const char* key, const char* value, uint64_t max, uint64_t* out) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(value, &end, 10);
  if (value[0] == '\0' || value[0] == '-' || *end != '\0' || v > max) {
    return invalid(std::string("option ") + key + " must be a number 0-" + std::to_string(max) +
                   ", got '" + value + "'");
  }
  *out = v;
  return nullptr;
}

// "a,b,c" -> {"a", "b", "c"}.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

loom_status_t* parse_option(const loom_option_t* option, size_t i, Config* config) {
  const std::string where = "options[" + std::to_string(i) + "]";
  if (option == nullptr) return invalid(where + " is NULL");
  if (option->struct_size < LOOM_OPTION_STRUCT_SIZE) return invalid(where + ".struct_size too small");
  if (option->key == nullptr || option->value == nullptr) return invalid(where + " key or value is NULL");
  const std::string key = option->key;
  const char* value = option->value;
  uint64_t n = 0;
  loom_status_t* st = nullptr;
  if (key == "fake.devices") {
    st = parse_count(option->key, value, 64, &n);
    config->devices = n;
  } else if (key == "fake.claimed_devices") {
    st = parse_count(option->key, value, uint64_t{1} << 62, &n);
    config->claimed_devices = n;
  } else if (key == "fake.async_delay_ms") {
    st = parse_count(option->key, value, 10000, &n);
    config->async_delay_ms = n;
  } else if (key == "fake.async_hold") {
    st = parse_count(option->key, value, 64, &n);
    config->async_hold = n;
  } else if (key == "fake.async_order") {
    if (std::strcmp(value, "fifo") != 0 && std::strcmp(value, "lifo") != 0) {
      return invalid(std::string("option fake.async_order must be fifo or lifo, got '") + value + "'");
    }
    config->async_order = value[0] == 'l' ? fake_async::Order::kLifo : fake_async::Order::kFifo;
  } else if (key == "fake.fail_create") {
    st = parse_flag(option->key, value, &config->fail_create);
  } else if (key == "fake.fail_execute") {
    st = parse_flag(option->key, value, &config->fail_execute);
  } else if (key == "fake.async") {
    st = parse_flag(option->key, value, &config->async);
  } else if (key == "fake.separate_memory") {
    st = parse_flag(option->key, value, &config->separate_memory);
  } else if (key == "fake.max_fences") {
    st = parse_count(option->key, value, UINT64_C(1) << 40, &config->max_fences);
  } else if (key == "fake.import") {
    st = parse_flag(option->key, value, &config->import);
  } else if (key == "fake.null_uri") {
    st = parse_flag(option->key, value, &config->null_uri);
  } else if (key == "fake.compile_ops") {
    if (!fake_compile::parse_ops(value, &config->compile_ops)) {
      return invalid(std::string("option fake.compile_ops has an empty op name: '") + value + "'");
    }
  } else if (key == "fake.kinds") {
    for (const std::string& item : split_list(value)) {
      if (item == "cpu") config->kinds.push_back(LOOM_DEVICE_KIND_CPU);
      else if (item == "gpu") config->kinds.push_back(LOOM_DEVICE_KIND_GPU);
      else if (item == "accelerator") config->kinds.push_back(LOOM_DEVICE_KIND_ACCELERATOR);
      else if (item == "virtual") config->kinds.push_back(LOOM_DEVICE_KIND_VIRTUAL);
      else return invalid("option fake.kinds: unknown kind '" + item + "'");
    }
  } else if (key == "fake.estimate_ns") {
    for (const std::string& item : split_list(value)) {
      if (loom_status_t* bad = parse_count(option->key, item.c_str(), UINT64_C(1) << 40, &n)) return bad;
      config->estimate_ns.push_back(n);
    }
  } else if (key == "fake.fail_load" || key == "fake.lose" || key == "fake.hang") {
    std::set<size_t>& devices = key == "fake.fail_load" ? config->fail_load
                                : key == "fake.lose"    ? config->lose
                                                        : config->hang;
    for (const std::string& item : split_list(value)) {
      if (loom_status_t* bad = parse_count(option->key, item.c_str(), 63, &n)) return bad;
      devices.insert(n);
    }
  } else if (key == "fake.compile_fault") {
    config->compile_fault = value;
  } else if (key == "fake.misbehave") {
    config->misbehave = value;
  } else if (key.rfind("fake.", 0) == 0) {
    return invalid("unknown option " + key);
  }
  return st;  // options of other components (loom.threads) are ignored
}

// Does what `what` says when it is "<stage>_<deed>": kills the process
// with SIGSEGV (the default action, even under a sanitizer's handler), aborts,
// exits with code 0 or never returns.
void misbehave(const std::string& what, const char* stage) {
  const std::string prefix = std::string(stage) + "_";
  if (what.rfind(prefix, 0) != 0) return;
  const std::string deed = what.substr(prefix.size());
  if (deed == "segv") {
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  } else if (deed == "abort") {
    std::abort();
  } else if (deed == "exit0") {
    std::exit(0);
  } else if (deed == "hang") {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

std::string misbehave_from_environment() {
  const char* env = std::getenv("LOOM_FAKE_MISBEHAVE");
  return env != nullptr ? env : "";
}

// A deliberately misbehaving constructor, for the host's probe tests.
__attribute__((constructor)) void fake_library_constructor() {
  misbehave(misbehave_from_environment(), "constructor");
}

// ---- status --------------------------------------------------------------

loom_status_code_t status_code(const loom_status_t* s) { return s ? s->code : LOOM_STATUS_INTERNAL; }
const char* status_message(const loom_status_t* s) { return s ? s->message.c_str() : "(null status)"; }
void status_destroy(loom_status_t* s) { delete s; }

// ---- plugin --------------------------------------------------------------

const loom_plugin_info_t* plugin_info();

loom_status_t* plugin_create(loom_plugin_create_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("plugin_create args is NULL");
    if (args->struct_size < LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE) return invalid("plugin_create args.struct_size too small");
    if (args->option_count > 0 && args->options == nullptr) return invalid("args.options is NULL");
    args->out_plugin = nullptr;
    auto plugin = std::make_unique<loom_plugin_t>();
    plugin->host = args->host;
    for (size_t i = 0; i < args->option_count; ++i) {
      if (loom_status_t* st = parse_option(args->options[i], i, &plugin->config)) return st;
    }
    const Config& c = plugin->config;
    misbehave(c.misbehave, "create");
    if (c.fail_create) return make_status(LOOM_STATUS_INTERNAL, "plugin_create fails (fake.fail_create=1)");
    if (kDefect == Defect::kLeak) {
      char* lost = new char[256 * 1024];
      std::memset(lost, 1, 256 * 1024);
      plugin->log(LOOM_LOG_DEBUG, lost[7] == 1 ? "leaking 256 KiB (defect)" : "");
    }
    if (kDefect == Defect::kRace) plugin->shared_scratch.resize(1 << 20);
    uint64_t caps = c.async || kDefect == Defect::kFenceNeverSignals ? LOOM_DEVICE_CAP_ASYNC : 0;
    caps |= c.separate_memory ? 0 : (LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY);
    caps |= c.import ? LOOM_DEVICE_CAP_HOST_POINTER_IMPORT : 0;
    for (size_t i = 0; i < c.devices; ++i) {
      std::string scheme = kVariant == Variant::kBadUri ? "other-plugin" : kName;
      plugin->devices.push_back(std::make_unique<loom_device_t>(loom_device_t{
          plugin.get(), i, scheme + "://" + std::to_string(i),
          std::string("Fake device ") + std::to_string(i), caps}));
    }
    if (c.async) plugin->worker = std::make_unique<fake_async::Worker>(c.async_order, c.async_hold);
    plugin->log(LOOM_LOG_DEBUG, "created with " + std::to_string(c.devices) + " devices");
    args->out_plugin = plugin.release();
    return nullptr;
  });
}

void plugin_destroy(loom_plugin_t* plugin) {
  if (plugin == nullptr) return;
  plugin->worker.reset();  // finishes the queued executions first
  std::string leaks;
  auto report = [&leaks](size_t n, const char* what) {
    if (n != 0) leaks += (leaks.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  report(plugin->executables.size(), "executables");
  report(plugin->buffers.size(), "buffers");
  report(plugin->fences.size(), "fences");
  if (!leaks.empty()) plugin->log(LOOM_LOG_WARNING, "leaked " + leaks);
  for (auto* e : plugin->executables) delete e;
  for (auto* b : plugin->buffers) delete b;
  for (auto* f : plugin->fences) delete f;
  delete plugin;
}

loom_status_t* plugin_check_available(loom_plugin_t* plugin) {
  if (plugin == nullptr) return invalid("plugin is NULL");
  if (kVariant == Variant::kUnavailable) {
    return make_status(LOOM_STATUS_UNAVAILABLE, "no fake hardware present (test variant)");
  }
  return nullptr;
}

// ---- devices -------------------------------------------------------------

loom_status_t* device_count(loom_plugin_t* plugin, size_t* out_count) {
  if (plugin == nullptr || out_count == nullptr) return invalid("device_count: plugin or out_count is NULL");
  *out_count = plugin->config.claimed_devices != 0 ? plugin->config.claimed_devices
                                                  : plugin->devices.size();
  return nullptr;
}

loom_status_t* device_get(loom_plugin_t* plugin, size_t index, loom_device_t** out_device) {
  if (plugin == nullptr || out_device == nullptr) return invalid("device_get: plugin or out_device is NULL");
  *out_device = nullptr;
  if (index >= plugin->devices.size()) {
    return make_status(LOOM_STATUS_OUT_OF_RANGE, "device index " + std::to_string(index) + " out of range");
  }
  *out_device = plugin->devices[index].get();
  return nullptr;
}

loom_status_t* device_info(loom_device_t* device, loom_device_info_t* info) {
  if (device == nullptr || info == nullptr) return invalid("device_info: device or info is NULL");
  if (kDefect == Defect::kStructSize && info->struct_size != sizeof(loom_device_info_t)) {
    return invalid("device_info: struct_size must be " + std::to_string(sizeof(loom_device_info_t)));
  }
  const size_t size = info->struct_size;
#define FAKE_SET(field, value) \
  if (LOOM_STRUCT_HAS(loom_device_info_t, size, field)) info->field = (value)
  FAKE_SET(uri, device->plugin->config.null_uri ? nullptr : device->uri.c_str());
  FAKE_SET(name, device->name.c_str());
  const auto& kinds = device->plugin->config.kinds;
  FAKE_SET(kind, kinds.empty() ? LOOM_DEVICE_KIND_VIRTUAL : kinds[device->index % kinds.size()]);
  FAKE_SET(device_memory_bytes, kMaxBufferBytes);
  FAKE_SET(host_visible_memory_bytes, device->plugin->config.separate_memory ? 0 : kMaxBufferBytes);
  FAKE_SET(capabilities, device->capabilities);
  FAKE_SET(dtype_mask, LOOM_DTYPE_BIT(LOOM_DTYPE_F32));
#undef FAKE_SET
  return nullptr;
}

// ---- executables ---------------------------------------------------------

// Checks what executable_check and executable_load share; sets *op.
loom_status_t* check_blob(loom_device_t* device, const char* loader_key, uint32_t format_version,
                          const void* blob, size_t blob_size, Op* op) {
  if (device == nullptr) return invalid("args.device is NULL");
  if (loader_key == nullptr) return invalid("args.loader_key is NULL");
  if (blob == nullptr && blob_size != 0) return invalid("args.blob is NULL");
  if (std::strcmp(loader_key, kLoaderKey) != 0) {
    return make_status(LOOM_STATUS_INCOMPATIBLE, std::string("loader key '") + loader_key +
                                                     "' is not served (serves '" + kLoaderKey + "')");
  }
  if (format_version > 1) {
    return make_status(LOOM_STATUS_INCOMPATIBLE,
                       "format version " + std::to_string(format_version) + " is not 0-1");
  }
  std::string_view text(static_cast<const char*>(blob), blob_size);
  if (text == "fake:add") {
    *op = Op::kAdd;
  } else if (text == "fake:copy") {
    *op = Op::kCopy;
  } else if (kDefect == Defect::kCorruptBlobs) {
    *op = Op::kCopy;
  } else {
    return make_status(LOOM_STATUS_INCOMPATIBLE, "unknown fake blob (" + std::to_string(blob_size) + " bytes)");
  }
  return nullptr;
}

loom_status_t* executable_check(loom_executable_check_args_t* args) {
  if (args == nullptr) return invalid("executable_check args is NULL");
  if (args->struct_size < LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE) return invalid("executable_check args.struct_size too small");
  Op op;
  return check_blob(args->device, args->loader_key, args->format_version, args->blob, args->blob_size, &op);
}

loom_status_t* executable_load(loom_executable_load_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("executable_load args is NULL");
    if (args->struct_size < LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE) return invalid("executable_load args.struct_size too small");
    args->out_executable = nullptr;
    if (args->spec_count > 0 && args->specs == nullptr) return invalid("args.specs is NULL");
    for (size_t i = 0; i < args->spec_count; ++i) {
      const loom_option_t* spec = args->specs[i];
      if (spec == nullptr || spec->struct_size < LOOM_OPTION_STRUCT_SIZE || spec->key == nullptr || spec->value == nullptr) {
        return invalid("args.specs[" + std::to_string(i) + "] is malformed");
      }
    }
    Op op;
    if (loom_status_t* st = check_blob(args->device, args->loader_key, args->format_version, args->blob, args->blob_size, &op)) return st;
    if (args->device->plugin->config.fail_load.count(args->device->index) != 0) {
      return make_status(LOOM_STATUS_RESOURCE_EXHAUSTED,
                         "device " + args->device->uri + " is out of memory (fake.fail_load)");
    }
    auto* executable = new loom_executable_t{kExecutableMagic, args->device, op};
    args->device->plugin->track(args->device->plugin->executables, executable);
    args->out_executable = executable;
    return nullptr;
  });
}

void executable_destroy(loom_executable_t* executable) {
  if (executable == nullptr || executable->magic != kExecutableMagic) return;
  loom_plugin_t* plugin = executable->device->plugin;
  plugin->untrack_and_delete(plugin->executables, executable);
}

// ---- execution -----------------------------------------------------------

struct ResolvedTensor {
  std::byte* data;
  uint64_t bytes;
  std::vector<int64_t> shape;
};

loom_status_t* resolve_tensor(loom_device_t* device, const loom_tensor_t* t, const std::string& where,
                              ResolvedTensor* out) {
  if (t == nullptr) return invalid(where + " is NULL");
  if (t->struct_size < LOOM_TENSOR_STRUCT_SIZE) return invalid(where + ".struct_size too small");
  if (t->dtype != LOOM_DTYPE_F32) return invalid(where + ".dtype must be f32");
  if (t->rank > LOOM_MAX_RANK) return invalid(where + ".rank " + std::to_string(t->rank) + " exceeds LOOM_MAX_RANK");
  if (t->rank > 0 && t->shape == nullptr) return invalid(where + ".shape is NULL");
  uint64_t elements = 1;
  for (uint32_t d = 0; d < t->rank; ++d) {
    int64_t dim = t->shape[d];
    if (dim < 0) return invalid(where + ".shape[" + std::to_string(d) + "] is negative");
    if (dim != 0 && elements > (kMaxBufferBytes / 4) / static_cast<uint64_t>(dim)) return invalid(where + " is too large");
    elements *= static_cast<uint64_t>(dim);
    out->shape.push_back(dim);
  }
  if (t->byte_size != elements * 4) {
    return invalid(where + ".byte_size is " + std::to_string(t->byte_size) + ", the shape needs " + std::to_string(elements * 4));
  }
  if ((t->buffer == nullptr) == (t->host_data == nullptr)) return invalid(where + ": exactly one of buffer and host_data must be set");
  out->bytes = t->byte_size;
  if (t->host_data != nullptr) {
    if (!(device->capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE)) {
      return invalid(where + ".host_data is set but the device needs buffers (fake.separate_memory=1)");
    }
    out->data = static_cast<std::byte*>(t->host_data) + t->offset;
    return nullptr;
  }
  loom_buffer_t* buffer = const_cast<loom_buffer_t*>(t->buffer);
  if (buffer->magic != kBufferMagic || buffer->device->plugin != device->plugin) return invalid(where + ".buffer is not a buffer of this plugin");
  if (t->offset > buffer->size() || t->byte_size > buffer->size() - t->offset) {
    return invalid(where + " (offset " + std::to_string(t->offset) + ", " + std::to_string(t->byte_size) +
                   " bytes) exceeds its buffer of " + std::to_string(buffer->size()) + " bytes");
  }
  out->data = buffer->data() + t->offset;
  return nullptr;
}

void compute(Op op, const std::vector<ResolvedTensor>& in, const ResolvedTensor& out) {
  if (op == Op::kCopy) {
    std::memmove(out.data, in[0].data, out.bytes);
    return;
  }
  for (uint64_t i = 0; i < out.bytes; i += 4) {
    float a, b;
    std::memcpy(&a, in[0].data + i, 4);
    std::memcpy(&b, in[1].data + i, 4);
    float sum = kDefect == Defect::kWrongResults ? a - b : a + b;
    std::memcpy(out.data + i, &sum, 4);
  }
}

void wait_all(const std::vector<std::shared_ptr<FenceState>>& fences) {
  for (const auto& f : fences) {
    std::unique_lock<std::mutex> lock(f->mutex);
    f->cv.wait(lock, [&] { return f->signaled; });
  }
}

loom_status_t* execute(loom_execute_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("execute args is NULL");
    if (args->struct_size < LOOM_EXECUTE_ARGS_STRUCT_SIZE) return invalid("execute args.struct_size too small");
    loom_executable_t* exe = args->executable;
    if (exe == nullptr || exe->magic != kExecutableMagic) return invalid("args.executable is not an executable of this plugin");
    const size_t want_inputs = exe->op == Op::kAdd ? 2 : 1;
    if (args->input_count != want_inputs) {
      return invalid("args.input_count is " + std::to_string(args->input_count) + ", the blob takes " + std::to_string(want_inputs));
    }
    if (args->output_count != 1) return invalid("args.output_count is " + std::to_string(args->output_count) + ", the blob makes 1");
    if (args->inputs == nullptr || args->outputs == nullptr) return invalid("args.inputs or args.outputs is NULL");
    std::vector<ResolvedTensor> inputs(want_inputs);
    for (size_t i = 0; i < want_inputs; ++i) {
      if (auto* st = resolve_tensor(exe->device, args->inputs[i], "inputs[" + std::to_string(i) + "]", &inputs[i])) return st;
    }
    ResolvedTensor output;
    if (auto* st = resolve_tensor(exe->device, args->outputs[0], "outputs[0]", &output)) return st;
    for (size_t i = 0; i < want_inputs; ++i) {
      if (inputs[i].shape != output.shape) return invalid("inputs[" + std::to_string(i) + "].shape differs from outputs[0].shape");
    }
    if (args->wait_fence_count > 0 && args->wait_fences == nullptr) return invalid("args.wait_fences is NULL");
    std::vector<std::shared_ptr<FenceState>> waits;
    for (size_t i = 0; i < args->wait_fence_count; ++i) {
      loom_fence_t* f = args->wait_fences[i];
      if (f == nullptr || f->magic != kFenceMagic) return invalid("args.wait_fences[" + std::to_string(i) + "] is not a fence");
      waits.push_back(f->state);
    }
    std::shared_ptr<FenceState> signal;
    if (args->signal_fence != nullptr) {
      if (args->signal_fence->magic != kFenceMagic) return invalid("args.signal_fence is not a fence");
      // ABI 1.1: a fence that signaled an earlier execution is re-armed.
      auto fresh = std::make_shared<FenceState>();
      fresh->worker = args->signal_fence->state->worker;
      args->signal_fence->state = fresh;
      signal = std::move(fresh);
    }
    loom_plugin_t* plugin = exe->device->plugin;
    misbehave(plugin->config.misbehave, "execute");
    if (kDefect == Defect::kExecuteCrash) {
      volatile int* nowhere = nullptr;
      *nowhere = 1;
    }
    if (kDefect == Defect::kFenceNeverSignals && signal) return nullptr;
    if (kDefect == Defect::kRace && output.bytes <= plugin->shared_scratch.size()) {
      // Computes into the shared area, then copies out: two calls at once
      // hand each other their results.
      wait_all(waits);
      ResolvedTensor scratch = output;
      scratch.data = plugin->shared_scratch.data();
      compute(exe->op, inputs, scratch);
      std::this_thread::yield();
      std::memcpy(output.data, scratch.data, output.bytes);
      if (signal) signal->signal(LOOM_STATUS_OK, "");
      return nullptr;
    }
    const bool lost = plugin->config.lose.count(exe->device->index) != 0;
    const bool hang = plugin->config.hang.count(exe->device->index) != 0;
    const bool fail = plugin->config.fail_execute || lost;
    const loom_status_code_t fail_code = lost ? LOOM_STATUS_DEVICE_LOST : LOOM_STATUS_INTERNAL;
    const std::string failure = lost ? "device " + exe->device->uri + " is lost (fake.lose)"
                                     : "execute fails (fake.fail_execute=1)";

    if (plugin->config.async && signal) {
      uint64_t delay = plugin->config.async_delay_ms;
      Op op = exe->op;
      // The worker starts this once every wait fence is signaled.
      plugin->worker->submit(std::move(waits), signal, [=] {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay));
        if (hang) return;  // the fence is never signaled
        if (fail) {
          signal->signal(fail_code, std::string(kName) + ": " + failure);
          return;
        }
        compute(op, inputs, output);
        signal->signal(LOOM_STATUS_OK, "");
      });
      return nullptr;
    }
    wait_all(waits);
    if (fail) {
      if (signal) signal->signal(fail_code, std::string(kName) + ": " + failure);
      return make_status(fail_code, failure);
    }
    compute(exe->op, inputs, output);
    if (signal) signal->signal(LOOM_STATUS_OK, "");
    return nullptr;
  });
}

// ---- ABI 1.1 -------------------------------------------------------------

loom_status_t* executable_estimate(loom_executable_estimate_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("executable_estimate args is NULL");
    if (args->struct_size < LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE) {
      return invalid("executable_estimate args.struct_size too small");
    }
    args->out_time_ns = 0;
    Op op;
    if (loom_status_t* st = check_blob(args->device, args->loader_key, args->format_version, args->blob,
                                       args->blob_size, &op)) {
      return st;
    }
    const auto& estimates = args->device->plugin->config.estimate_ns;
    if (!estimates.empty()) args->out_time_ns = estimates[args->device->index % estimates.size()];
    return nullptr;
  });
}

// ---- compile -------------------------------------------------------------

loom_status_t* compile_supported(loom_compile_supported_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("compile_supported args is NULL");
    if (args->struct_size < LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE) return invalid("compile_supported args.struct_size too small");
    if (args->plugin == nullptr) return invalid("args.plugin is NULL");
    std::string error = fake_compile::supported(args->plugin->config.compile_ops, args->graph, args->graph_size,
                                                args->node_count, args->out_supported);
    return error.empty() ? nullptr : invalid(error);
  });
}

loom_status_t* compile(loom_compile_args_t* args) {
  return guarded([&]() -> loom_status_t* {
    if (args == nullptr) return invalid("compile args is NULL");
    if (args->struct_size < LOOM_COMPILE_ARGS_STRUCT_SIZE) return invalid("compile args.struct_size too small");
    if (args->plugin == nullptr) return invalid("args.plugin is NULL");
    const Config& config = args->plugin->config;
    std::string blob;
    std::string error = fake_compile::compile(config.compile_ops, args->graph, args->graph_size, &blob);
    if (!error.empty()) return invalid(error);
    if (config.compile_fault == "fail") return make_status(LOOM_STATUS_INTERNAL, "compile fails (fake.compile_fault=fail)");
    const loom_host_services_t* host = args->plugin->host;
    if (host == nullptr || host->allocate == nullptr) return make_status(LOOM_STATUS_INTERNAL, "no host allocator");
    void* memory = host->allocate(host->user_data, blob.size(), 16);
    if (memory == nullptr) return make_status(LOOM_STATUS_RESOURCE_EXHAUSTED, "blob allocation failed");
    std::memcpy(memory, blob.data(), blob.size());
    args->out_blob = memory;
    args->out_blob_size = blob.size();
    args->out_loader_key = kLoaderKey;
    args->out_format_version = 1;
    if (config.compile_fault == "null_blob") {
      host->free(host->user_data, memory);
      args->out_blob = nullptr;
    } else if (config.compile_fault == "bad_key") {
      args->out_loader_key = "not-a-key";
    } else if (config.compile_fault == "bad_version") {
      args->out_format_version = 9;
    } else if (config.compile_fault == "new_blob") {
      // The blob in memory the host did not allocate; kept to be freed at
      // plugin_destroy, since the host must not free it.
      host->free(host->user_data, memory);
      auto own = std::make_unique<char[]>(blob.size());
      std::memcpy(own.get(), blob.data(), blob.size());
      args->out_blob = own.get();
      std::lock_guard<std::mutex> lock(args->plugin->objects_mutex);
      args->plugin->own_blobs.push_back(std::move(own));
    }
    return nullptr;
  });
}

// ---- tables --------------------------------------------------------------

// The large variant appends fields a future minor version might add; the
// host must accept the struct and ignore them.
struct LargeApi {
  loom_plugin_api_t api;
  void* future_entries[4];
};
struct LargeLoaderKey {
  loom_loader_key_t key;
  uint64_t future_field;
};
struct LargeInfo {
  loom_plugin_info_t info;
  uint64_t future_field;
};

// The normal build speaks 1.0 and 1.1 (with executable_estimate); the others
// stand for 1.0 plugins (or misbehave).
constexpr bool kSpeaks11 = kVariant == Variant::kNormal;

template <uint32_t kVersion>
const LargeApi& api_table() {
  static const LargeApi table = [] {
    LargeApi t{};
    loom_plugin_api_t& a = t.api;
    a.struct_size = kVariant == Variant::kLarge ? sizeof(LargeApi)
                    : kVariant == Variant::kSmall ? offsetof(loom_plugin_api_t, compile)
                    : kVersion >= LOOM_ABI_VERSION(1, 1) ? LOOM_PLUGIN_API_V1_1_SIZE
                                                         : LOOM_PLUGIN_API_V1_0_SIZE;
    a.abi_version = kVariant == Variant::kAbi2 ? LOOM_ABI_VERSION(2, 0)
                    : kVariant == Variant::kBadVersion ? LOOM_ABI_VERSION(1, 7)
                                                       : kVersion;
    a.status_code = status_code;
    a.status_message = status_message;
    a.status_destroy = status_destroy;
    a.plugin_info = plugin_info;
    a.plugin_create = plugin_create;
    a.plugin_destroy = plugin_destroy;
    a.plugin_check_available = plugin_check_available;
    a.device_count = device_count;
    a.device_get = device_get;
    a.device_info = device_info;
    a.executable_check = executable_check;
    a.executable_load = executable_load;
    a.executable_destroy = executable_destroy;
    a.execute = execute;
    a.buffer_allocate = buffer_allocate;
    a.buffer_free = buffer_free;
    a.buffer_map = buffer_map;
    a.buffer_unmap = buffer_unmap;
    a.buffer_copy_from_host = buffer_copy_from_host;
    a.buffer_copy_to_host = buffer_copy_to_host;
    a.buffer_import_host = kVariant == Variant::kNormal ? buffer_import_host : nullptr;
    a.fence_create = fence_create;
    a.fence_destroy = fence_destroy;
    a.fence_signal = fence_signal;
    a.fence_wait = kVariant == Variant::kNullEntry ? nullptr : fence_wait;
    a.fence_query = fence_query;
    // Only the normal build compiles; the others stand for run-only plugins.
    a.compile_supported = kVariant == Variant::kNormal ? compile_supported : nullptr;
    a.compile = kVariant == Variant::kNormal ? compile : nullptr;
    if constexpr (kVersion >= LOOM_ABI_VERSION(1, 1)) a.executable_estimate = executable_estimate;
    return t;
  }();
  return table;
}

const loom_plugin_info_t* plugin_info() {
  constexpr bool large = kVariant == Variant::kLarge;
  static const LargeLoaderKey key{
      {large ? sizeof(LargeLoaderKey) : LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey, 0, 1}, 0};
  static const loom_loader_key_t* const keys[] = {&key.key};
  static const LargeInfo info{
      {large ? sizeof(LargeInfo) : LOOM_PLUGIN_INFO_STRUCT_SIZE, kName, "Loom tests", "1.0.0", 1, keys}, 0};
  return &info.info;
}

}  // namespace

// The no-entry variant exports its query under another name, so the library
// is well-formed but lacks LOOM_PLUGIN_ENTRY_POINT_NAME.
#if defined(FAKE_NO_ENTRY)
#define FAKE_ENTRY_NAME fake_query_under_another_name
#else
#define FAKE_ENTRY_NAME loom_plugin_query
#endif

extern "C" LOOM_PLUGIN_EXPORT loom_status_code_t FAKE_ENTRY_NAME(loom_plugin_query_t* query) {
  if (query == nullptr || query->struct_size < LOOM_PLUGIN_QUERY_STRUCT_SIZE) return LOOM_STATUS_INVALID_ARGUMENT;
  const std::string fault = misbehave_from_environment();
  misbehave(fault, "query");
  if (fault == "reason_overflow" && query->reason != nullptr) {
    std::memset(query->reason, 'x', query->reason_capacity + 65536);
    return LOOM_STATUS_INCOMPATIBLE;
  }
  auto refuse = [query](const std::string& reason) {
    if (query->reason != nullptr && query->reason_capacity > 0) {
      size_t n = std::min(reason.size(), query->reason_capacity - 1);
      std::memcpy(query->reason, reason.data(), n);
      query->reason[n] = '\0';
    }
    return LOOM_STATUS_INCOMPATIBLE;
  };
  if (kVariant == Variant::kRefuses) return refuse(std::string(kName) + " refuses every host (test variant)");
  const bool answer11 = kSpeaks11 && query->host_abi_max >= LOOM_ABI_VERSION(1, 1) &&
                        query->host_abi_min <= LOOM_ABI_VERSION(1, 1);
  const LargeApi& table = answer11 ? api_table<LOOM_ABI_VERSION(1, 1)>()
                                   : api_table<LOOM_ABI_VERSION(1, 0)>();
  const uint32_t version = table.api.abi_version;
  if (kVariant != Variant::kBadVersion && (version < query->host_abi_min || version > query->host_abi_max)) {
    return refuse(std::string(kName) + " speaks only ABI " + std::to_string(LOOM_ABI_VERSION_MAJOR_OF(version)) + "." +
                  std::to_string(LOOM_ABI_VERSION_MINOR_OF(version)));
  }
  query->out_abi_version = version;
  query->out_api = kVariant == Variant::kNullApi ? nullptr : &table.api;
  return LOOM_STATUS_OK;
}
