#include "program_file/function_layout.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom {
namespace {

// 256: the largest storage-buffer offset alignment Vulkan allows, so that the
// runtime can hand every slot to a device as an offset into the arena it
// imported (buffer_import_host) instead of staging it through copies.
constexpr uint64_t kArenaAlignment = 256;

// IREE's notation: an open dimension is null. A sequence (format 1.6) is
// ["sequence", dtype], an optional ["optional", its element's record].
nlohmann::json type_record(const ValueDef& v) {
  if (v.kind == ValueKind::kSequence || v.kind == ValueKind::kOptionalSequence) {
    nlohmann::json seq = nlohmann::json::array({"sequence", std::string(dtype_name(v.dtype))});
    if (v.kind == ValueKind::kSequence) return seq;
    return nlohmann::json::array({"optional", std::move(seq)});
  }
  if (v.kind == ValueKind::kOptionalTensor) {
    ValueDef element = v;
    element.kind = ValueKind::kTensor;
    return nlohmann::json::array({"optional", type_record(element)});
  }
  nlohmann::json r = nlohmann::json::array({"ndarray", std::string(dtype_name(v.dtype)), v.shape.size()});
  for (int64_t d : v.shape) {
    if (d < 0) {
      r.push_back(nullptr);
    } else {
      r.push_back(d);
    }
  }
  return r;
}

// Loom's addition for open dimensions: per argument, each dimension's symbol
// (null where fixed or anonymous) and its bounds ([min, max], 0 = none).
nlohmann::json symbol_record(const ValueDef& v) {
  nlohmann::json dims = nlohmann::json::array();
  for (size_t d = 0; d < v.shape.size(); ++d) {
    if (v.shape[d] >= 0) {
      dims.push_back(nullptr);
      continue;
    }
    nlohmann::json dim = nlohmann::json::object();
    if (d < v.dim_symbols.size() && !v.dim_symbols[d].empty()) dim["symbol"] = v.dim_symbols[d];
    const int64_t lo = d < v.dim_min.size() ? v.dim_min[d] : 0;
    const int64_t hi = d < v.dim_max.size() ? v.dim_max[d] : 0;
    if (lo != 0 || hi != 0) dim["range"] = {lo, hi};
    dims.push_back(std::move(dim));
  }
  return dims;
}

bool has_open_dims(const ValueDef& v) {
  return std::any_of(v.shape.begin(), v.shape.end(), [](int64_t d) { return d < 0; });
}

}  // namespace

void plan_function_memory(FunctionDef& fn) {
  const size_t n = fn.values.size();
  // Inputs, results and constants have storage of their own.
  std::vector<bool> placed(n, false);
  for (uint32_t v : fn.inputs) placed[v] = true;
  for (uint32_t v : fn.outputs) placed[v] = true;
  for (size_t v = 0; v < n; ++v) placed[v] = placed[v] || fn.values[v].parameter >= 0;
  std::vector<int64_t> last_read(n, -1);
  for (size_t i = 0; i < fn.instructions.size(); ++i) {
    for (uint32_t v : fn.instructions[i].inputs) {
      if (v != kAbsentValue && v < n) last_read[v] = static_cast<int64_t>(i);
    }
  }
  struct Slot {
    uint64_t offset, size;
    int64_t busy_until;  // the last instruction that reads what it holds
  };
  std::vector<Slot> slots;  // sorted by offset
  uint64_t arena = 0;
  fn.memory_plan = MemoryPlanDef{};
  fn.memory_plan.alignment = kArenaAlignment;
  for (size_t i = 0; i < fn.instructions.size(); ++i) {
    const auto now = static_cast<int64_t>(i);
    for (uint32_t v : fn.instructions[i].outputs) {
      if (v >= n || placed[v]) continue;
      placed[v] = true;
      uint64_t bytes = dtype_size(fn.values[v].dtype);
      for (int64_t d : fn.values[v].shape) bytes *= static_cast<uint64_t>(d);
      const uint64_t size = (std::max<uint64_t>(bytes, 1) + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
      // A value nobody reads still needs room while its writer runs.
      const int64_t until = std::max(last_read[v], now);
      auto fit = std::find_if(slots.begin(), slots.end(),
                              [&](const Slot& s) { return s.busy_until < now && s.size >= size; });
      uint64_t offset;
      if (fit != slots.end()) {
        offset = fit->offset;
        // Split off what the value does not need, so a later one can use it.
        if (fit->size > size) {
          Slot rest{fit->offset + size, fit->size - size, fit->busy_until};
          fit->size = size;
          fit->busy_until = until;
          slots.insert(fit + 1, rest);
        } else {
          fit->busy_until = until;
        }
      } else {
        offset = arena;
        arena += size;
        slots.push_back({offset, size, until});
      }
      fn.memory_plan.slots.push_back({v, offset, size});
    }
  }
  fn.memory_plan.arena_size = arena;
}

std::string function_reflection(const FunctionDef& f) {
  nlohmann::json args = nlohmann::json::array(), results = nlohmann::json::array();
  nlohmann::json in_names = nlohmann::json::array(), out_names = nlohmann::json::array();
  for (uint32_t v : f.inputs) {
    args.push_back(type_record(f.values[v]));
    in_names.push_back(f.values[v].name);
  }
  for (uint32_t v : f.outputs) {
    results.push_back(type_record(f.values[v]));
    out_names.push_back(f.values[v].name);
  }
  nlohmann::json out{{"v", 1}, {"a", args}, {"r", results}, {"names", {{"a", in_names}, {"r", out_names}}}};
  bool open = false;
  for (uint32_t v : f.inputs) open = open || has_open_dims(f.values[v]);
  for (uint32_t v : f.outputs) open = open || has_open_dims(f.values[v]);
  if (open) {
    nlohmann::json a = nlohmann::json::array(), r = nlohmann::json::array();
    for (uint32_t v : f.inputs) a.push_back(symbol_record(f.values[v]));
    for (uint32_t v : f.outputs) r.push_back(symbol_record(f.values[v]));
    out["dims"] = {{"a", a}, {"r", r}};
  }
  return out.dump();
}

}  // namespace loom
