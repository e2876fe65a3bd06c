// Tolerances, tensor comparison, and the capture summary and dump
// (loom/capture.hpp).
#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "host/recording/capture_model.hpp"
#include "loom/capture.hpp"

namespace loom {

namespace {

namespace hc = host::capture;

float capture_half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      exp = 127 - 15 + 1;
      while ((mant & 0x400) == 0) {
        mant <<= 1;
        --exp;
      }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// A sign-magnitude bit pattern mapped onto a line where adjacent floats are
// one apart.
int64_t capture_ordered(uint64_t bits, int width) {
  const uint64_t sign_bit = uint64_t{1} << (width - 1);
  const uint64_t magnitude = bits & (sign_bit - 1);
  return (bits & sign_bit) != 0 ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
}

struct CaptureFloatView {
  double value;
  int64_t ordered;
};

CaptureFloatView capture_float_at(DType dtype, const std::byte* base, uint64_t i) {
  switch (dtype) {
    case DType::kF32: {
      uint32_t b;
      std::memcpy(&b, base + i * 4, 4);
      float f;
      std::memcpy(&f, &b, 4);
      return {f, capture_ordered(b, 32)};
    }
    case DType::kF64: {
      uint64_t b;
      std::memcpy(&b, base + i * 8, 8);
      double d;
      std::memcpy(&d, &b, 8);
      return {d, capture_ordered(b, 64)};
    }
    case DType::kF16: {
      uint16_t b;
      std::memcpy(&b, base + i * 2, 2);
      return {capture_half_to_float(b), capture_ordered(b, 16)};
    }
    default: {  // bf16
      uint16_t b;
      std::memcpy(&b, base + i * 2, 2);
      const uint32_t wide = static_cast<uint32_t>(b) << 16;
      float f;
      std::memcpy(&f, &wide, 4);
      return {f, capture_ordered(b, 16)};
    }
  }
}

double capture_int_at(DType dtype, const std::byte* base, uint64_t i) {
  switch (dtype) {
    case DType::kI8: { int8_t v; std::memcpy(&v, base + i, 1); return v; }
    case DType::kU8: case DType::kBool: { uint8_t v; std::memcpy(&v, base + i, 1); return v; }
    case DType::kI16: { int16_t v; std::memcpy(&v, base + i * 2, 2); return v; }
    case DType::kU16: { uint16_t v; std::memcpy(&v, base + i * 2, 2); return v; }
    case DType::kI32: { int32_t v; std::memcpy(&v, base + i * 4, 4); return v; }
    case DType::kU32: { uint32_t v; std::memcpy(&v, base + i * 4, 4); return v; }
    case DType::kI64: { int64_t v; std::memcpy(&v, base + i * 8, 8); return static_cast<double>(v); }
    default: { uint64_t v; std::memcpy(&v, base + i * 8, 8); return static_cast<double>(v); }
  }
}

bool capture_is_float(DType d) {
  return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16 || d == DType::kF64;
}

Result<double> capture_number(std::string_view text, std::string_view what) {
  std::string s(text);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno != 0 || !(v >= 0) || std::isinf(v)) {
    return invalid_argument("tolerance bound " + std::string(what) + ":" + s +
                            " needs a non-negative number");
  }
  return v;
}

}  // namespace

Status parse_tolerance(std::string_view text, std::map<DType, FloatTolerance>* tolerances) {
  const std::string full(text);
  std::vector<DType> dtypes = {DType::kF32, DType::kF16, DType::kBF16, DType::kF64};
  std::string_view bounds = text;
  if (const size_t eq = text.find('='); eq != std::string_view::npos) {
    const std::string_view name = text.substr(0, eq);
    bounds = text.substr(eq + 1);
    if (name == "f32") dtypes = {DType::kF32};
    else if (name == "f16") dtypes = {DType::kF16};
    else if (name == "bf16") dtypes = {DType::kBF16};
    else if (name == "f64") dtypes = {DType::kF64};
    else {
      return invalid_argument("tolerance '" + full + "': unknown dtype '" + std::string(name) +
                              "' (f32, f16, bf16, f64; integers are always exact)");
    }
  }
  FloatTolerance t;
  if (bounds.empty()) return invalid_argument("tolerance '" + full + "' has no bound");
  while (!bounds.empty()) {
    const size_t comma = bounds.find(',');
    const std::string_view item = bounds.substr(0, comma);
    bounds = comma == std::string_view::npos ? std::string_view() : bounds.substr(comma + 1);
    if (item == "exact") continue;
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) {
      return invalid_argument("tolerance '" + full + "': bound '" + std::string(item) +
                              "' is not ulps:N, rel:X, abs:X or exact");
    }
    const std::string_view kind = item.substr(0, colon);
    LOOM_ASSIGN_OR_RETURN(double v, capture_number(item.substr(colon + 1), kind));
    if (kind == "ulps") t.ulps = static_cast<uint64_t>(v);
    else if (kind == "rel") t.rel = v;
    else if (kind == "abs") t.abs = v;
    else {
      return invalid_argument("tolerance '" + full + "': unknown bound '" + std::string(kind) +
                              "' (ulps, rel, abs)");
    }
  }
  for (DType d : dtypes) (*tolerances)[d] = t;
  return Status();
}

std::optional<TensorDifference> compare_tensor(DType dtype, const void* recorded,
                                               const void* replayed, uint64_t byte_size,
                                               const FloatTolerance& tol) {
  const size_t elem = dtype_size(dtype);
  if (elem == 0) return std::nullopt;
  const auto* a = static_cast<const std::byte*>(recorded);
  const auto* b = static_cast<const std::byte*>(replayed);
  const uint64_t count = byte_size / elem;
  std::optional<TensorDifference> worst;
  uint64_t differing = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (std::memcmp(a + i * elem, b + i * elem, elem) == 0) continue;
    TensorDifference d;
    d.index = i;
    if (capture_is_float(dtype)) {
      const CaptureFloatView x = capture_float_at(dtype, a, i);
      const CaptureFloatView y = capture_float_at(dtype, b, i);
      if (std::isnan(x.value) && std::isnan(y.value)) continue;
      d.recorded = x.value;
      d.replayed = y.value;
      const bool nan = std::isnan(x.value) || std::isnan(y.value);
      d.abs_diff = nan ? std::numeric_limits<double>::infinity() : std::fabs(x.value - y.value);
      const int64_t gap = x.ordered - y.ordered;
      d.ulps = static_cast<uint64_t>(gap < 0 ? -gap : gap);
      if (!nan && ((tol.ulps > 0 && d.ulps <= tol.ulps) ||
                   (tol.rel > 0 && d.abs_diff <= tol.rel * std::fabs(x.value)) ||
                   (tol.abs > 0 && d.abs_diff <= tol.abs))) {
        continue;
      }
    } else {
      d.recorded = capture_int_at(dtype, a, i);
      d.replayed = capture_int_at(dtype, b, i);
      d.abs_diff = std::fabs(d.recorded - d.replayed);
    }
    ++differing;
    if (!worst || d.abs_diff > worst->abs_diff) worst = d;
  }
  if (worst) worst->elements_differing = differing;
  return worst;
}

Result<CaptureSummary> summarize_capture(const std::filesystem::path& path) {
  LOOM_ASSIGN_OR_RETURN(hc::Capture c, hc::read_capture_file(path));
  CaptureSummary s;
  s.schema_version = c.schema_version;
  s.loom_version = c.loom_version;
  s.created_unix_s = c.created_unix_s;
  s.host = c.host;
  for (const auto& p : c.plugins) s.plugins.push_back({p.name, p.version, p.abi_version, p.isolated});
  for (const auto& d : c.devices) s.devices.push_back({c.plugins[d.plugin].name, d.uri, d.name});
  s.payloads = c.payloads.size();
  for (const auto& p : c.payloads) s.payload_bytes += p.bytes.size();
  s.calls = c.calls.size();
  for (const auto& r : c.calls) {
    ++s.calls_by_kind[std::string(hc::call_kind_name(r.kind))];
    if (r.status_code != 0) ++s.failed_calls;
    if (r.kind == hc::CallKind::kExecute) ++s.executions;
  }
  return s;
}

Status dump_capture(const std::filesystem::path& path, std::ostream& out) {
  LOOM_ASSIGN_OR_RETURN(hc::Capture c, hc::read_capture_file(path));
  using nlohmann::json;
  json head;
  head["capture"] = path.string();
  head["schema_version"] = c.schema_version;
  head["loom_version"] = c.loom_version;
  head["created_unix_s"] = c.created_unix_s;
  head["host"] = c.host;
  json plugins = json::array();
  for (const auto& p : c.plugins) {
    plugins.push_back({{"name", p.name}, {"version", p.version}, {"vendor", p.vendor},
                       {"abi_version", p.abi_version}, {"library_hash", p.library_hash},
                       {"loader_keys", p.loader_keys}, {"isolated", p.isolated}});
  }
  head["plugins"] = plugins;
  json devices = json::array();
  for (const auto& d : c.devices) {
    devices.push_back({{"plugin", d.plugin}, {"uri", d.uri}, {"name", d.name}, {"kind", d.kind},
                       {"capabilities", d.capabilities}});
  }
  head["devices"] = devices;
  head["payloads"] = c.payloads.size();
  out << head.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  auto payload = [&](int64_t i) -> json {
    if (i < 0) return nullptr;
    return {{"index", i}, {"hash", c.payloads[i].hash}, {"bytes", c.payloads[i].bytes.size()}};
  };
  auto tensors = [&](const std::vector<hc::TensorRecord>& list) {
    json a = json::array();
    for (const auto& t : list) {
      json j = {{"dtype", std::string(dtype_name(static_cast<DType>(t.dtype)))},
                {"shape", t.shape},
                {"byte_size", t.byte_size},
                {"payload", payload(t.payload)}};
      if (t.in_buffer) j["buffer"] = t.buffer_id;
      a.push_back(std::move(j));
    }
    return a;
  };
  for (size_t i = 0; i < c.calls.size(); ++i) {
    const hc::CallRecord& r = c.calls[i];
    json j;
    j["call"] = i;
    j["kind"] = std::string(hc::call_kind_name(r.kind));
    j["plugin"] = c.plugins[r.plugin].name;
    j["thread"] = r.thread;
    j["start_ns"] = r.start_ns;
    j["duration_ns"] = r.duration_ns;
    j["status"] = std::string(status_code_name(static_cast<StatusCode>(r.status_code)));
    if (!r.message.empty()) j["message"] = r.message;
    if (r.device >= 0) j["device"] = c.devices[r.device].uri;
    if (r.object >= 0) j["object"] = r.object;
    if (!r.loader_key.empty()) {
      j["loader_key"] = r.loader_key;
      j["format_version"] = r.format_version;
    }
    if (r.payload >= 0) j["payload"] = payload(r.payload);
    if (r.result_payload >= 0) j["result_payload"] = payload(r.result_payload);
    if (!r.options.empty()) {
      json o = json::object();
      for (const auto& [k, v] : r.options) o[k] = v;
      j["options"] = o;
    }
    if (!r.inputs.empty()) j["inputs"] = tensors(r.inputs);
    if (!r.outputs.empty() || r.kind == hc::CallKind::kExecute) j["outputs"] = tensors(r.outputs);
    if (!r.wait_fences.empty()) j["wait_fences"] = r.wait_fences;
    if (r.signal_fence >= 0) j["signal_fence"] = r.signal_fence;
    if (r.size != 0) j["size"] = r.size;
    if (r.offset != 0) j["offset"] = r.offset;
    if (r.kind == hc::CallKind::kFenceWait) j["timeout_ns"] = r.timeout_ns;
    if (r.kind == hc::CallKind::kFenceQuery) j["signaled"] = r.flag;
    if (r.kind == hc::CallKind::kNegotiate || r.kind == hc::CallKind::kEstimate) j["value"] = r.value;
    if (r.kind == hc::CallKind::kNegotiate) {
      auto version = [](uint32_t v) {
        return std::to_string(v >> 16) + "." + std::to_string(v & 0xffff);
      };
      j["abi_chosen"] = version(static_cast<uint32_t>(r.value));
      if (r.abi_max != 0) j["abi_offered"] = version(r.abi_min) + "-" + version(r.abi_max);
    }
    out << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  }
  if (!out) return data_loss("writing the dump of " + path.string() + " failed");
  return Status();
}

}  // namespace loom
