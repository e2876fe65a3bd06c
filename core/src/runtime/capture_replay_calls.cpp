// The calls mode of `loom replay` (ReplayOptions::all_calls): every
// recorded call of the replayed plugin again, in the capture's order, on
// one device of the plugin replayed against. Buffers, fences and
// executables are made again and found by their recorded ids; copies to the
// host, execution outputs and statuses are compared with the recorded ones.
//
// Why the capture's order works serially: an asynchronous execution is
// stored when the recording saw it complete (a wait or query of its fence,
// or a later execution waiting for it), so everything that must happen
// before it (host signals of its wait fences, the executions that write
// its inputs) is stored before it. The replay waits for each execution's
// signal fence right after submitting it, so at every later call nothing
// replayed is in flight and each wait fence an execution names is already
// signaled.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "runtime/aligned_bytes.hpp"
#include "runtime/capture_replay.hpp"

namespace loom::runtime {

namespace hc = host::capture;

namespace {

// How long the replay waits for an execution it just submitted (finite, so
// that a plugin that never signals is reported, not waited on forever).
// How long a recorded fence_wait is replayed for: nothing replayed is in
// flight by then (see the top of this file), so a fence that is not
// signaled will not be.
constexpr uint64_t kCallsFenceWaitNs = 1'000'000'000;
// The alignment of replay-owned host memory handed to buffer_import_host
// (Vulkan asks for its minImportedHostPointerAlignment, 4096 on common
// drivers).
constexpr uint64_t kCallsImportAlignment = 4096;

// A range of a buffer the replay last wrote, and as what: an execution's
// output (its dtype), or bytes copied from the host (kInvalid).
struct CallsWritten {
  uint64_t offset = 0, size = 0;
  DType dtype = DType::kInvalid;
  uint64_t call = 0;
  size_t output = 0;
};

// A recorded buffer on the replayed plugin.
struct CallsBuffer {
  AlignedBytes host;  // an import's memory (declared first: outlives `buffer`)
  std::unique_ptr<host::DeviceBuffer> buffer;
  uint64_t size = 0;
  // Recorded as an import: the host wrote it directly, with no call to
  // record; `stand_in`: replayed as an allocation (the plugin cannot
  // import), written with copies instead.
  bool imported = false, stand_in = false;
  bool mapped = false, mapped_ever = false;
  std::string error;  // why it does not exist on the replayed plugin
  std::vector<CallsWritten> written;  // oldest first
};

struct CallsFence {
  std::unique_ptr<host::Fence> fence;
  std::string error;
  // An execution was handed it: under ABI 1.0 a fence signals once, so the
  // next execution that signals it gets a fresh one.
  bool used = false;
  // Set when the execution that was to signal it last was not submitted:
  // waits and queries on it are skipped rather than left to time out.
  std::string not_submitted;
};

struct CallsExecutable {
  std::unique_ptr<host::Executable> executable;
  std::string error;
};

// The replay's state: recorded ids to what the replayed plugin made.
struct CallsState {
  std::unordered_map<int64_t, CallsBuffer> buffers;
  std::unordered_map<int64_t, CallsFence> fences;
  std::unordered_map<int64_t, CallsExecutable> executables;
  std::unordered_map<int64_t, size_t> load_calls;  // executable id -> its load call
  // Set when an execution did not finish in time inside this process: the
  // plugin may still be running it on buffers and fences of this state, so
  // nothing of it is freed and the rest of the replay is skipped.
  std::string abandoned;
};

std::string calls_status_text(uint32_t code) {
  return std::string(status_code_name(static_cast<StatusCode>(code)));
}

// Compares the replayed status with the recorded one; sets out's outcome
// ("match", "failed", or "crashed" when the plugin was lost).
bool calls_same_status(const hc::CallRecord& r, const Status& st, ReplayedCall* out) {
  if (st.code() == StatusCode::kDeviceLost) {
    out->outcome = "crashed";
    out->detail = st.to_string();
    return false;
  }
  if (static_cast<uint32_t>(st.code()) != r.status_code) {
    out->outcome = "failed";
    out->detail = "recorded " + calls_status_text(r.status_code) + ", replayed " +
                  (st.ok() ? std::string("ok") : st.to_string());
    return false;
  }
  out->outcome = "match";
  return true;
}

std::string calls_missing(std::string_view what, int64_t id, const std::string& error) {
  return std::string(what) + " " + std::to_string(id) + " does not exist on the replayed plugin: " +
         error;
}

// The buffer of a call, or nullptr with out's outcome "skipped" and why.
CallsBuffer* calls_buffer(CallsState& s, int64_t id, ReplayedCall* out) {
  auto it = s.buffers.find(id);
  // check_all_calls proved the id was made; a missing entry is one whose
  // recorded creation failed and was not replayed into a buffer.
  if (it == s.buffers.end() || it->second.buffer == nullptr) {
    out->outcome = "skipped";
    out->detail = calls_missing("buffer", id, it != s.buffers.end() ? it->second.error
                                                                     : "it was never made");
    return nullptr;
  }
  return &it->second;
}

CallsFence* calls_fence(CallsState& s, int64_t id, ReplayedCall* out) {
  auto it = s.fences.find(id);
  if (it == s.fences.end() || it->second.fence == nullptr) {
    out->outcome = "skipped";
    out->detail = calls_missing("fence", id, it != s.fences.end() ? it->second.error
                                                                   : "it was never made");
    return nullptr;
  }
  return &it->second;
}

// Notes that [offset, offset + size) of `b` now holds `w`; older ranges it
// covers whole are forgotten.
void calls_note_write(CallsBuffer& b, const CallsWritten& w) {
  std::erase_if(b.written, [&](const CallsWritten& o) {
    return o.offset >= w.offset && o.offset + o.size <= w.offset + w.size;
  });
  b.written.push_back(w);
}

// What the bytes [offset, offset + size) of `b` are compared as: the dtype
// of the execution output that last wrote them when the range lies within
// that output on element boundaries, else exact bytes (u8).
const CallsWritten* calls_writer(const CallsBuffer& b, uint64_t offset, uint64_t size) {
  for (auto it = b.written.rbegin(); it != b.written.rend(); ++it) {
    if (it->offset >= offset + size || offset >= it->offset + it->size) continue;
    const uint64_t elem = dtype_size(it->dtype);
    if (elem == 0 || offset < it->offset || offset + size > it->offset + it->size ||
        (offset - it->offset) % elem != 0 || size % elem != 0) {
      return nullptr;
    }
    return &*it;
  }
  return nullptr;
}

void calls_load(const hc::Capture& c, const hc::CallRecord& r, size_t index, ReplayTarget& t,
                CallsState& s, ReplayedCall* out) {
  auto loaded = replay_load(c, r, t.plugin, t.device_index);
  if (!calls_same_status(r, loaded.status(), out)) {
    // A recorded load whose blob this plugin refuses: the status says why.
    if (out->outcome == "failed" && !loaded.ok()) out->detail = loaded.status().to_string();
    if (r.object >= 0) {
      s.executables[r.object].error = "its load (call " + std::to_string(index) + ") failed";
    }
    return;
  }
  if (r.object >= 0 && loaded.ok()) {
    s.load_calls[r.object] = index;
    s.executables[r.object] = {std::move(*loaded), ""};
  }
}

// The executable of an execution: loaded again after a restart when needed.
CallsExecutable* calls_executable(const hc::Capture& c, int64_t id, ReplayTarget& t,
                                  CallsState& s, ReplayedCall* out) {
  auto it = s.executables.find(id);
  if (it == s.executables.end() && s.load_calls.count(id) != 0) {
    const size_t load_index = s.load_calls[id];
    auto loaded = replay_load(c, c.calls[load_index], t.plugin, t.device_index);
    CallsExecutable& slot = s.executables[id];
    if (loaded.ok()) {
      slot.executable = std::move(*loaded);
    } else {
      slot.error = "loading it again (call " + std::to_string(load_index) +
                   ") failed: " + loaded.status().to_string();
    }
    it = s.executables.find(id);
  }
  if (it == s.executables.end() || it->second.executable == nullptr) {
    out->outcome = "skipped";
    out->detail = "executable " + std::to_string(id) + " is not loaded" +
                  (it != s.executables.end() ? ": " + it->second.error : std::string());
    return nullptr;
  }
  return &it->second;
}

// Replays an execution; returns whether it was submitted to the plugin.
bool calls_execute(const hc::Capture& c, const hc::CallRecord& r, size_t index, ReplayTarget& t,
                   CallsState& s, const ReplayOptions& options, ReplayedCall* out) {
  CallsExecutable* exe = calls_executable(c, r.object, t, s, out);
  if (exe == nullptr) return false;
  const size_t n_in = r.inputs.size();
  std::vector<const hc::TensorRecord*> all;
  for (const auto& tensor : r.inputs) all.push_back(&tensor);
  for (const auto& tensor : r.outputs) all.push_back(&tensor);
  auto name_of = [n_in](size_t i) {
    return i < n_in ? "input " + std::to_string(i) : "output " + std::to_string(i - n_in);
  };
  // Everything it needs must exist before anything runs.
  std::vector<CallsBuffer*> placed(all.size(), nullptr);
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]->in_buffer) {
      placed[i] = calls_buffer(s, all[i]->buffer_id, out);
      if (placed[i] == nullptr) {
        out->detail = name_of(i) + ": " + out->detail;
        return false;
      }
    } else if (i < n_in && all[i]->payload < 0) {
      out->outcome = "skipped";
      out->detail = name_of(i) + " is in host memory and has no recorded bytes";
      return false;
    }
  }
  std::vector<host::Fence*> waits;
  for (int64_t id : r.wait_fences) {
    if (id < 0) continue;
    CallsFence* f = calls_fence(s, id, out);
    if (f == nullptr) return false;
    if (!f->not_submitted.empty()) {
      out->outcome = "skipped";
      out->detail = "wait fence " + std::to_string(id) + ": " + f->not_submitted;
      return false;
    }
    waits.push_back(f->fence.get());
  }
  host::Fence* signal = nullptr;
  if (r.signal_fence >= 0) {
    CallsFence* f = calls_fence(s, r.signal_fence, out);
    if (f == nullptr) return false;
    if (f->used && !t.plugin->rearms_fences()) {
      // Recorded on a plugin that re-arms fences (ABI 1.1), replayed on one
      // whose fences signal once: a fresh fence stands for the recorded one
      // (the last execution on the old one was waited for).
      auto fresh = host::Fence::create(t.plugin, t.device_index);
      if (!fresh.ok()) {
        out->outcome = fresh.status().code() == StatusCode::kDeviceLost ? "crashed" : "failed";
        out->detail = "a fresh fence for fence " + std::to_string(r.signal_fence) +
                      " (this plugin's fences signal once): " + fresh.status().to_string();
        return false;
      }
      f->fence = std::move(*fresh);
    }
    f->used = true;
    signal = f->fence.get();
  }
  auto fail = [&](const Status& st) {
    out->outcome = st.code() == StatusCode::kDeviceLost ? "crashed" : "failed";
    out->detail = st.to_string();
    return false;
  };
  std::vector<host::PreparedCall::Operand> operands;
  for (size_t i = 0; i < all.size(); ++i) {
    operands.push_back({i < n_in ? "input" : "output", static_cast<DType>(all[i]->dtype),
                        all[i]->shape, all[i]->byte_size});
  }
  auto call = host::PreparedCall::make(*exe->executable, operands, n_in);
  if (!call.ok()) return fail(call.status());
  // Operands recorded in host memory get buffers of their own, as in the
  // executions mode.
  std::vector<std::unique_ptr<host::DeviceBuffer>> own(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const hc::TensorRecord& tensor = *all[i];
    if (placed[i] != nullptr) {
      CallsBuffer& b = *placed[i];
      // What the host wrote into imported or mapped memory is no call, so
      // the capture has it only as this input's recorded bytes.
      if (i < n_in && tensor.payload >= 0 && (b.imported || b.mapped_ever)) {
        const auto& bytes = c.payloads[tensor.payload].bytes;
        if (b.imported && !b.stand_in) {
          if (!bytes.empty()) std::memcpy(b.host.get() + tensor.offset, bytes.data(), bytes.size());
        } else if (Status st = b.buffer->copy_from_host(tensor.offset, bytes.data(), bytes.size());
                   !st.ok()) {
          return fail(st.with_context(name_of(i) + ": writing its recorded bytes"));
        }
      }
      (*call)->place_in_buffer(i, *b.buffer, tensor.offset);
      continue;
    }
    auto buffer = host::DeviceBuffer::allocate(t.plugin, t.device_index,
                                               std::max<uint64_t>(tensor.byte_size, 1));
    if (!buffer.ok()) return fail(buffer.status());
    if (i < n_in) {
      const auto& bytes = c.payloads[tensor.payload].bytes;
      if (Status st = (*buffer)->copy_from_host(0, bytes.data(), bytes.size()); !st.ok()) {
        return fail(st);
      }
    }
    (*call)->place_in_buffer(i, **buffer);
    own[i] = std::move(*buffer);
  }
  const auto start = std::chrono::steady_clock::now();
  Status st = (*call)->execute(signal, waits);
  if (st.ok() && signal != nullptr) {
    const auto limit = std::max<int64_t>(1, options.execution_timeout.count());
    st = signal->wait(static_cast<uint64_t>(limit) * 1'000'000);
    if (st.code() == StatusCode::kDeadlineExceeded) {
      const std::string late = "the execution did not signal its fence " +
                               std::to_string(r.signal_fence) + " within " +
                               std::to_string(limit) + " ms";
      if (t.plugin->isolated()) {
        // Its process is let go: the restart ends it, and its work with it
        // (what is freed meanwhile is freed in that process).
        out->outcome = "crashed";
        out->detail = late + "; the plugin's process is started again";
      } else {
        // It may still be running in this process on these buffers: never
        // free them under it (a deliberate leak).
        for (auto& b : own) (void)b.release();
        (void)call->release();
        out->outcome = "failed";
        out->detail = late + "; the rest of the replay is skipped (in this process nothing the "
                             "execution may still use can be freed)";
        s.abandoned = "call " + std::to_string(index) + " did not finish: " + late;
      }
      out->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return true;
    }
  }
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!calls_same_status(r, st, out) || !st.ok()) return true;
  std::string unrecorded;
  for (size_t o = 0; o < r.outputs.size(); ++o) {
    const hc::TensorRecord& tensor = r.outputs[o];
    const size_t k = n_in + o;
    const DType dtype = static_cast<DType>(tensor.dtype);
    if (placed[k] != nullptr) {
      calls_note_write(*placed[k], {tensor.offset, tensor.byte_size, dtype, index, o});
    }
    if (tensor.payload < 0) {
      if (unrecorded.empty()) unrecorded = "output " + std::to_string(o);
      continue;
    }
    if (out->outcome == "differs") continue;  // the first difference is the one reported
    std::vector<std::byte> got(tensor.byte_size);
    Status copy = placed[k] != nullptr
                      ? placed[k]->buffer->copy_to_host(tensor.offset, got.data(), got.size())
                      : own[k]->copy_to_host(0, got.data(), got.size());
    if (!copy.ok()) {
      fail(copy.with_context("reading output " + std::to_string(o)));
      return true;
    }
    replay_compare(dtype, c.payloads[tensor.payload].bytes.data(), got.data(), tensor.byte_size,
                   options, "output " + std::to_string(o), o, out);
  }
  if (out->outcome == "match" && !unrecorded.empty()) {
    // It ran (later calls read what it wrote), but nothing to compare is
    // not a match.
    out->outcome = "skipped";
    out->detail = "executed; " + unrecorded + " has no recorded bytes to compare";
  }
  return true;
}

void calls_copy(const hc::Capture& c, const hc::CallRecord& r, size_t index, CallsState& s,
                const ReplayOptions& options, ReplayedCall* out) {
  CallsBuffer* b = calls_buffer(s, r.object, out);
  if (b == nullptr) return;
  if (r.kind == hc::CallKind::kCopyFromHost) {
    if (r.payload < 0) {
      out->outcome = "skipped";
      out->detail = "its bytes were not recorded";
      return;
    }
    Status st = b->buffer->copy_from_host(r.offset, c.payloads[r.payload].bytes.data(), r.size);
    if (calls_same_status(r, st, out) && st.ok()) {
      calls_note_write(*b, {r.offset, r.size, DType::kInvalid, index, 0});
    }
    return;
  }
  std::vector<std::byte> got(r.size);
  Status st = b->buffer->copy_to_host(r.offset, got.data(), r.size);
  if (!calls_same_status(r, st, out) || !st.ok()) return;
  if (r.payload < 0) {
    // It ran, but nothing to compare is not a match.
    out->outcome = "skipped";
    out->detail = "copied; its bytes were not recorded to compare";
    return;
  }
  const std::string range = "bytes " + std::to_string(r.offset) + ".." +
                            std::to_string(r.offset + r.size) + " of buffer " +
                            std::to_string(r.object);
  if (const CallsWritten* w = calls_writer(*b, r.offset, r.size)) {
    replay_compare(w->dtype, c.payloads[r.payload].bytes.data(), got.data(), r.size, options,
                   range + ", output " + std::to_string(w->output) + " of call " +
                       std::to_string(w->call),
                   w->output, out);
  } else {
    replay_compare(DType::kU8, c.payloads[r.payload].bytes.data(), got.data(), r.size, options,
                   range, 0, out);
  }
}

void calls_make_buffer(const hc::CallRecord& r, size_t index, ReplayTarget& t, CallsState& s,
                       ReplayedCall* out) {
  CallsBuffer made;
  made.size = r.size;
  Result<std::unique_ptr<host::DeviceBuffer>> buffer = unavailable("not made");
  if (r.kind == hc::CallKind::kBufferAllocate) {
    buffer = host::DeviceBuffer::allocate(t.plugin, t.device_index, r.size,
                                          static_cast<uint32_t>(r.value));
  } else if (!t.plugin->imports_host_memory()) {
    made.imported = made.stand_in = true;
    buffer = host::DeviceBuffer::allocate(t.plugin, t.device_index, r.size);
  } else {
    made.imported = true;
    auto memory = allocate_aligned(r.size, kCallsImportAlignment);
    if (!memory.ok()) {
      buffer = memory.status();
    } else {
      made.host = std::move(*memory);
      buffer = host::DeviceBuffer::import_host(t.plugin, t.device_index, made.host.get(), r.size);
    }
  }
  if (!calls_same_status(r, buffer.status(), out)) {
    if (r.object >= 0) {
      s.buffers[r.object].error = "making it (call " + std::to_string(index) + ") failed";
    }
    return;
  }
  if (made.stand_in) {
    out->detail = "replayed as buffer_allocate: plugin '" + t.name +
                  "' cannot import host memory here (an isolated plugin never can); what the "
                  "host wrote into it is written with copies";
  }
  if (buffer.ok() && r.object >= 0) {
    made.buffer = std::move(*buffer);
    s.buffers[r.object] = std::move(made);
  }
}

// Drops every handle of a lost plugin; what referred to them is skipped
// from now on, with `why`.
void calls_forget_all(CallsState& s, const std::string& why) {
  s.executables.clear();  // loaded again when an execution needs them
  for (auto& [id, b] : s.buffers) {
    if (b.buffer == nullptr) continue;
    b.buffer.reset();
    b.error = why + ": its contents are gone";
  }
  for (auto& [id, f] : s.fences) {
    if (f.fence == nullptr) continue;
    f.fence.reset();
    f.error = why;
  }
}

void calls_replay_one(const hc::Capture& c, const hc::CallRecord& r, size_t i, ReplayTarget& t,
                      CallsState& s, const ReplayOptions& options, ReplayReport* report,
                      ReplayedCall* out) {
  switch (r.kind) {
    case hc::CallKind::kExecutableLoad:
      calls_load(c, r, i, t, s, out);
      return;
    case hc::CallKind::kExecutableDestroy: {
      auto it = s.executables.find(r.object);
      if (it != s.executables.end() && it->second.executable != nullptr) {
        out->outcome = "match";
      } else if (it == s.executables.end() && s.load_calls.count(r.object) != 0) {
        out->outcome = "match";
        out->detail = "not loaded again since the plugin restarted";
      } else {
        out->outcome = "skipped";
        out->detail = "executable " + std::to_string(r.object) + " is not loaded" +
                      (it != s.executables.end() ? ": " + it->second.error : std::string());
      }
      s.executables.erase(r.object);
      s.load_calls.erase(r.object);
      return;
    }
    case hc::CallKind::kExecute: {
      ++report->executions;
      const bool submitted = calls_execute(c, r, i, t, s, options, out);
      if (auto f = s.fences.find(r.signal_fence); r.signal_fence >= 0 && f != s.fences.end()) {
        f->second.not_submitted =
            submitted ? "" : "the execution that signals it (call " + std::to_string(i) +
                                 ") was not submitted";
      }
      return;
    }
    case hc::CallKind::kBufferAllocate:
    case hc::CallKind::kBufferImport:
      calls_make_buffer(r, i, t, s, out);
      return;
    case hc::CallKind::kBufferFree:
      if (CallsBuffer* b = calls_buffer(s, r.object, out); b != nullptr) {
        if (b->mapped) b->buffer->unmap();
        out->outcome = "match";
      }
      s.buffers.erase(r.object);
      return;
    case hc::CallKind::kCopyFromHost:
    case hc::CallKind::kCopyToHost:
      calls_copy(c, r, i, s, options, out);
      return;
    case hc::CallKind::kBufferMap:
      if (CallsBuffer* b = calls_buffer(s, r.object, out); b != nullptr) {
        auto mapped = b->buffer->map();
        if (calls_same_status(r, mapped.status(), out) && mapped.ok()) {
          b->mapped = b->mapped_ever = true;
        }
      }
      return;
    case hc::CallKind::kBufferUnmap:
      if (CallsBuffer* b = calls_buffer(s, r.object, out); b != nullptr) {
        if (!b->mapped) {
          out->outcome = "skipped";
          out->detail = "buffer " + std::to_string(r.object) + " is not mapped in the replay";
          return;
        }
        b->buffer->unmap();
        b->mapped = false;
        out->outcome = "match";
      }
      return;
    case hc::CallKind::kFenceCreate: {
      auto fence = host::Fence::create(t.plugin, t.device_index);
      if (!calls_same_status(r, fence.status(), out)) {
        if (r.object >= 0) s.fences[r.object].error = "making it (call " + std::to_string(i) + ") failed";
        return;
      }
      if (fence.ok() && r.object >= 0) {
        CallsFence made;
        made.fence = std::move(*fence);
        s.fences[r.object] = std::move(made);
      }
      return;
    }
    case hc::CallKind::kFenceDestroy:
      if (calls_fence(s, r.object, out) != nullptr) out->outcome = "match";
      s.fences.erase(r.object);
      return;
    case hc::CallKind::kFenceSignal:
      if (CallsFence* f = calls_fence(s, r.object, out); f != nullptr) {
        calls_same_status(r, f->fence->signal(), out);
      }
      return;
    case hc::CallKind::kFenceWait:
      if (CallsFence* f = calls_fence(s, r.object, out); f != nullptr) {
        if (!f->not_submitted.empty()) {
          out->outcome = "skipped";
          out->detail = f->not_submitted;
          return;
        }
        const bool timed_out = r.status_code == LOOM_STATUS_DEADLINE_EXCEEDED;
        Status st = f->fence->wait(timed_out ? std::min(r.timeout_ns, kCallsFenceWaitNs)
                                             : kCallsFenceWaitNs);
        if (timed_out && (st.ok() || st.code() == StatusCode::kDeadlineExceeded)) {
          // How long work took is the machine's, not the plugin's answer.
          out->outcome = "match";
          out->detail = "recorded deadline_exceeded after " + std::to_string(r.timeout_ns) +
                        " ns, replayed " + (st.ok() ? std::string("ok") : "deadline_exceeded") +
                        " (timing-dependent: not compared)";
        } else {
          calls_same_status(r, st, out);
        }
      }
      return;
    case hc::CallKind::kFenceQuery:
      if (CallsFence* f = calls_fence(s, r.object, out); f != nullptr) {
        if (!f->not_submitted.empty()) {
          out->outcome = "skipped";
          out->detail = f->not_submitted;
          return;
        }
        auto signaled = f->fence->query();
        if (calls_same_status(r, signaled.status(), out) && signaled.ok()) {
          out->detail = std::string("signaled: recorded ") + (r.flag ? "yes" : "no") +
                        ", replayed " + (*signaled ? "yes" : "no") +
                        " (timing-dependent: not compared)";
        }
      }
      return;
    default:
      return;
  }
}

}  // namespace

Status replay_all_calls(const hc::Capture& c, uint32_t source, ReplayTarget& target,
                        const ReplayOptions& options, ReplayReport* report) {
  CallsState state;
  // Set when the plugin's process died: the next call starts a fresh one.
  // The lost plugin's buffers and fences are gone with their contents, so
  // calls on them are skipped, saying so; executables are loaded again from
  // the capture; buffers and fences made after the restart replay as usual.
  std::string lost;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const hc::CallRecord& r = c.calls[i];
    if (r.plugin != source || !replay_calls_mode_replays(r.kind)) continue;
    ReplayedCall out;
    out.call = i;
    out.kind = std::string(hc::call_kind_name(r.kind));
    out.object = r.object;
    if (!lost.empty() && target.restarts < kReplayMaxRestarts) {
      calls_forget_all(state, lost);
      if (Status st = restart_replay_target(&target); st.ok()) {
        lost.clear();
      } else {
        lost += "; " + st.message();
      }
    }
    if (!state.abandoned.empty()) {
      if (r.kind == hc::CallKind::kExecute) ++report->executions;
      out.outcome = "skipped";
      out.detail = state.abandoned;
    } else if (!lost.empty()) {
      if (r.kind == hc::CallKind::kExecute) ++report->executions;
      out.outcome = "skipped";
      out.detail = lost;
    } else {
      calls_replay_one(c, r, i, target, state, options, report, &out);
      if (out.outcome == "crashed") lost = "the plugin was lost at call " + std::to_string(i);
    }
    ++report->replayed_calls;
    replay_add(report, std::move(out));
  }
  if (!state.abandoned.empty()) {
    // An execution may still be running in this process on the state's
    // buffers and fences, inside the plugin: keep all of them alive (a
    // deliberate leak; the process is about to report and exit).
    (void)new CallsState(std::move(state));
    (void)new std::shared_ptr<host::LoadedPlugin>(target.plugin);
    (void)target.host.release();
    return Status();
  }
  // Handles go before the plugin they came from.
  state = CallsState();
  return Status();
}

}  // namespace loom::runtime
