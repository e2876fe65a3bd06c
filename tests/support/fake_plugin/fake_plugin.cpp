// The fake plugin: a small, strict backend for testing the host and the
// runtime, built on loom/plugin.hpp (the classes of fake_objects.hpp). One
// set of sources built several times; FAKE_NAME and FAKE_VARIANT (a Variant
// enumerator) pick the plugin name and how it misbehaves. What plugin.hpp
// cannot express on purpose (the exported query and the ABI-level broken
// variants) is in fake_abi_variants.cpp.
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
// buffer); both are in fake_abi_variants.cpp.
// At plugin_destroy it logs any objects the host leaked ("leaked 2 buffers")
// and frees them.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fake_compile.hpp"
#include "fake_objects.hpp"
#include "fake_raw.h"
#include "loom/plugin.hpp"
#include "loom/sdk/graph.hpp"

namespace fake {

namespace {

Status parse_flag(const char* key, const char* value, bool* out) {
  if (std::strcmp(value, "0") == 0 || std::strcmp(value, "1") == 0) {
    *out = value[0] == '1';
    return Status();
  }
  return invalid(std::string("option ") + key + " must be 0 or 1, got '" + value + "'");
}

Status parse_count(const char* key, const char* value, uint64_t max, uint64_t* out) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(value, &end, 10);
  if (value[0] == '\0' || value[0] == '-' || *end != '\0' || v > max) {
    return invalid(std::string("option ") + key + " must be a number 0-" + std::to_string(max) +
                   ", got '" + value + "'");
  }
  *out = v;
  return Status();
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

Status parse_option(const loom_option_t* option, size_t i, Config* config) {
  const std::string where = "options[" + std::to_string(i) + "]";
  if (option == nullptr) return invalid(where + " is NULL");
  if (option->struct_size < LOOM_OPTION_STRUCT_SIZE) return invalid(where + ".struct_size too small");
  if (option->key == nullptr || option->value == nullptr) return invalid(where + " key or value is NULL");
  const std::string key = option->key;
  const char* value = option->value;
  uint64_t n = 0;
  Status st;
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
      LOOM_SDK_RETURN_IF_ERROR(parse_count(option->key, item.c_str(), UINT64_C(1) << 40, &n));
      config->estimate_ns.push_back(n);
    }
  } else if (key == "fake.fail_load" || key == "fake.lose" || key == "fake.hang") {
    std::set<size_t>& devices = key == "fake.fail_load" ? config->fail_load
                                : key == "fake.lose"    ? config->lose
                                                        : config->hang;
    for (const std::string& item : split_list(value)) {
      LOOM_SDK_RETURN_IF_ERROR(parse_count(option->key, item.c_str(), 63, &n));
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

}  // namespace

// ---- plugin ----------------------------------------------------------------

const loom_plugin_info_t* Impl::info() { return fake_plugin_info(); }

Status Impl::create(const loom::sdk::CreateContext& ctx, std::unique_ptr<Plugin>* out) {
  Config config;
  for (size_t i = 0; i < ctx.options.size(); ++i) {
    LOOM_SDK_RETURN_IF_ERROR(parse_option(&ctx.options[i], i, &config));
  }
  fake_misbehave(config.misbehave.c_str(), "create");
  if (config.fail_create) return error(LOOM_STATUS_INTERNAL, "plugin_create fails (fake.fail_create=1)");
  auto plugin = std::make_unique<Plugin>(ctx.host, config);
  const Config& c = plugin->config_;
  if (fake::defect() == Defect::kLeak) {
    char* lost = new char[256 * 1024];
    std::memset(lost, 1, 256 * 1024);
    plugin->log(LOOM_LOG_DEBUG, lost[7] == 1 ? "leaking 256 KiB (defect)" : "");
  }
  if (fake::defect() == Defect::kRace) plugin->shared_scratch_.resize(1 << 20);
  uint64_t caps = c.async || fake::defect() == Defect::kFenceNeverSignals ? LOOM_DEVICE_CAP_ASYNC : 0;
  caps |= c.separate_memory ? 0 : (LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE | LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY);
  caps |= c.import ? LOOM_DEVICE_CAP_HOST_POINTER_IMPORT : 0;
  for (size_t i = 0; i < c.devices; ++i) {
    plugin->devices_.push_back(std::make_unique<Device>(plugin.get(), i, caps));
  }
  if (c.async) plugin->worker_ = std::make_unique<fake_async::Worker>(c.async_order, c.async_hold);
  plugin->log(LOOM_LOG_DEBUG, "created with " + std::to_string(c.devices) + " devices");
  *out = std::move(plugin);
  return Status();
}

Plugin::~Plugin() {
  worker_.reset();  // finishes the queued executions first
  std::set<Executable*> executables;
  std::set<Buffer*> buffers;
  std::set<Fence*> fences;
  {
    std::lock_guard<std::mutex> lock(objects_mutex_);
    executables.swap(executables_);
    buffers.swap(buffers_);
    fences.swap(fences_);
  }
  std::string leaks;
  auto report = [&leaks](size_t n, const char* what) {
    if (n != 0) leaks += (leaks.empty() ? "" : ", ") + std::to_string(n) + " " + what;
  };
  report(executables.size(), "executables");
  report(buffers.size(), "buffers");
  report(fences.size(), "fences");
  if (!leaks.empty()) log(LOOM_LOG_WARNING, "leaked " + leaks);
  for (auto* e : executables) delete e;
  for (auto* b : buffers) delete b;
  for (auto* f : fences) delete f;
}

Status Plugin::check_available() {
  if (fake::variant() == Variant::kUnavailable) {
    return error(LOOM_STATUS_UNAVAILABLE, "no fake hardware present (test variant)");
  }
  return Status();
}

size_t Plugin::device_count() {
  return config_.claimed_devices != 0 ? config_.claimed_devices : devices_.size();
}

Device* Plugin::device(size_t index) {
  return index < devices_.size() ? devices_[index].get() : nullptr;
}

Status Plugin::count_fence() {
  std::lock_guard<std::mutex> lock(objects_mutex_);
  if (config_.max_fences != 0 && fences_created_ >= config_.max_fences) {
    return error(LOOM_STATUS_RESOURCE_EXHAUSTED, "fence_create: fake.max_fences=" +
                                                     std::to_string(config_.max_fences) +
                                                     " fences made already");
  }
  ++fences_created_;
  return Status();
}

void Plugin::keep_blob(std::unique_ptr<char[]> blob) {
  std::lock_guard<std::mutex> lock(objects_mutex_);
  own_blobs_.push_back(std::move(blob));
}

Status Plugin::compile_supported(const loom::sdk::GraphView& graph, loom::sdk::Claims* claims) {
  return fake_compile::supported(config_.compile_ops, graph, claims);
}

Status Plugin::compile(const loom::sdk::GraphView& graph, const loom::sdk::Options&,
                       loom::sdk::CompiledBlob* out) {
  std::string blob;
  const std::string message = fake_compile::compile(config_.compile_ops, graph, &blob);
  if (!message.empty()) return invalid(message);
  // The other faults break the result after the helper made it
  // (fake_abi_variants.cpp).
  if (config_.compile_fault == "fail") {
    return error(LOOM_STATUS_INTERNAL, "compile fails (fake.compile_fault=fail)");
  }
  out->bytes.assign(blob.begin(), blob.end());
  out->loader_key = fake::name();
  out->format_version = 1;
  out->alignment = 16;
  return Status();
}

// ---- devices ---------------------------------------------------------------

Device::Device(Plugin* plugin, size_t index, uint64_t capabilities)
    : plugin_(plugin),
      index_(index),
      uri_(std::string(fake::variant() == Variant::kBadUri ? "other-plugin" : fake::name()) + "://" +
           std::to_string(index)),
      name_("Fake device " + std::to_string(index)),
      capabilities_(capabilities) {}

void Device::info(loom_device_info_t* full) {
  const Config& c = plugin_->config();
  full->uri = c.null_uri ? nullptr : uri_.c_str();
  full->name = name_.c_str();
  full->kind = c.kinds.empty() ? LOOM_DEVICE_KIND_VIRTUAL : c.kinds[index_ % c.kinds.size()];
  full->device_memory_bytes = kMaxBufferBytes;
  full->host_visible_memory_bytes = c.separate_memory ? 0 : kMaxBufferBytes;
  full->capabilities = capabilities_;
  full->dtype_mask = LOOM_DTYPE_BIT(LOOM_DTYPE_F32);
}

Status Device::check_blob(const loom::sdk::Blob& blob, Op* op) const {
  if (std::strcmp(blob.loader_key, fake::name()) != 0) {
    return error(LOOM_STATUS_INCOMPATIBLE, std::string("loader key '") + blob.loader_key +
                                               "' is not served (serves '" + fake::name() + "')");
  }
  if (blob.format_version > 1) {
    return error(LOOM_STATUS_INCOMPATIBLE,
                 "format version " + std::to_string(blob.format_version) + " is not 0-1");
  }
  std::string_view text(static_cast<const char*>(blob.data), blob.size);
  if (text == "fake:add") {
    *op = Op::kAdd;
  } else if (text == "fake:copy") {
    *op = Op::kCopy;
  } else if (fake::defect() == Defect::kCorruptBlobs) {
    *op = Op::kCopy;
  } else {
    return error(LOOM_STATUS_INCOMPATIBLE, "unknown fake blob (" + std::to_string(blob.size) + " bytes)");
  }
  return Status();
}

Status Device::check_executable(const loom::sdk::Blob& blob) {
  Op op;
  return check_blob(blob, &op);
}

Status Device::load_executable(const loom::sdk::Blob& blob, const loom::sdk::Options&,
                               std::unique_ptr<Executable>* out) {
  Op op;
  LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, &op));
  if (plugin_->config().fail_load.count(index_) != 0) {
    return error(LOOM_STATUS_RESOURCE_EXHAUSTED, "device " + uri_ + " is out of memory (fake.fail_load)");
  }
  *out = std::make_unique<Executable>(this, op);
  plugin_->track(out->get());
  return Status();
}

// ABI 1.1.
Status Device::estimate_executable(const loom::sdk::Blob& blob, uint64_t* out_time_ns) {
  Op op;
  LOOM_SDK_RETURN_IF_ERROR(check_blob(blob, &op));
  const auto& estimates = plugin_->config().estimate_ns;
  if (!estimates.empty()) *out_time_ns = estimates[index_ % estimates.size()];
  return Status();
}

// ---- execution ---------------------------------------------------------------

Executable::~Executable() { device_->plugin()->untrack(this); }

namespace {

struct ResolvedTensor {
  std::byte* data = nullptr;
  uint64_t bytes = 0;
  std::vector<int64_t> shape;
};

// What plugin.hpp leaves to the plugin (it checked struct_size, rank and
// shape): the dtype, the sizes and where the data is.
Status resolve_tensor(const Device* device, const loom_tensor_t* t, const std::string& where,
                      ResolvedTensor* out) {
  if (t->dtype != LOOM_DTYPE_F32) return invalid(where + ".dtype must be f32");
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
    if (!(device->capabilities() & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE)) {
      return invalid(where + ".host_data is set but the device needs buffers (fake.separate_memory=1)");
    }
    out->data = static_cast<std::byte*>(t->host_data) + t->offset;
    return Status();
  }
  auto* buffer = reinterpret_cast<Buffer*>(const_cast<loom_buffer_t*>(t->buffer));
  if (buffer->magic != kBufferMagic || buffer->device()->plugin() != device->plugin()) {
    return invalid(where + ".buffer is not a buffer of this plugin");
  }
  if (t->offset > buffer->size() || t->byte_size > buffer->size() - t->offset) {
    return invalid(where + " (offset " + std::to_string(t->offset) + ", " + std::to_string(t->byte_size) +
                   " bytes) exceeds its buffer of " + std::to_string(buffer->size()) + " bytes");
  }
  out->data = buffer->data() + t->offset;
  return Status();
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
    float sum = fake::defect() == Defect::kWrongResults ? a - b : a + b;
    std::memcpy(out.data + i, &sum, 4);
  }
}

void wait_all(const std::vector<std::shared_ptr<FenceState>>& fences) {
  for (const auto& f : fences) {
    std::unique_lock<std::mutex> lock(f->mutex);
    f->cv.wait(lock, [&] { return f->signaled; });
  }
}

}  // namespace

Status Executable::execute(const loom::sdk::ExecuteCallT<Fence>& call) {
  if (magic != kExecutableMagic) return invalid("args.executable is not an executable of this plugin");
  const size_t want_inputs = op_ == Op::kAdd ? 2 : 1;
  if (call.input_count != want_inputs) {
    return invalid("args.input_count is " + std::to_string(call.input_count) + ", the blob takes " + std::to_string(want_inputs));
  }
  if (call.output_count != 1) return invalid("args.output_count is " + std::to_string(call.output_count) + ", the blob makes 1");
  std::vector<ResolvedTensor> inputs(want_inputs);
  for (size_t i = 0; i < want_inputs; ++i) {
    LOOM_SDK_RETURN_IF_ERROR(resolve_tensor(device_, call.inputs[i], "inputs[" + std::to_string(i) + "]", &inputs[i]));
  }
  ResolvedTensor output;
  LOOM_SDK_RETURN_IF_ERROR(resolve_tensor(device_, call.outputs[0], "outputs[0]", &output));
  for (size_t i = 0; i < want_inputs; ++i) {
    if (inputs[i].shape != output.shape) return invalid("inputs[" + std::to_string(i) + "].shape differs from outputs[0].shape");
  }
  std::vector<std::shared_ptr<FenceState>> waits;
  for (size_t i = 0; i < call.wait_fence_count; ++i) {
    Fence* f = call.wait_fence(i);
    if (f->magic != kFenceMagic) return invalid("args.wait_fences[" + std::to_string(i) + "] is not a fence");
    waits.push_back(f->state());
  }
  std::shared_ptr<FenceState> signal;
  if (call.signal_fence != nullptr) {
    if (call.signal_fence->magic != kFenceMagic) return invalid("args.signal_fence is not a fence");
    signal = call.signal_fence->rearm();
  }
  Plugin* plugin = device_->plugin();
  const Config& config = plugin->config();
  fake_misbehave(config.misbehave.c_str(), "execute");
  if (fake::defect() == Defect::kExecuteCrash) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  }
  if (fake::defect() == Defect::kFenceNeverSignals && signal) return Status();
  if (fake::defect() == Defect::kRace && output.bytes <= plugin->shared_scratch().size()) {
    // Computes into the shared area, then copies out: two calls at once
    // hand each other their results.
    wait_all(waits);
    ResolvedTensor scratch = output;
    scratch.data = plugin->shared_scratch().data();
    compute(op_, inputs, scratch);
    std::this_thread::yield();
    std::memcpy(output.data, scratch.data, output.bytes);
    if (signal) signal->signal(LOOM_STATUS_OK, "");
    return Status();
  }
  const bool lost = config.lose.count(device_->index()) != 0;
  const bool hang = config.hang.count(device_->index()) != 0;
  const bool fail = config.fail_execute || lost;
  const loom_status_code_t fail_code = lost ? LOOM_STATUS_DEVICE_LOST : LOOM_STATUS_INTERNAL;
  const std::string failure = lost ? "device " + device_->uri() + " is lost (fake.lose)"
                                   : "execute fails (fake.fail_execute=1)";

  if (config.async && signal) {
    uint64_t delay = config.async_delay_ms;
    Op op = op_;
    // The worker starts this once every wait fence is signaled.
    plugin->worker()->submit(std::move(waits), signal, [=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      if (hang) return;  // the fence is never signaled
      if (fail) {
        signal->signal(fail_code, std::string(fake::name()) + ": " + failure);
        return;
      }
      compute(op, inputs, output);
      signal->signal(LOOM_STATUS_OK, "");
    });
    return Status();
  }
  wait_all(waits);
  if (fail) {
    if (signal) signal->signal(fail_code, std::string(fake::name()) + ": " + failure);
    return error(fail_code, failure);
  }
  compute(op_, inputs, output);
  if (signal) signal->signal(LOOM_STATUS_OK, "");
  return Status();
}

}  // namespace fake

// ---- the seam to fake_abi_variants.cpp (fake_raw.h) -------------------------

namespace {
loom::sdk::detail::PluginBox<fake::Plugin>* box_of(loom_plugin_t* plugin) {
  return reinterpret_cast<loom::sdk::detail::PluginBox<fake::Plugin>*>(plugin);
}
}  // namespace

extern "C" const loom_plugin_api_t* fake_sdk_api(uint32_t version) {
  return loom::sdk::make_api_for<fake::Impl>(version);
}

extern "C" const char* fake_compile_fault(loom_plugin_t* plugin) {
  return box_of(plugin)->impl->config().compile_fault.c_str();
}

extern "C" const loom_host_services_t* fake_host(loom_plugin_t* plugin) {
  return box_of(plugin)->host;
}

extern "C" void* fake_keep_blob_copy(loom_plugin_t* plugin, const void* bytes, size_t size) {
  auto own = std::make_unique<char[]>(size);
  std::memcpy(own.get(), bytes, size);
  void* result = own.get();
  box_of(plugin)->impl->keep_blob(std::move(own));
  return result;
}

extern "C" loom_status_t* fake_make_status(loom_status_code_t code, const char* message) {
  return loom::sdk::Status(code, message).to_c();
}
