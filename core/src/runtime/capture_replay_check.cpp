// Checking a capture before the calls mode replays it (capture_replay.hpp):
// the ids and ranges its calls use must agree with the calls that made
// them, so that the replay can index without checking again and bad input
// is one line naming the call, not a crash.
#include <unordered_map>

#include "runtime/capture_replay.hpp"

namespace loom::runtime {

namespace hc = host::capture;

bool replay_calls_mode_replays(hc::CallKind kind) {
  switch (kind) {
    case hc::CallKind::kExecutableLoad:
    case hc::CallKind::kExecutableDestroy:
    case hc::CallKind::kExecute:
    case hc::CallKind::kBufferAllocate:
    case hc::CallKind::kBufferImport:
    case hc::CallKind::kBufferFree:
    case hc::CallKind::kCopyFromHost:
    case hc::CallKind::kCopyToHost:
    case hc::CallKind::kBufferMap:
    case hc::CallKind::kBufferUnmap:
    case hc::CallKind::kFenceCreate:
    case hc::CallKind::kFenceDestroy:
    case hc::CallKind::kFenceSignal:
    case hc::CallKind::kFenceWait:
    case hc::CallKind::kFenceQuery:
      return true;
    default:
      return false;
  }
}

namespace {

// `offset + size` within `limit`, without overflow.
bool check_calls_fits(uint64_t offset, uint64_t size, uint64_t limit) {
  return offset <= limit && size <= limit - offset;
}

}  // namespace

Status check_all_calls(const hc::Capture& c, uint32_t source, const std::string& where) {
  std::unordered_map<int64_t, uint64_t> buffers;  // live buffer id -> size
  std::unordered_map<int64_t, bool> fences;       // live fence ids
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const hc::CallRecord& r = c.calls[i];
    if (r.plugin != source || !replay_calls_mode_replays(r.kind)) continue;
    const std::string at =
        where + ": call " + std::to_string(i) + " (" + std::string(hc::call_kind_name(r.kind)) + ")";
    auto buffer = [&](int64_t id, std::string_view what) -> Result<uint64_t> {
      auto it = buffers.find(id);
      if (it == buffers.end()) {
        return data_loss(at + ": " + std::string(what) + "buffer " + std::to_string(id) +
                         " was not made by an earlier call, or was freed");
      }
      return it->second;
    };
    auto fence = [&](int64_t id) -> Status {
      if (fences.count(id) == 0) {
        return data_loss(at + ": fence " + std::to_string(id) +
                         " was not made by an earlier call, or was destroyed");
      }
      return Status();
    };
    switch (r.kind) {
      case hc::CallKind::kBufferAllocate:
      case hc::CallKind::kBufferImport:
        if (r.status_code != 0 || r.object < 0) break;
        if (buffers.count(r.object) != 0) {
          return data_loss(at + ": buffer " + std::to_string(r.object) +
                           " is made again while it is alive");
        }
        buffers[r.object] = r.size;
        break;
      case hc::CallKind::kBufferFree:
        LOOM_RETURN_IF_ERROR(buffer(r.object, "").status());
        buffers.erase(r.object);
        break;
      case hc::CallKind::kBufferMap:
      case hc::CallKind::kBufferUnmap:
        LOOM_RETURN_IF_ERROR(buffer(r.object, "").status());
        break;
      case hc::CallKind::kCopyFromHost:
      case hc::CallKind::kCopyToHost: {
        LOOM_ASSIGN_OR_RETURN(uint64_t size, buffer(r.object, ""));
        if (!check_calls_fits(r.offset, r.size, size)) {
          return data_loss(at + ": copies " + std::to_string(r.size) + " bytes at offset " +
                           std::to_string(r.offset) + " of buffer " + std::to_string(r.object) +
                           ", which has " + std::to_string(size) + " bytes");
        }
        if (r.payload >= 0 && c.payloads[r.payload].bytes.size() != r.size) {
          return data_loss(at + ": copies " + std::to_string(r.size) + " bytes, its payload " +
                           std::to_string(r.payload) + " has " +
                           std::to_string(c.payloads[r.payload].bytes.size()));
        }
        break;
      }
      case hc::CallKind::kFenceCreate:
        if (r.status_code != 0 || r.object < 0) break;
        if (fences.count(r.object) != 0) {
          return data_loss(at + ": fence " + std::to_string(r.object) +
                           " is made again while it is alive");
        }
        fences[r.object] = true;
        break;
      case hc::CallKind::kFenceDestroy:
        LOOM_RETURN_IF_ERROR(fence(r.object));
        fences.erase(r.object);
        break;
      case hc::CallKind::kFenceSignal:
      case hc::CallKind::kFenceWait:
      case hc::CallKind::kFenceQuery:
        LOOM_RETURN_IF_ERROR(fence(r.object));
        break;
      case hc::CallKind::kExecute: {
        for (size_t k = 0; k < r.inputs.size() + r.outputs.size(); ++k) {
          const bool input = k < r.inputs.size();
          const hc::TensorRecord& t = input ? r.inputs[k] : r.outputs[k - r.inputs.size()];
          if (!t.in_buffer) continue;
          const std::string name = (input ? "input " + std::to_string(k)
                                          : "output " + std::to_string(k - r.inputs.size()));
          LOOM_ASSIGN_OR_RETURN(uint64_t size, buffer(t.buffer_id, name + "'s "));
          if (!check_calls_fits(t.offset, t.byte_size, size)) {
            return data_loss(at + ": " + name + " (" + std::to_string(t.byte_size) +
                             " bytes at offset " + std::to_string(t.offset) + ") lies outside buffer " +
                             std::to_string(t.buffer_id) + ", which has " + std::to_string(size) +
                             " bytes");
          }
        }
        for (int64_t id : r.wait_fences) {
          if (id >= 0) LOOM_RETURN_IF_ERROR(fence(id));
        }
        if (r.signal_fence >= 0) LOOM_RETURN_IF_ERROR(fence(r.signal_fence));
        break;
      }
      default:
        break;
    }
  }
  return Status();
}

}  // namespace loom::runtime
