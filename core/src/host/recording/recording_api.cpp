// The recording function table: forwards every entry to the plugin's own
// table and records the call (capture_recorder.hpp). Every handle the host
// sees is one of the wrapper structs below, so each entry finds its plugin
// and recorder from its arguments; status objects are the table's own
// (code and message copied from the plugin's, which is destroyed at once).
#include <cstring>
#include <new>
#include <optional>

#include "host/recording/capture_recorder.hpp"

namespace loom::host {

namespace cap = capture;
using cap::CallKind;
using cap::CallRecord;

struct RecDevice;

class RecordingPlugin {
 public:
  std::shared_ptr<CaptureRecorder> recorder;
  const loom_plugin_api_t* real = nullptr;
  loom_plugin_t* real_instance = nullptr;
  uint32_t plugin_index = 0;
  loom_plugin_api_t api{};
  std::vector<std::unique_ptr<RecDevice>> devices;
};

struct RecDevice {
  RecordingPlugin* owner;
  loom_device_t* real;
  int64_t id;  // index into the capture's devices
};

struct RecExecutable {
  RecordingPlugin* owner;
  loom_executable_t* real;
  int64_t id;
};

struct RecBuffer {
  RecordingPlugin* owner;
  loom_buffer_t* real;
  int64_t id;
  uint64_t size;
};

// An execution waiting for its fence: recorded when the fence completes.
struct PendingExecution {
  CallRecord call;
  std::vector<loom_tensor_t> outputs;  // the host's (wrapped) descriptions
  std::vector<std::vector<int64_t>> shapes;
};

struct RecFence {
  RecordingPlugin* owner;
  loom_fence_t* real;
  int64_t id;
  std::mutex mutex;
  std::optional<PendingExecution> pending;
};

namespace {

// How long recording waits for an execution's wait fences before reading
// its inputs.
constexpr uint64_t kRecordWaitFenceNs = 10'000'000'000;

struct RecStatus {
  loom_status_code_t code;
  std::string message;
};

RecordingPlugin* rec_of(loom_plugin_t* p) { return reinterpret_cast<RecordingPlugin*>(p); }
RecDevice* rec_of(loom_device_t* d) { return reinterpret_cast<RecDevice*>(d); }
RecExecutable* rec_of(loom_executable_t* e) { return reinterpret_cast<RecExecutable*>(e); }
RecBuffer* rec_of(loom_buffer_t* b) { return reinterpret_cast<RecBuffer*>(b); }
RecFence* rec_of(loom_fence_t* f) { return reinterpret_cast<RecFence*>(f); }

// Takes the plugin's status: fills the record's code and message and
// returns the table's own status object for the host (NULL for success).
loom_status_t* rec_take(RecordingPlugin* owner, loom_status_t* status, CallRecord* call) {
  if (status == nullptr) return nullptr;
  const loom_status_code_t code = owner->real->status_code(status);
  const char* text = owner->real->status_message(status);
  auto* out = new (std::nothrow) RecStatus{code, text != nullptr ? text : ""};
  owner->real->status_destroy(status);
  if (call != nullptr) {
    call->status_code = static_cast<uint32_t>(code);
    call->message = out != nullptr ? out->message : "";
  }
  return reinterpret_cast<loom_status_t*>(out);
}

CallRecord rec_begin(RecordingPlugin* owner, CallKind kind) {
  CallRecord call;
  call.kind = kind;
  call.plugin = owner->plugin_index;
  call.thread = owner->recorder->thread_number();
  call.start_ns = owner->recorder->now_ns();
  return call;
}

void rec_end(RecordingPlugin* owner, CallRecord&& call) {
  call.duration_ns = owner->recorder->now_ns() - call.start_ns;
  owner->recorder->add_call(std::move(call));
}

std::vector<std::pair<std::string, std::string>> rec_options(size_t count,
                                                             const loom_option_t* const* options) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0; options != nullptr && i < count; ++i) {
    const loom_option_t* o = options[i];
    if (o == nullptr) continue;
    out.emplace_back(o->key != nullptr ? o->key : "", o->value != nullptr ? o->value : "");
  }
  return out;
}

// The bytes of one tensor argument: from host memory, or copied out of its
// buffer through the plugin's own table.
cap::TensorRecord rec_tensor(RecordingPlugin* owner, const loom_tensor_t& t, bool read_bytes) {
  cap::TensorRecord out;
  out.dtype = static_cast<uint32_t>(t.dtype);
  if (t.shape != nullptr && t.rank <= LOOM_MAX_RANK) out.shape.assign(t.shape, t.shape + t.rank);
  out.byte_size = t.byte_size;
  out.offset = t.offset;
  if (t.buffer != nullptr) {
    out.in_buffer = true;
    out.buffer_id = rec_of(t.buffer)->id;
  }
  if (!read_bytes) return out;
  if (t.host_data != nullptr) {
    const auto* p = static_cast<const std::byte*>(t.host_data) + t.offset;
    out.payload = owner->recorder->add_payload({p, static_cast<size_t>(t.byte_size)});
  } else if (t.buffer != nullptr) {
    std::vector<std::byte> bytes(static_cast<size_t>(t.byte_size));
    loom_buffer_copy_args_t args{};
    args.struct_size = LOOM_BUFFER_COPY_ARGS_STRUCT_SIZE;
    args.buffer = rec_of(t.buffer)->real;
    args.buffer_offset = t.offset;
    args.host_pointer = bytes.data();
    args.size = t.byte_size;
    loom_status_t* st = owner->real->buffer_copy_to_host(&args);
    if (st == nullptr) {
      out.payload = owner->recorder->add_payload(bytes);
    } else {
      owner->real->status_destroy(st);
    }
  }
  return out;
}

// Completes a pending execution: its outputs are read now (when `read`).
void rec_finish_pending(RecFence* fence, bool read, uint32_t status_code,
                        const std::string& message) {
  std::optional<PendingExecution> pending;
  {
    std::lock_guard<std::mutex> lock(fence->mutex);
    pending.swap(fence->pending);
  }
  if (!pending) return;
  RecordingPlugin* owner = fence->owner;
  CallRecord& call = pending->call;
  if (status_code != 0) {
    call.status_code = status_code;
    call.message = message;
  }
  for (const loom_tensor_t& t : pending->outputs) {
    call.outputs.push_back(rec_tensor(owner, t, read && status_code == 0));
  }
  rec_end(owner, std::move(call));
}

// ---- the table ----

loom_status_code_t r_status_code(const loom_status_t* s) {
  return reinterpret_cast<const RecStatus*>(s)->code;
}
const char* r_status_message(const loom_status_t* s) {
  return reinterpret_cast<const RecStatus*>(s)->message.c_str();
}
void r_status_destroy(loom_status_t* s) { delete reinterpret_cast<RecStatus*>(s); }

const loom_plugin_info_t* r_plugin_info() {
  static const loom_plugin_info_t info = {LOOM_PLUGIN_INFO_STRUCT_SIZE, "recording", "", "", 0,
                                          nullptr, 0};
  return &info;
}
loom_status_t* r_plugin_create(loom_plugin_create_args_t*) {
  auto* s = new (std::nothrow)
      RecStatus{LOOM_STATUS_FAILED_PRECONDITION, "a recorded plugin is created before recording"};
  return reinterpret_cast<loom_status_t*>(s);
}
void r_plugin_destroy(loom_plugin_t* p) {
  RecordingPlugin* owner = rec_of(p);
  CallRecord call = rec_begin(owner, CallKind::kPluginDestroy);
  owner->real->plugin_destroy(owner->real_instance);
  rec_end(owner, std::move(call));
}
loom_status_t* r_check_available(loom_plugin_t* p) {
  RecordingPlugin* owner = rec_of(p);
  CallRecord call = rec_begin(owner, CallKind::kCheckAvailable);
  loom_status_t* st = rec_take(owner, owner->real->plugin_check_available(owner->real_instance), &call);
  rec_end(owner, std::move(call));
  return st;
}
loom_status_t* r_device_count(loom_plugin_t* p, size_t* out) {
  *out = rec_of(p)->devices.size();
  return nullptr;
}
loom_status_t* r_device_get(loom_plugin_t* p, size_t index, loom_device_t** out) {
  RecordingPlugin* owner = rec_of(p);
  if (index >= owner->devices.size()) {
    return reinterpret_cast<loom_status_t*>(new (std::nothrow) RecStatus{
        LOOM_STATUS_OUT_OF_RANGE, "device index " + std::to_string(index) + " out of range"});
  }
  *out = reinterpret_cast<loom_device_t*>(owner->devices[index].get());
  return nullptr;
}
loom_status_t* r_device_info(loom_device_t* d, loom_device_info_t* info) {
  RecDevice* dev = rec_of(d);
  return rec_take(dev->owner, dev->owner->real->device_info(dev->real, info), nullptr);
}

loom_status_t* r_executable_check(loom_executable_check_args_t* args) {
  RecDevice* dev = rec_of(args->device);
  RecordingPlugin* owner = dev->owner;
  CallRecord call = rec_begin(owner, CallKind::kExecutableCheck);
  call.device = dev->id;
  call.loader_key = args->loader_key != nullptr ? args->loader_key : "";
  call.format_version = args->format_version;
  call.payload = owner->recorder->add_payload({static_cast<const std::byte*>(args->blob), args->blob_size});
  loom_executable_check_args_t real = *args;
  real.device = dev->real;
  loom_status_t* st = rec_take(owner, owner->real->executable_check(&real), &call);
  rec_end(owner, std::move(call));
  return st;
}

loom_status_t* r_executable_load(loom_executable_load_args_t* args) {
  RecDevice* dev = rec_of(args->device);
  RecordingPlugin* owner = dev->owner;
  CallRecord call = rec_begin(owner, CallKind::kExecutableLoad);
  call.device = dev->id;
  call.loader_key = args->loader_key != nullptr ? args->loader_key : "";
  call.format_version = args->format_version;
  call.payload = owner->recorder->add_payload({static_cast<const std::byte*>(args->blob), args->blob_size});
  call.options = rec_options(args->spec_count, args->specs);
  loom_executable_load_args_t real = *args;
  real.device = dev->real;
  real.out_executable = nullptr;
  loom_status_t* st = rec_take(owner, owner->real->executable_load(&real), &call);
  if (st == nullptr && real.out_executable != nullptr) {
    auto* e = new (std::nothrow) RecExecutable{owner, real.out_executable,
                                               owner->recorder->new_id(CaptureRecorder::ObjectKind::kExecutable)};
    if (e == nullptr) {
      owner->real->executable_destroy(real.out_executable);
    } else {
      call.object = e->id;
      args->out_executable = reinterpret_cast<loom_executable_t*>(e);
    }
  }
  rec_end(owner, std::move(call));
  return st;
}

void r_executable_destroy(loom_executable_t* e) {
  if (e == nullptr) return;
  RecExecutable* exe = rec_of(e);
  RecordingPlugin* owner = exe->owner;
  CallRecord call = rec_begin(owner, CallKind::kExecutableDestroy);
  call.object = exe->id;
  owner->real->executable_destroy(exe->real);
  delete exe;
  rec_end(owner, std::move(call));
}

loom_status_t* r_execute(loom_execute_args_t* args) {
  RecExecutable* exe = rec_of(args->executable);
  RecordingPlugin* owner = exe->owner;
  CallRecord call = rec_begin(owner, CallKind::kExecute);
  call.object = exe->id;
  // Inputs behind wait fences may still be being written by an earlier
  // asynchronous execution: the recording waits for those fences (which
  // also completes the earlier execution's record) before reading them. A
  // fence that does not complete in time leaves the inputs unrecorded (the
  // replay then skips this execution) rather than recording stale bytes.
  bool inputs_ready = true;
  for (size_t i = 0; args->wait_fences != nullptr && i < args->wait_fence_count; ++i) {
    RecFence* f = args->wait_fences[i] != nullptr ? rec_of(args->wait_fences[i]) : nullptr;
    if (f == nullptr) continue;
    loom_status_t* waited = owner->real->fence_wait(f->real, kRecordWaitFenceNs);
    if (waited == nullptr) {
      rec_finish_pending(f, true, 0, "");
    } else {
      owner->real->status_destroy(waited);
      inputs_ready = false;
    }
  }
  // The plugin sees its own handles: tensors whose buffers are unwrapped.
  const size_t n_in = args->inputs != nullptr ? args->input_count : 0;
  const size_t n_out = args->outputs != nullptr ? args->output_count : 0;
  std::vector<loom_tensor_t> tensors(n_in + n_out);
  std::vector<const loom_tensor_t*> pointers(n_in + n_out);
  for (size_t i = 0; i < n_in + n_out; ++i) {
    const loom_tensor_t* t = i < n_in ? args->inputs[i] : args->outputs[i - n_in];
    if (t == nullptr) {
      pointers[i] = nullptr;
      continue;
    }
    std::memcpy(&tensors[i], t, std::min(sizeof(loom_tensor_t), t->struct_size));
    if (t->buffer != nullptr) tensors[i].buffer = rec_of(t->buffer)->real;
    pointers[i] = &tensors[i];
    if (i < n_in) call.inputs.push_back(rec_tensor(owner, *t, inputs_ready));
  }
  std::vector<loom_fence_t*> waits;
  for (size_t i = 0; args->wait_fences != nullptr && i < args->wait_fence_count; ++i) {
    RecFence* f = rec_of(args->wait_fences[i]);
    waits.push_back(f != nullptr ? f->real : nullptr);
    call.wait_fences.push_back(f != nullptr ? f->id : -1);
  }
  RecFence* signal = args->signal_fence != nullptr ? rec_of(args->signal_fence) : nullptr;
  // A fence handed again (ABI 1.1 re-arming) ends the execution it held.
  if (signal != nullptr) rec_finish_pending(signal, false, 0, "");
  loom_execute_args_t real = *args;
  real.executable = exe->real;
  real.inputs = pointers.data();
  real.outputs = pointers.data() + n_in;
  real.wait_fences = waits.data();
  real.signal_fence = signal != nullptr ? signal->real : nullptr;
  call.signal_fence = signal != nullptr ? signal->id : -1;
  loom_status_t* st = rec_take(owner, owner->real->execute(&real), &call);
  if (st == nullptr && signal != nullptr) {
    PendingExecution pending;
    pending.call = std::move(call);
    // The host's own descriptions (wrapped buffers), read at completion.
    for (size_t i = 0; i < n_out; ++i) {
      const loom_tensor_t* t = args->outputs[i];
      if (t == nullptr) continue;
      loom_tensor_t copy{};
      std::memcpy(&copy, t, std::min(sizeof(loom_tensor_t), t->struct_size));
      pending.outputs.push_back(copy);
    }
    // Shapes are borrowed for the call: keep copies.
    pending.shapes.resize(pending.outputs.size());
    for (size_t i = 0; i < pending.outputs.size(); ++i) {
      loom_tensor_t& t = pending.outputs[i];
      if (t.shape != nullptr && t.rank <= LOOM_MAX_RANK) {
        pending.shapes[i].assign(t.shape, t.shape + t.rank);
        t.shape = pending.shapes[i].data();
      }
    }
    {
      std::lock_guard<std::mutex> lock(signal->mutex);
      signal->pending = std::move(pending);
    }
    return nullptr;
  }
  for (size_t i = 0; i < n_out; ++i) {
    const loom_tensor_t* t = args->outputs[i];
    if (t != nullptr) call.outputs.push_back(rec_tensor(owner, *t, st == nullptr));
  }
  rec_end(owner, std::move(call));
  return st;
}

// The host's handle for a buffer the plugin made (allocated or imported):
// a RecBuffer with a fresh id, which the call records.
void hand_out_buffer(RecordingPlugin* owner, loom_buffer_t* real, uint64_t size, CallRecord* call,
                     loom_buffer_t** out) {
  auto* b = new RecBuffer{owner, real, owner->recorder->new_id(CaptureRecorder::ObjectKind::kBuffer), size};
  call->object = b->id;
  *out = reinterpret_cast<loom_buffer_t*>(b);
}

loom_status_t* r_buffer_allocate(loom_buffer_allocate_args_t* args) {
  RecDevice* dev = rec_of(args->device);
  RecordingPlugin* owner = dev->owner;
  CallRecord call = rec_begin(owner, CallKind::kBufferAllocate);
  call.device = dev->id;
  call.size = args->size;
  call.value = args->flags;
  loom_buffer_allocate_args_t real = *args;
  real.device = dev->real;
  real.out_buffer = nullptr;
  loom_status_t* st = rec_take(owner, owner->real->buffer_allocate(&real), &call);
  if (st == nullptr && real.out_buffer != nullptr) {
    hand_out_buffer(owner, real.out_buffer, args->size, &call, &args->out_buffer);
  }
  rec_end(owner, std::move(call));
  return st;
}

loom_status_t* r_buffer_import(loom_buffer_import_args_t* args) {
  RecDevice* dev = rec_of(args->device);
  RecordingPlugin* owner = dev->owner;
  CallRecord call = rec_begin(owner, CallKind::kBufferImport);
  call.device = dev->id;
  call.size = args->size;
  loom_buffer_import_args_t real = *args;
  real.device = dev->real;
  real.out_buffer = nullptr;
  loom_status_t* st = rec_take(owner, owner->real->buffer_import_host(&real), &call);
  if (st == nullptr && real.out_buffer != nullptr) {
    hand_out_buffer(owner, real.out_buffer, args->size, &call, &args->out_buffer);
  }
  rec_end(owner, std::move(call));
  return st;
}

void r_buffer_free(loom_buffer_t* b) {
  if (b == nullptr) return;
  RecBuffer* buf = rec_of(b);
  RecordingPlugin* owner = buf->owner;
  CallRecord call = rec_begin(owner, CallKind::kBufferFree);
  call.object = buf->id;
  owner->real->buffer_free(buf->real);
  delete buf;
  rec_end(owner, std::move(call));
}

loom_status_t* r_buffer_map(loom_buffer_t* b, void** out) {
  RecBuffer* buf = rec_of(b);
  CallRecord call = rec_begin(buf->owner, CallKind::kBufferMap);
  call.object = buf->id;
  loom_status_t* st = rec_take(buf->owner, buf->owner->real->buffer_map(buf->real, out), &call);
  rec_end(buf->owner, std::move(call));
  return st;
}

void r_buffer_unmap(loom_buffer_t* b) {
  RecBuffer* buf = rec_of(b);
  CallRecord call = rec_begin(buf->owner, CallKind::kBufferUnmap);
  call.object = buf->id;
  buf->owner->real->buffer_unmap(buf->real);
  rec_end(buf->owner, std::move(call));
}

loom_status_t* rec_copy(loom_buffer_copy_args_t* args, bool from_host) {
  RecBuffer* buf = rec_of(args->buffer);
  RecordingPlugin* owner = buf->owner;
  CallRecord call = rec_begin(owner, from_host ? CallKind::kCopyFromHost : CallKind::kCopyToHost);
  call.object = buf->id;
  call.size = args->size;
  call.offset = args->buffer_offset;
  if (from_host && args->host_pointer != nullptr) {
    call.payload = owner->recorder->add_payload(
        {static_cast<const std::byte*>(args->host_pointer), static_cast<size_t>(args->size)});
  }
  loom_buffer_copy_args_t real = *args;
  real.buffer = buf->real;
  loom_status_t* raw = from_host ? owner->real->buffer_copy_from_host(&real)
                                 : owner->real->buffer_copy_to_host(&real);
  loom_status_t* st = rec_take(owner, raw, &call);
  if (!from_host && st == nullptr && args->host_pointer != nullptr) {
    call.payload = owner->recorder->add_payload(
        {static_cast<const std::byte*>(args->host_pointer), static_cast<size_t>(args->size)});
  }
  rec_end(owner, std::move(call));
  return st;
}
loom_status_t* r_copy_from_host(loom_buffer_copy_args_t* args) { return rec_copy(args, true); }
loom_status_t* r_copy_to_host(loom_buffer_copy_args_t* args) { return rec_copy(args, false); }

loom_status_t* r_fence_create(loom_device_t* d, loom_fence_t** out) {
  RecDevice* dev = rec_of(d);
  RecordingPlugin* owner = dev->owner;
  CallRecord call = rec_begin(owner, CallKind::kFenceCreate);
  call.device = dev->id;
  loom_fence_t* real = nullptr;
  loom_status_t* st = rec_take(owner, owner->real->fence_create(dev->real, &real), &call);
  if (st == nullptr && real != nullptr) {
    auto* f = new RecFence{owner, real, owner->recorder->new_id(CaptureRecorder::ObjectKind::kFence), {}, {}};
    call.object = f->id;
    *out = reinterpret_cast<loom_fence_t*>(f);
  }
  rec_end(owner, std::move(call));
  return st;
}

void r_fence_destroy(loom_fence_t* f) {
  if (f == nullptr) return;
  RecFence* fence = rec_of(f);
  RecordingPlugin* owner = fence->owner;
  rec_finish_pending(fence, false, 0, "");
  CallRecord call = rec_begin(owner, CallKind::kFenceDestroy);
  call.object = fence->id;
  owner->real->fence_destroy(fence->real);
  delete fence;
  rec_end(owner, std::move(call));
}

loom_status_t* r_fence_signal(loom_fence_t* f) {
  RecFence* fence = rec_of(f);
  CallRecord call = rec_begin(fence->owner, CallKind::kFenceSignal);
  call.object = fence->id;
  loom_status_t* st = rec_take(fence->owner, fence->owner->real->fence_signal(fence->real), &call);
  rec_end(fence->owner, std::move(call));
  return st;
}

loom_status_t* r_fence_wait(loom_fence_t* f, uint64_t timeout_ns) {
  RecFence* fence = rec_of(f);
  RecordingPlugin* owner = fence->owner;
  CallRecord call = rec_begin(owner, CallKind::kFenceWait);
  call.object = fence->id;
  call.timeout_ns = timeout_ns;
  loom_status_t* st = rec_take(owner, owner->real->fence_wait(fence->real, timeout_ns), &call);
  if (call.status_code != LOOM_STATUS_DEADLINE_EXCEEDED) {
    rec_finish_pending(fence, true, call.status_code, call.message);
  }
  rec_end(owner, std::move(call));
  return st;
}

loom_status_t* r_fence_query(loom_fence_t* f, bool* out_signaled) {
  RecFence* fence = rec_of(f);
  RecordingPlugin* owner = fence->owner;
  CallRecord call = rec_begin(owner, CallKind::kFenceQuery);
  call.object = fence->id;
  bool signaled = false;
  loom_status_t* st = rec_take(owner, owner->real->fence_query(fence->real, &signaled), &call);
  call.flag = signaled;
  if (out_signaled != nullptr) *out_signaled = signaled;
  if (signaled || call.status_code != 0) {
    rec_finish_pending(fence, true, call.status_code, call.message);
  }
  rec_end(owner, std::move(call));
  return st;
}

loom_status_t* r_compile_supported(loom_compile_supported_args_t* args) {
  RecordingPlugin* owner = rec_of(args->plugin);
  CallRecord call = rec_begin(owner, CallKind::kCompileSupported);
  call.payload = owner->recorder->add_payload({static_cast<const std::byte*>(args->graph), args->graph_size});
  call.size = args->node_count;
  loom_compile_supported_args_t real = *args;
  real.plugin = owner->real_instance;
  loom_status_t* st = rec_take(owner, owner->real->compile_supported(&real), &call);
  if (st == nullptr && args->out_supported != nullptr) {
    call.result_payload = owner->recorder->add_payload(
        {reinterpret_cast<const std::byte*>(args->out_supported), args->node_count * sizeof(bool)});
  }
  rec_end(owner, std::move(call));
  return st;
}

loom_status_t* r_compile(loom_compile_args_t* args) {
  RecordingPlugin* owner = rec_of(args->plugin);
  CallRecord call = rec_begin(owner, CallKind::kCompile);
  call.payload = owner->recorder->add_payload({static_cast<const std::byte*>(args->graph), args->graph_size});
  call.options = rec_options(args->option_count, args->options);
  loom_compile_args_t real = *args;
  real.plugin = owner->real_instance;
  loom_status_t* st = rec_take(owner, owner->real->compile(&real), &call);
  args->out_blob = real.out_blob;
  args->out_blob_size = real.out_blob_size;
  args->out_loader_key = real.out_loader_key;
  args->out_format_version = real.out_format_version;
  if (st == nullptr && real.out_blob != nullptr) {
    call.result_payload = owner->recorder->add_payload(
        {static_cast<const std::byte*>(real.out_blob), real.out_blob_size});
    call.loader_key = real.out_loader_key != nullptr ? real.out_loader_key : "";
    call.format_version = real.out_format_version;
  }
  rec_end(owner, std::move(call));
  return st;
}

loom_status_t* r_estimate(loom_executable_estimate_args_t* args) {
  RecDevice* dev = rec_of(args->device);
  RecordingPlugin* owner = dev->owner;
  CallRecord call = rec_begin(owner, CallKind::kEstimate);
  call.device = dev->id;
  call.loader_key = args->loader_key != nullptr ? args->loader_key : "";
  call.format_version = args->format_version;
  call.payload = owner->recorder->add_payload({static_cast<const std::byte*>(args->blob), args->blob_size});
  loom_executable_estimate_args_t real = *args;
  real.device = dev->real;
  loom_status_t* st = rec_take(owner, owner->real->executable_estimate(&real), &call);
  args->out_time_ns = real.out_time_ns;
  call.value = real.out_time_ns;
  rec_end(owner, std::move(call));
  return st;
}

}  // namespace

void RecordingPluginDeleter::operator()(RecordingPlugin* plugin) const { delete plugin; }

RecordingPluginPtr wrap_for_recording(std::shared_ptr<CaptureRecorder> recorder,
                                      const RecordedPluginFacts& facts,
                                      const loom_plugin_api_t* real_api,
                                      loom_plugin_t* real_instance,
                                      const std::vector<loom_device_t*>& real_devices,
                                      const loom_plugin_api_t** out_api,
                                      loom_plugin_t** out_instance,
                                      std::vector<loom_device_t*>* out_devices) {
  RecordingPluginPtr plugin(new RecordingPlugin());
  plugin->recorder = std::move(recorder);
  plugin->real = real_api;
  plugin->real_instance = real_instance;
  cap::PluginEntry entry;
  entry.name = facts.manifest->name;
  entry.version = facts.manifest->version;
  entry.abi_version = facts.abi_version;
  entry.library_hash = facts.manifest->library_hash;
  for (const auto& k : *facts.loader_keys) entry.loader_keys.push_back(k.key);
  entry.isolated = facts.isolated;
  if (!facts.isolated && real_api->plugin_info != nullptr) {
    if (const loom_plugin_info_t* info = real_api->plugin_info();
        info != nullptr && LOOM_STRUCT_HAS(loom_plugin_info_t, info->struct_size, version)) {
      entry.vendor = info->vendor != nullptr ? info->vendor : "";
      if (info->version != nullptr) entry.version = info->version;
    }
  }
  plugin->plugin_index = plugin->recorder->add_plugin(std::move(entry));
  // What happened before the table was in place, recorded as it happened.
  CallRecord negotiate = rec_begin(plugin.get(), CallKind::kNegotiate);
  negotiate.value = facts.abi_version;
  negotiate.abi_min = facts.abi_min;
  negotiate.abi_max = facts.abi_max;
  plugin->recorder->add_call(std::move(negotiate));
  CallRecord create = rec_begin(plugin.get(), CallKind::kPluginCreate);
  if (facts.plugin_options != nullptr) create.options = *facts.plugin_options;
  plugin->recorder->add_call(std::move(create));
  for (size_t i = 0; i < real_devices.size(); ++i) {
    const DeviceInfo& info = (*facts.devices)[i];
    cap::DeviceEntry d;
    d.plugin = plugin->plugin_index;
    d.uri = info.uri;
    d.name = info.name;
    d.kind = static_cast<uint32_t>(info.kind);
    d.device_memory_bytes = info.device_memory_bytes;
    d.capabilities = info.capabilities;
    d.dtype_mask = info.dtype_mask;
    const int64_t id = plugin->recorder->add_device(std::move(d));
    plugin->devices.push_back(std::make_unique<RecDevice>(RecDevice{plugin.get(), real_devices[i], id}));
    CallRecord call = rec_begin(plugin.get(), CallKind::kDeviceInfo);
    call.device = id;
    plugin->recorder->add_call(std::move(call));
  }

  loom_plugin_api_t& api = plugin->api;
  api.struct_size = real_api->struct_size < sizeof(loom_plugin_api_t) ? real_api->struct_size
                                                                        : sizeof(loom_plugin_api_t);
  api.abi_version = real_api->abi_version;
  api.status_code = r_status_code;
  api.status_message = r_status_message;
  api.status_destroy = r_status_destroy;
  api.plugin_info = r_plugin_info;
  api.plugin_create = r_plugin_create;
  api.plugin_destroy = r_plugin_destroy;
  api.plugin_check_available = r_check_available;
  api.device_count = r_device_count;
  api.device_get = r_device_get;
  api.device_info = r_device_info;
  api.executable_check = r_executable_check;
  api.executable_load = r_executable_load;
  api.executable_destroy = r_executable_destroy;
  api.execute = r_execute;
  api.buffer_allocate = r_buffer_allocate;
  api.buffer_free = r_buffer_free;
  api.buffer_map = r_buffer_map;
  api.buffer_unmap = r_buffer_unmap;
  api.buffer_copy_from_host = r_copy_from_host;
  api.buffer_copy_to_host = r_copy_to_host;
  api.buffer_import_host = real_api->buffer_import_host != nullptr ? r_buffer_import : nullptr;
  api.fence_create = r_fence_create;
  api.fence_destroy = r_fence_destroy;
  api.fence_signal = r_fence_signal;
  api.fence_wait = r_fence_wait;
  api.fence_query = r_fence_query;
  const bool compiles = real_api->compile != nullptr && real_api->compile_supported != nullptr;
  api.compile_supported = compiles ? r_compile_supported : nullptr;
  api.compile = compiles ? r_compile : nullptr;
  api.executable_estimate =
      LOOM_STRUCT_HAS(loom_plugin_api_t, real_api->struct_size, executable_estimate) &&
              real_api->executable_estimate != nullptr
          ? r_estimate
          : nullptr;
  *out_api = &plugin->api;
  *out_instance = reinterpret_cast<loom_plugin_t*>(plugin.get());
  out_devices->clear();
  for (const auto& d : plugin->devices) out_devices->push_back(reinterpret_cast<loom_device_t*>(d.get()));
  return plugin;
}

}  // namespace loom::host
