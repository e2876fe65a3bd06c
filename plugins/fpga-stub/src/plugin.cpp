// The fpga-stub plugin's C ABI, a table of its own rather than LOOM_SDK_DEFINE_ENTRY's:
// every entry that takes a buffer, fence or executable goes through the
// HandleTable, so stale and foreign handles get an error instead of a crash.
// loom/plugin.hpp still provides the status object, options and the public
// checks for raw tables (check_struct_size, check_execute_tensors,
// destroy_c_status).
#include "bind.hpp"
#include "plugin.hpp"
#include "node_check.hpp"

#include <cstring>

#ifndef LOOM_FPGA_STUB_VERSION
#define LOOM_FPGA_STUB_VERSION "0.0.0"
#endif

namespace loom::fpga_stub {

Plugin::Plugin(const Config& config, const loom_host_services_t* host)
    : config_(config), host_(host), handles_(host) {
  for (size_t i = 0; i < config_.devices; ++i) devices_.push_back(std::make_unique<Device>(i, config_, host, &handles_));
}

Plugin::~Plugin() { handles_.clear(); }

namespace {


template <typename Fn>
loom_status_t* guard(const char* entry, Fn&& fn) noexcept {
  try {
    return fn().to_c();
  } catch (const std::bad_alloc&) {
    return sdk::resource_exhausted(std::string(entry) + ": out of host memory").to_c();
  } catch (const std::exception& e) {
    return sdk::internal_error(std::string(entry) + ": unexpected exception: " + e.what()).to_c();
  } catch (...) {
    return sdk::internal_error(std::string(entry) + ": unexpected exception").to_c();
  }
}

Plugin* plugin_of(loom_plugin_t* p) { return reinterpret_cast<Plugin*>(p); }
Device* device_of(loom_device_t* d) { return reinterpret_cast<Device*>(d); }

// --------------------------------------------------------------- status, plugin

loom_status_code_t status_code(const loom_status_t* s) { return s == nullptr ? LOOM_STATUS_OK : s->code; }
const char* status_message(const loom_status_t* s) { return s == nullptr ? "" : s->message.c_str(); }
void status_destroy(loom_status_t* s) {
  sdk::destroy_c_status(s);
}

const loom_plugin_info_t* plugin_info() {
  static const loom_loader_key_t kKey = {LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey, kMinFormatVersion,
                                         kFormatVersion};
  static const loom_loader_key_t* const kKeys[] = {&kKey};
  static const loom_plugin_info_t kInfo = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "fpga-stub", "Loom",
                                           LOOM_FPGA_STUB_VERSION, 1, kKeys,
                                           LOOM_PLUGIN_CAP_OPEN_SHAPES};
  return &kInfo;
}

loom_status_t* plugin_create(loom_plugin_create_args_t* args) {
  return guard("plugin_create", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("plugin_create: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("plugin_create", "loom_plugin_create_args_t", args->struct_size,
                                        LOOM_PLUGIN_CREATE_ARGS_STRUCT_SIZE));
    args->out_plugin = nullptr;
    LOOM_SDK_RETURN_IF_ERROR(sdk::Options::validate(args->options, args->option_count, "option"));
    Config config;
    LOOM_SDK_RETURN_IF_ERROR(Config::parse(sdk::Options(args->options, args->option_count), &config));
    if (config.faults.init) {
      return sdk::unavailable("fpga-stub: plugin_create: the accelerator failed to initialize "
                              "(injected: fpga.fault.init=1)");
    }
    args->out_plugin = reinterpret_cast<loom_plugin_t*>(new Plugin(config, args->host));
    return Status();
  });
}

void plugin_destroy(loom_plugin_t* p) {
  try {
    delete plugin_of(p);
  } catch (...) {
  }
}

loom_status_t* plugin_check_available(loom_plugin_t* p) {
  return guard("plugin_check_available", [&]() -> Status {
    if (p == nullptr) return sdk::invalid_argument("plugin_check_available: plugin is NULL");
    return Status();
  });
}

Status check_enumeration(Plugin* plugin, const char* entry) {
  if (plugin->config().faults.enumerate) {
    return sdk::unavailable(std::string("fpga-stub: ") + entry +
                            ": device enumeration failed (injected: fpga.fault.enumerate=1)");
  }
  return Status();
}

loom_status_t* device_count(loom_plugin_t* p, size_t* out_count) {
  return guard("device_count", [&]() -> Status {
    if (p == nullptr || out_count == nullptr) return sdk::invalid_argument("device_count: plugin or out_count is NULL");
    *out_count = 0;
    LOOM_SDK_RETURN_IF_ERROR(check_enumeration(plugin_of(p), "device_count"));
    *out_count = plugin_of(p)->device_count();
    return Status();
  });
}

loom_status_t* device_get(loom_plugin_t* p, size_t index, loom_device_t** out_device) {
  return guard("device_get", [&]() -> Status {
    if (p == nullptr || out_device == nullptr) return sdk::invalid_argument("device_get: plugin or out_device is NULL");
    *out_device = nullptr;
    LOOM_SDK_RETURN_IF_ERROR(check_enumeration(plugin_of(p), "device_get"));
    Device* d = plugin_of(p)->device(index);
    if (d == nullptr) {
      return sdk::not_found("device_get: no device " + std::to_string(index) + " (fpga-stub has " +
                            std::to_string(plugin_of(p)->device_count()) + ", see fpga.devices)");
    }
    *out_device = reinterpret_cast<loom_device_t*>(d);
    return Status();
  });
}

loom_status_t* device_info(loom_device_t* d, loom_device_info_t* info) {
  return guard("device_info", [&]() -> Status {
    if (d == nullptr || info == nullptr) return sdk::invalid_argument("device_info: device or info is NULL");
    if (info->struct_size < sizeof(size_t)) return sdk::invalid_argument("device_info: info->struct_size is too small");
    loom_device_info_t full{};
    device_of(d)->info(&full);
    const size_t fit = info->struct_size < sizeof full ? info->struct_size : sizeof full;
    std::memcpy(reinterpret_cast<char*>(info) + sizeof(size_t), reinterpret_cast<const char*>(&full) + sizeof(size_t),
                fit - sizeof(size_t));
    return Status();
  });
}

// --------------------------------------------------------------- executables

Status check_blob(Device* d, const char* entry, const char* key, uint32_t version, const void* blob,
                  size_t size, Bitstream* out) {
  if (key == nullptr) return sdk::invalid_argument(std::string(entry) + ": loader_key is NULL");
  if (blob == nullptr && size != 0) return sdk::invalid_argument(std::string(entry) + ": blob is NULL");
  if (d->config().faults.reject_blob && d->faulty()) {
    return sdk::incompatible(d->uri() + ": " + entry + ": the device rejects the bitstream (injected: fpga.fault.reject_blob=1)");
  }
  if (std::strcmp(key, kLoaderKey) != 0) {
    return sdk::incompatible(d->uri() + ": " + entry + ": fpga-stub serves loader key \"fpga-stub\", not \"" + key + "\"");
  }
  if (version != 0 && (version < kMinFormatVersion || version > kFormatVersion)) {
    return sdk::incompatible(d->uri() + ": " + entry + ": the program records bitstream format " +
                             std::to_string(version) + ", the device reads " + std::to_string(kMinFormatVersion) +
                             " to " + std::to_string(kFormatVersion));
  }
  Status s = decode(blob, size, out);
  if (!s.ok()) return Status(s.code(), d->uri() + ": " + entry + ": " + s.message());
  if (out->footprint() > d->memory_bytes()) {
    return sdk::incompatible(d->uri() + ": " + entry + ": the bitstream needs " + std::to_string(out->footprint()) +
                             " bytes of device memory for weights and activations, the device has " +
                             std::to_string(d->memory_bytes()));
  }
  return Status();
}

loom_status_t* executable_check(loom_executable_check_args_t* args) {
  return guard("executable_check", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("executable_check: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("executable_check", "loom_executable_check_args_t", args->struct_size,
                                        LOOM_EXECUTABLE_CHECK_ARGS_STRUCT_SIZE));
    if (args->device == nullptr) return sdk::invalid_argument("executable_check: device is NULL");
    Bitstream bs;
    return check_blob(device_of(args->device), "executable_check", args->loader_key, args->format_version,
                      args->blob, args->blob_size, &bs);
  });
}

// ABI 1.1: what an execute of the bitstream costs, without loading it. With
// fpga.estimate=device, the device's timing model: a DMA for each input and
// output plus the kernel's MACs and float operations (fpga.clock_mhz,
// fpga.mac_array and the rest shape it). With fpga.estimate=host (the
// default), the simulator's time on this host (host_cost.hpp), plus the
// model's when fpga.realtime=1 spends it as wall time.
loom_status_t* executable_estimate(loom_executable_estimate_args_t* args) {
  return guard("executable_estimate", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("executable_estimate: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("executable_estimate", "loom_executable_estimate_args_t",
                                        args->struct_size, LOOM_EXECUTABLE_ESTIMATE_ARGS_STRUCT_SIZE));
    args->out_time_ns = 0;
    if (args->device == nullptr) return sdk::invalid_argument("executable_estimate: device is NULL");
    Device* d = device_of(args->device);
    Bitstream bs;
    LOOM_SDK_RETURN_IF_ERROR(check_blob(d, "executable_estimate", args->loader_key, args->format_version,
                                        args->blob, args->blob_size, &bs));
    // An open bitstream's time follows the binding, which is not known
    // here: no estimate (execute's timing model runs per binding).
    if (bs.has_open_dims()) return Status();
    const Timing& timing = d->config().timing;
    uint64_t ns = 0;
    for (const auto* list : {&bs.inputs, &bs.outputs}) {
      for (uint32_t t : *list) ns += timing.dma_ns(bs.tensors[t].bytes);
    }
    NodeCost cost;
    for (const BsNode& node : bs.nodes) {
      const NodeCost nc = node_cost(bs, node);
      cost.int8_macs += nc.int8_macs;
      cost.f32_ops += nc.f32_ops;
    }
    ns += timing.kernel_ns(cost.int8_macs, cost.f32_ops);
    if (d->config().estimate == Estimate::kHost) {
      // The simulator computes on the host: without fpga.realtime the
      // device's time is only traced, with it both are spent.
      uint64_t host_ns = 0;
      LOOM_SDK_RETURN_IF_ERROR(d->host_cost().estimate(bs, &host_ns));
      ns = d->config().realtime ? ns + host_ns : host_ns;
    }
    args->out_time_ns = ns == 0 ? 1 : ns;
    return Status();
  });
}

loom_status_t* executable_load(loom_executable_load_args_t* args) {
  return guard("executable_load", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("executable_load: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("executable_load", "loom_executable_load_args_t", args->struct_size,
                                        LOOM_EXECUTABLE_LOAD_ARGS_STRUCT_SIZE));
    args->out_executable = nullptr;
    if (args->device == nullptr) return sdk::invalid_argument("executable_load: device is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::Options::validate(args->specs, args->spec_count, "compile spec"));
    Device* d = device_of(args->device);
    LOOM_SDK_RETURN_IF_ERROR(d->check_alive("executable_load"));
    auto program = std::make_shared<Program>();
    LOOM_SDK_RETURN_IF_ERROR(check_blob(d, "executable_load", args->loader_key, args->format_version, args->blob,
                                        args->blob_size, &program->bs));
    LOOM_SDK_RETURN_IF_ERROR(d->allocate(program->bs.weights.size(), "executable_load (weights)", &program->weights));
    // An open bitstream's activations are reserved per execution, at the
    // sizes of its binding.
    if (!program->bs.has_open_dims()) {
      LOOM_SDK_RETURN_IF_ERROR(
          d->allocate(program->bs.activation_bytes, "executable_load (activations)", &program->activations));
    }
    Submission s;
    s.entry = "executable_load (weights upload)";
    Command c;
    c.kind = Command::Kind::kDmaToDevice;
    c.target = program->weights;
    c.staging = std::make_shared<std::vector<std::byte>>(program->bs.weights);
    s.commands.push_back(std::move(c));
    LOOM_SDK_RETURN_IF_ERROR(d->run_sync(std::move(s)));
    auto object = std::make_shared<ExecutableObject>(ExecutableObject{d, std::move(program)});
    args->out_executable = static_cast<loom_executable_t*>(d->handles()->add(HandleKind::kExecutable, object));
    return Status();
  });
}

// Destroy entries return nothing: a stale or foreign handle is reported
// through the host's log (HandleTable::remove) and otherwise ignored.
template <typename T>
void destroy_handle(void* handle, HandleKind kind, const char* entry) {
  if (handle == nullptr) return;
  try {
    (void)HandleTable::remove(handle, kind, entry);
  } catch (...) {
  }
}

void executable_destroy(loom_executable_t* e) {
  destroy_handle<ExecutableObject>(e, HandleKind::kExecutable, "executable_destroy");
}

// Checks one execute tensor against the bitstream's and resolves its buffer.
Status bind_tensor(Device* d, const loom_tensor_t& t, const BsTensor& want, const std::string& where,
                   Binding* out) {
  const std::vector<int64_t> got(t.shape, t.shape + t.rank);
  if (t.dtype != want.dtype || got != want.shape || t.byte_size != want.bytes) {
    return sdk::invalid_argument(where + " is " + dtype_label(t.dtype) + " " + shape_label(got) + " (" +
                                 std::to_string(t.byte_size) + " bytes), the bitstream expects " +
                                 dtype_label(want.dtype) + " " + shape_label(want.shape) + " (" +
                                 std::to_string(want.bytes) + " bytes)");
  }
  if (t.host_data != nullptr) {
    return sdk::invalid_argument(where + " is in host memory; " + d->uri() +
                                 " cannot read host memory (no HOST_POINTER_EXECUTE): pass a buffer");
  }
  std::shared_ptr<BufferObject> buffer;
  LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(t.buffer, HandleKind::kBuffer, where.c_str(), &buffer));
  if (buffer->device != d) {
    return sdk::invalid_argument(where + " lies in a buffer of " + buffer->device->uri() + ", not " + d->uri());
  }
  if (t.offset > buffer->size || t.byte_size > buffer->size - t.offset) {
    return sdk::out_of_range(where + " range [" + std::to_string(t.offset) + ", +" + std::to_string(t.byte_size) +
                             ") exceeds its buffer of " + std::to_string(buffer->size) + " bytes");
  }
  *out = Binding{buffer->allocation, t.offset};
  return Status();
}

loom_status_t* execute(loom_execute_args_t* args) {
  return guard("execute", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("execute: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("execute", "loom_execute_args_t", args->struct_size,
                                        LOOM_EXECUTE_ARGS_STRUCT_SIZE));
    std::shared_ptr<ExecutableObject> exe;
    LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(args->executable, HandleKind::kExecutable, "execute", &exe));
    Device* d = exe->device;
    LOOM_SDK_RETURN_IF_ERROR(d->check_alive("execute"));
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_execute_tensors(args->inputs, args->input_count, "input"));
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_execute_tensors(args->outputs, args->output_count, "output"));
    const Bitstream& loaded = exe->program->bs;
    if (args->input_count != loaded.inputs.size() || args->output_count != loaded.outputs.size()) {
      return sdk::invalid_argument(d->uri() + ": execute: the bitstream takes " + std::to_string(loaded.inputs.size()) +
                                   " inputs and " + std::to_string(loaded.outputs.size()) + " outputs, got " +
                                   std::to_string(args->input_count) + " and " + std::to_string(args->output_count));
    }
    Submission s;
    s.entry = "execute";
    Command c;
    c.kind = Command::Kind::kKernel;
    c.program = exe->program;
    if (loaded.has_open_dims()) {
      // ABI 1.2 open shapes: this execution's input shapes bind every
      // tensor; the launch runs (and is timed) at those shapes.
      std::vector<std::vector<int64_t>> shapes(args->input_count);
      for (size_t i = 0; i < shapes.size(); ++i) {
        shapes[i].assign(args->inputs[i]->shape, args->inputs[i]->shape + args->inputs[i]->rank);
      }
      auto bound = std::make_shared<Bitstream>();
      Status bs_status = bind_shapes(loaded, shapes, bound.get());
      if (!bs_status.ok()) return sdk::invalid_argument(d->uri() + ": execute: " + bs_status.message());
      LOOM_SDK_RETURN_IF_ERROR(d->allocate(bound->activation_bytes, "execute (activations)", &c.activations));
      c.bound = std::move(bound);
    }
    const Bitstream& bs = c.bound ? *c.bound : loaded;
    c.io.resize(bs.inputs.size() + bs.outputs.size());
    for (size_t k = 0; k < c.io.size(); ++k) {
      const bool in = k < bs.inputs.size();
      const size_t i = in ? k : k - bs.inputs.size();
      const std::string where = d->uri() + ": execute: " + (in ? "input " : "output ") + std::to_string(i);
      LOOM_SDK_RETURN_IF_ERROR(bind_tensor(d, in ? *args->inputs[i] : *args->outputs[i],
                                           bs.tensors[in ? bs.inputs[i] : bs.outputs[i]], where, &c.io[k]));
    }
    if (args->wait_fence_count != 0 && args->wait_fences == nullptr) {
      return sdk::invalid_argument("execute: wait fences but no array");
    }
    for (size_t i = 0; i < args->wait_fence_count; ++i) {
      std::shared_ptr<FenceObject> f;
      LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(args->wait_fences[i], HandleKind::kFence,
                                                ("execute: wait fence " + std::to_string(i)).c_str(), &f));
      s.waits.push_back(f->state);
    }
    s.commands.push_back(std::move(c));
    if (args->signal_fence == nullptr) return d->run_sync(std::move(s));
    std::shared_ptr<FenceObject> signal;
    LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(args->signal_fence, HandleKind::kFence, "execute: signal fence", &signal));
    // ABI 1.1: the fence may have signaled an earlier execution; it is
    // re-armed with a fresh state for this one.
    signal->state = std::make_shared<FenceState>();
    s.done = signal->state;
    return d->submit(std::move(s));
  });
}

// --------------------------------------------------------------- buffers

loom_status_t* buffer_allocate(loom_buffer_allocate_args_t* args) {
  return guard("buffer_allocate", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("buffer_allocate: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("buffer_allocate", "loom_buffer_allocate_args_t", args->struct_size,
                                        LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE));
    args->out_buffer = nullptr;
    if (args->device == nullptr) return sdk::invalid_argument("buffer_allocate: device is NULL");
    Device* d = device_of(args->device);
    if (args->flags & LOOM_BUFFER_HOST_VISIBLE) {
      return sdk::invalid_argument(d->uri() + ": buffer_allocate: device memory is not host-visible "
                                              "(the device lacks HOST_VISIBLE_MEMORY)");
    }
    if (args->flags != 0) return sdk::invalid_argument(d->uri() + ": buffer_allocate: unknown flags " + std::to_string(args->flags));
    if (args->alignment & (args->alignment - 1) || args->alignment > 256) {
      return sdk::invalid_argument(d->uri() + ": buffer_allocate: alignment " + std::to_string(args->alignment) +
                                   " is not a power of two up to 256");
    }
    auto object = std::make_shared<BufferObject>();
    object->device = d;
    object->size = args->size;
    LOOM_SDK_RETURN_IF_ERROR(d->allocate(args->size, "buffer_allocate", &object->allocation));
    args->out_buffer = static_cast<loom_buffer_t*>(d->handles()->add(HandleKind::kBuffer, object));
    return Status();
  });
}

void buffer_free(loom_buffer_t* b) { destroy_handle<BufferObject>(b, HandleKind::kBuffer, "buffer_free"); }

loom_status_t* buffer_map(loom_buffer_t* b, void** out_pointer) {
  return guard("buffer_map", [&]() -> Status {
    if (out_pointer != nullptr) *out_pointer = nullptr;
    std::shared_ptr<BufferObject> buffer;
    LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(b, HandleKind::kBuffer, "buffer_map", &buffer));
    return sdk::failed_precondition(buffer->device->uri() +
                                    ": buffer_map: device memory is not host-visible; use buffer_copy_to_host "
                                    "and buffer_copy_from_host");
  });
}

void buffer_unmap(loom_buffer_t*) {}

Status copy(loom_buffer_copy_args_t* args, bool up) {
  const char* entry = up ? "buffer_copy_from_host" : "buffer_copy_to_host";
  if (args == nullptr) return sdk::invalid_argument(std::string(entry) + ": args is NULL");
  LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size(entry, "loom_buffer_copy_args_t", args->struct_size,
                                      LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE));
  std::shared_ptr<BufferObject> buffer;
  LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(args->buffer, HandleKind::kBuffer, entry, &buffer));
  Device* d = buffer->device;
  if (args->host_pointer == nullptr && args->size != 0) {
    return sdk::invalid_argument(d->uri() + ": " + entry + ": host_pointer is NULL");
  }
  if (args->buffer_offset > buffer->size || args->size > buffer->size - args->buffer_offset) {
    return sdk::out_of_range(d->uri() + ": " + entry + ": range [" + std::to_string(args->buffer_offset) + ", +" +
                             std::to_string(args->size) + ") exceeds the buffer's " + std::to_string(buffer->size) +
                             " bytes");
  }
  LOOM_SDK_RETURN_IF_ERROR(d->check_alive(entry));
  Submission s;
  s.entry = entry;
  Command c;
  c.kind = up ? Command::Kind::kDmaToDevice : Command::Kind::kDmaToHost;
  c.target = buffer->allocation;
  c.offset = args->buffer_offset;
  const auto* src = static_cast<const std::byte*>(args->host_pointer);
  c.staging = up ? std::make_shared<std::vector<std::byte>>(src, src + args->size)
                 : std::make_shared<std::vector<std::byte>>(args->size);
  auto staging = c.staging;
  s.commands.push_back(std::move(c));
  LOOM_SDK_RETURN_IF_ERROR(d->run_sync(std::move(s)));
  if (!up && args->size != 0) std::memcpy(args->host_pointer, staging->data(), args->size);
  return Status();
}

loom_status_t* buffer_copy_from_host(loom_buffer_copy_args_t* args) {
  return guard("buffer_copy_from_host", [&] { return copy(args, true); });
}
loom_status_t* buffer_copy_to_host(loom_buffer_copy_args_t* args) {
  return guard("buffer_copy_to_host", [&] { return copy(args, false); });
}

// --------------------------------------------------------------- fences

loom_status_t* fence_create(loom_device_t* dev, loom_fence_t** out_fence) {
  return guard("fence_create", [&]() -> Status {
    if (dev == nullptr || out_fence == nullptr) return sdk::invalid_argument("fence_create: device or out_fence is NULL");
    *out_fence = nullptr;
    Device* d = device_of(dev);
    LOOM_SDK_RETURN_IF_ERROR(d->check_alive("fence_create"));
    auto object = std::make_shared<FenceObject>(FenceObject{d, std::make_shared<FenceState>()});
    *out_fence = static_cast<loom_fence_t*>(d->handles()->add(HandleKind::kFence, object));
    return Status();
  });
}

void fence_destroy(loom_fence_t* f) { destroy_handle<FenceObject>(f, HandleKind::kFence, "fence_destroy"); }

loom_status_t* fence_signal(loom_fence_t* f) {
  return guard("fence_signal", [&]() -> Status {
    std::shared_ptr<FenceObject> fence;
    LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(f, HandleKind::kFence, "fence_signal", &fence));
    fence->state->signal(Status());
    return Status();
  });
}

loom_status_t* fence_wait(loom_fence_t* f, uint64_t timeout_ns) {
  return guard("fence_wait", [&]() -> Status {
    std::shared_ptr<FenceObject> fence;
    LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(f, HandleKind::kFence, "fence_wait", &fence));
    return fence->state->wait(timeout_ns, fence->device->uri() + ": fence_wait: the work signaling the fence");
  });
}

loom_status_t* fence_query(loom_fence_t* f, bool* out_signaled) {
  return guard("fence_query", [&]() -> Status {
    if (out_signaled == nullptr) return sdk::invalid_argument("fence_query: out_signaled is NULL");
    *out_signaled = false;
    std::shared_ptr<FenceObject> fence;
    LOOM_SDK_RETURN_IF_ERROR(HandleTable::get(f, HandleKind::kFence, "fence_query", &fence));
    return fence->state->query(out_signaled);
  });
}

// --------------------------------------------------------------- compile side

loom_status_t* compile_supported_entry(loom_compile_supported_args_t* args) {
  return guard("compile_supported", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("compile_supported: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("compile_supported", "loom_compile_supported_args_t", args->struct_size,
                                        LOOM_COMPILE_SUPPORTED_ARGS_STRUCT_SIZE));
    if (args->plugin == nullptr) return sdk::invalid_argument("compile_supported: plugin is NULL");
    if (args->node_count != 0 && args->out_supported == nullptr) {
      return sdk::invalid_argument("compile_supported: out_supported is NULL");
    }
    for (size_t i = 0; i < args->node_count; ++i) args->out_supported[i] = false;
    return compile_supported(plugin_of(args->plugin)->config(), args->graph, args->graph_size, args->node_count,
                             args->out_supported);
  });
}

loom_status_t* compile_entry(loom_compile_args_t* args) {
  return guard("compile", [&]() -> Status {
    if (args == nullptr) return sdk::invalid_argument("compile: args is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::check_struct_size("compile", "loom_compile_args_t", args->struct_size,
                                        LOOM_COMPILE_ARGS_STRUCT_SIZE));
    args->out_blob = nullptr;
    args->out_blob_size = 0;
    args->out_loader_key = nullptr;
    args->out_format_version = 0;
    if (args->plugin == nullptr) return sdk::invalid_argument("compile: plugin is NULL");
    LOOM_SDK_RETURN_IF_ERROR(sdk::Options::validate(args->options, args->option_count, "compile option"));
    const loom_host_services_t* host = plugin_of(args->plugin)->host();
    if (host == nullptr || !LOOM_STRUCT_HAS(loom_host_services_t, host->struct_size, free) ||
        host->allocate == nullptr) {
      return sdk::failed_precondition("compile: the host offers no allocate service for the blob");
    }
    Bitstream bs;
    LOOM_SDK_RETURN_IF_ERROR(compile_graph(plugin_of(args->plugin)->config(), args->graph, args->graph_size, &bs));
    const std::vector<std::byte> bytes = encode(bs);
    void* blob = host->allocate(host->user_data, bytes.size(), 64);
    if (blob == nullptr) {
      return sdk::resource_exhausted("compile: the host could not allocate " + std::to_string(bytes.size()) +
                                     " bytes for the bitstream");
    }
    std::memcpy(blob, bytes.data(), bytes.size());
    args->out_blob = blob;
    args->out_blob_size = bytes.size();
    args->out_loader_key = kLoaderKey;
    args->out_format_version = kFormatVersion;
    return Status();
  });
}

// The table for the version chosen (plugin.h's versioning rule): 1.1 adds
// executable_estimate; 1.2 adds no entry (it grew plugin_info).
template <uint32_t kVersion>
const loom_plugin_api_t* api() {
  static const loom_plugin_api_t kApi = [] {
    loom_plugin_api_t a{};
    a.struct_size = kVersion >= LOOM_ABI_VERSION(1, 2)   ? LOOM_PLUGIN_API_V1_2_SIZE
                    : kVersion >= LOOM_ABI_VERSION(1, 1) ? LOOM_PLUGIN_API_V1_1_SIZE
                                                         : LOOM_PLUGIN_API_V1_0_SIZE;
    a.abi_version = kVersion;
    a.status_code = &status_code;
    a.status_message = &status_message;
    a.status_destroy = &status_destroy;
    a.plugin_info = &plugin_info;
    a.plugin_create = &plugin_create;
    a.plugin_destroy = &plugin_destroy;
    a.plugin_check_available = &plugin_check_available;
    a.device_count = &device_count;
    a.device_get = &device_get;
    a.device_info = &device_info;
    a.executable_check = &executable_check;
    a.executable_load = &executable_load;
    a.executable_destroy = &executable_destroy;
    a.execute = &execute;
    a.buffer_allocate = &buffer_allocate;
    a.buffer_free = &buffer_free;
    a.buffer_map = &buffer_map;
    a.buffer_unmap = &buffer_unmap;
    a.buffer_copy_from_host = &buffer_copy_from_host;
    a.buffer_copy_to_host = &buffer_copy_to_host;
    a.buffer_import_host = nullptr;
    a.fence_create = &fence_create;
    a.fence_destroy = &fence_destroy;
    a.fence_signal = &fence_signal;
    a.fence_wait = &fence_wait;
    a.fence_query = &fence_query;
    a.compile_supported = &compile_supported_entry;
    a.compile = &compile_entry;
    if constexpr (kVersion >= LOOM_ABI_VERSION(1, 1)) a.executable_estimate = &executable_estimate;
    return a;
  }();
  return &kApi;
}

}  // namespace
}  // namespace loom::fpga_stub

extern "C" LOOM_PLUGIN_EXPORT loom_status_code_t loom_plugin_query(loom_plugin_query_t* query) {
  if (query == nullptr || query->struct_size < LOOM_PLUGIN_QUERY_STRUCT_SIZE) return LOOM_STATUS_INVALID_ARGUMENT;
  query->out_abi_version = 0;
  query->out_api = nullptr;
  std::string reason;
  uint32_t version = 0;
  try {
    if (!::loom::sdk::negotiate_abi(query->host_abi_min, query->host_abi_max, ::loom::sdk::kDefaultAbiMin,
                                    ::loom::sdk::kDefaultAbiMax, &version, &reason)) {
      if (query->reason != nullptr && query->reason_capacity > 0) {
        std::snprintf(query->reason, query->reason_capacity, "%s", reason.c_str());
      }
      return LOOM_STATUS_INCOMPATIBLE;
    }
  } catch (...) {
    return LOOM_STATUS_INTERNAL;
  }
  query->out_abi_version = version;
  query->out_api = version >= LOOM_ABI_VERSION(1, 2)   ? ::loom::fpga_stub::api<LOOM_ABI_VERSION(1, 2)>()
                   : version >= LOOM_ABI_VERSION(1, 1) ? ::loom::fpga_stub::api<LOOM_ABI_VERSION(1, 1)>()
                                                       : ::loom::fpga_stub::api<LOOM_ABI_VERSION(1, 0)>();
  return LOOM_STATUS_OK;
}
