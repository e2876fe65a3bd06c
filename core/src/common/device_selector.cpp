// Device URIs and selectors (loom/device.hpp): parsing and matching. Placement
// itself, which needs plugins, lives in the runtime (runtime/placement.cpp).
#include <algorithm>

#include "common/text.hpp"
#include "loom/device.hpp"
#include "loom/plugin.h"

namespace loom {
namespace {

constexpr DeviceKind kKinds[] = {DeviceKind::kCpu, DeviceKind::kGpu, DeviceKind::kAccelerator,
                                 DeviceKind::kVirtual};
constexpr PlacementPolicy kPolicies[] = {PlacementPolicy::kFastest,
                                         PlacementPolicy::kPreferAccelerator};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Splits at `sep`, keeping empty pieces so that the caller can refuse them.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end == std::string_view::npos ? s.npos : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '_' || c == '.';
}

std::vector<std::string> capability_list() {
  std::vector<std::string> out;
  for (uint32_t bit = 0; bit < 64; ++bit) {
    for (std::string& name : capability_names(uint64_t{1} << bit)) out.push_back(std::move(name));
  }
  return out;
}

uint64_t capability_bit(std::string_view name) {
  for (uint32_t bit = 0; bit < 64; ++bit) {
    const auto names = capability_names(uint64_t{1} << bit);
    if (!names.empty() && names[0] == name) return uint64_t{1} << bit;
  }
  return 0;
}

std::vector<std::string> dtype_list() {
  std::vector<std::string> out;
  for (uint8_t d = 1; d <= static_cast<uint8_t>(DType::kBool); ++d) {
    out.emplace_back(dtype_name(static_cast<DType>(d)));
  }
  return out;
}

// "unknown device kind 'gpuu' (kinds: cpu, gpu, ...); did you mean 'kind:gpu'?"
Status unknown_value(std::string_view what, std::string_view prefix, std::string_view value,
                     const std::vector<std::string>& known) {
  std::string message = "unknown " + std::string(what) + " '" + std::string(value) + "' (" +
                        join(known) + ")";
  const std::string near = nearest(value, known, 2);
  if (!near.empty()) message += "; did you mean '" + std::string(prefix) + near + "'?";
  return invalid_argument(message);
}

Result<SelectorTerm> parse_term(std::string_view text) {
  SelectorTerm term;
  term.text = std::string(text);
  if (text == "any") return term;
  if (text.find("://") != std::string_view::npos) {
    LOOM_ASSIGN_OR_RETURN(DeviceUri uri, parse_device_uri(text));
    (void)uri;
    term.type = SelectorTerm::Type::kUri;
    term.value = std::string(text);
    return term;
  }
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    for (char c : text) {
      if (!is_name_char(c)) {
        return invalid_argument("'" + std::string(text) +
                                "' is not a plugin name, device URI or selector term (plugin "
                                "names use letters, digits, '-', '_' and '.')");
      }
    }
    term.type = SelectorTerm::Type::kPlugin;
    term.value = std::string(text);
    return term;
  }
  const std::string_view prefix = text.substr(0, colon + 1);
  const std::string_view value = text.substr(colon + 1);
  if (prefix == "kind:") {
    std::vector<std::string> names;
    for (DeviceKind k : kKinds) {
      names.emplace_back(device_kind_name(k));
      if (device_kind_name(k) == value) {
        term.type = SelectorTerm::Type::kKind;
        term.kind = k;
        return term;
      }
    }
    return unknown_value("device kind", prefix, value, names);
  }
  if (prefix == "dtype:") {
    const DType d = dtype_from_name(value);
    if (d == DType::kInvalid) return unknown_value("dtype", prefix, value, dtype_list());
    term.type = SelectorTerm::Type::kDType;
    term.dtype = d;
    return term;
  }
  if (prefix == "cap:") {
    const uint64_t bit = capability_bit(value);
    if (bit == 0) return unknown_value("capability", prefix, value, capability_list());
    term.type = SelectorTerm::Type::kCapability;
    term.capability = bit;
    return term;
  }
  if (prefix == "policy:") {
    std::vector<std::string> names;
    for (PlacementPolicy p : kPolicies) {
      names.emplace_back(placement_policy_name(p));
      if (placement_policy_name(p) == value) {
        term.type = SelectorTerm::Type::kPolicy;
        term.policy = p;
        return term;
      }
    }
    return unknown_value("policy", prefix, value, names);
  }
  std::string message = "unknown selector term '" + std::string(text) +
                        "' (terms: a device URI such as cpu-simd://0, a plugin name, kind:K, "
                        "dtype:T, cap:C, policy:P, any)";
  const std::string near =
      nearest(prefix, {"kind:", "dtype:", "cap:", "policy:"}, 2);
  if (!near.empty()) message += "; did you mean '" + near + std::string(value) + "'?";
  return invalid_argument(message);
}

}  // namespace

Result<DeviceUri> parse_device_uri(std::string_view text) {
  const size_t sep = text.find("://");
  if (sep == std::string_view::npos) {
    return invalid_argument("'" + std::string(text) +
                            "' is not a device URI (a device URI looks like 'cpu-simd://0')");
  }
  DeviceUri uri{text.substr(0, sep), text.substr(sep + 3)};
  if (uri.plugin.empty() || uri.device.empty()) {
    return invalid_argument("device URI '" + std::string(text) + "' has an empty " +
                            (uri.plugin.empty() ? "plugin name" : "device part") +
                            " (a device URI looks like 'cpu-simd://0')");
  }
  return uri;
}

std::string_view placement_policy_name(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kNone: return "none";
    case PlacementPolicy::kFastest: return "fastest";
    case PlacementPolicy::kPreferAccelerator: return "prefer-accelerator";
  }
  return "unknown";
}

Result<DeviceSelector> DeviceSelector::parse(std::string_view text) {
  DeviceSelector selector;
  selector.text_ = std::string(trim(text));
  if (selector.text_.empty()) return selector;
  const std::string context = "device selector '" + selector.text_ + "'";
  size_t position = 0;
  for (std::string_view raw : split(selector.text_, ',')) {
    ++position;
    SelectorAlternative alternative;
    alternative.text = std::string(trim(raw));
    if (alternative.text.empty()) {
      return invalid_argument(context + ": alternative " + std::to_string(position) +
                              " is empty (two commas in a row, or one at an end)");
    }
    for (std::string_view raw_term : split(alternative.text, '&')) {
      const std::string_view term_text = trim(raw_term);
      if (term_text.empty()) {
        return invalid_argument(context + ": alternative '" + alternative.text +
                                "' has an empty term around '&'");
      }
      auto term = parse_term(term_text);
      if (!term.ok()) return term.status().with_context(context);
      if (term->type == SelectorTerm::Type::kPolicy) {
        if (alternative.policy != PlacementPolicy::kNone) {
          return invalid_argument(context + ": alternative '" + alternative.text +
                                  "' names more than one policy");
        }
        alternative.policy = term->policy;
      }
      alternative.terms.push_back(std::move(*term));
    }
    selector.alternatives_.push_back(std::move(alternative));
  }
  return selector;
}

std::vector<std::string> DeviceSelector::named_plugins() const {
  std::vector<std::string> out;
  for (const SelectorAlternative& alternative : alternatives_) {
    std::string named;
    for (const SelectorTerm& term : alternative.terms) {
      if (term.type == SelectorTerm::Type::kPlugin) named = term.value;
      if (term.type == SelectorTerm::Type::kUri) {
        named = std::string(parse_device_uri(term.value)->plugin);
      }
    }
    if (named.empty()) return {};
    if (std::find(out.begin(), out.end(), named) == out.end()) out.push_back(named);
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> DeviceSelector::order(
    const std::vector<DeviceInfo>& devices) const {
  std::vector<std::pair<size_t, size_t>> out;
  std::vector<bool> taken(devices.size(), false);
  for (size_t a = 0; a < alternatives_.size(); ++a) {
    const SelectorAlternative& alternative = alternatives_[a];
    std::vector<size_t> matched;
    for (size_t d = 0; d < devices.size(); ++d) {
      if (!taken[d] && alternative.matches(devices[d])) matched.push_back(d);
    }
    std::stable_sort(matched.begin(), matched.end(), [&](size_t x, size_t y) {
      return policy_rank(alternative.policy, devices[x]) >
             policy_rank(alternative.policy, devices[y]);
    });
    for (size_t d : matched) {
      taken[d] = true;
      out.emplace_back(d, a);
    }
  }
  return out;
}

double policy_rank(PlacementPolicy policy, const DeviceInfo& device) {
  if (policy == PlacementPolicy::kNone) return 0;
  switch (device.kind) {
    case DeviceKind::kAccelerator: return 3;
    case DeviceKind::kGpu: return 2;
    case DeviceKind::kCpu: return 1;
    case DeviceKind::kVirtual: return 0;
  }
  return 0;
}

bool SelectorAlternative::matches(const DeviceInfo& device) const {
  return mismatch(device).empty();
}

std::string SelectorAlternative::mismatch(const DeviceInfo& device) const {
  for (const SelectorTerm& term : terms) {
    switch (term.type) {
      case SelectorTerm::Type::kAny:
      case SelectorTerm::Type::kPolicy:
        break;
      case SelectorTerm::Type::kUri:
        if (device.uri != term.value) return "not " + term.value;
        break;
      case SelectorTerm::Type::kPlugin:
        if (device.plugin != term.value) return "a device of plugin " + device.plugin;
        break;
      case SelectorTerm::Type::kKind:
        if (device.kind != term.kind) {
          const std::string_view kind = device_kind_name(device.kind);
          return (kind.front() == 'a' ? "an " : "a ") + std::string(kind) + " device, not " +
                 std::string(device_kind_name(term.kind));
        }
        break;
      case SelectorTerm::Type::kDType:
        if ((device.dtype_mask & LOOM_DTYPE_BIT(static_cast<uint32_t>(term.dtype))) == 0) {
          return "does not compute in " + std::string(dtype_name(term.dtype));
        }
        break;
      case SelectorTerm::Type::kCapability:
        if ((device.capabilities & term.capability) == 0) {
          return "lacks capability " + term.text.substr(4);
        }
        break;
    }
  }
  return {};
}

}  // namespace loom
