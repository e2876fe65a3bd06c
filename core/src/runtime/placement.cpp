#include "runtime/placement.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "common/text.hpp"
#include "host/handles.hpp"

namespace loom {

std::string_view placement_outcome_name(PlacementCandidate::Outcome outcome) {
  switch (outcome) {
    case PlacementCandidate::Outcome::kChosen: return "chosen";
    case PlacementCandidate::Outcome::kRefused: return "refused";
    case PlacementCandidate::Outcome::kNotTried: return "not tried";
  }
  return "unknown";
}

std::string PlacementExplanation::to_string() const {
  std::string out = "placement (selector: " + (selector.empty() ? "default" : selector) + ")\n";
  for (const DelegateExplanation& d : delegates) {
    out += "delegate '" + d.delegate + "':\n";
    if (d.candidates.empty()) out += "  (no variants)\n";
    for (const PlacementCandidate& c : d.candidates) {
      std::string line = "  " + std::string(placement_outcome_name(c.outcome));
      line.resize(std::max<size_t>(line.size() + 1, 12), ' ');
      line += c.variant == PlacementCandidate::kNoVariant
                  ? "(no variant) on " + c.device
                  : "variant " + std::to_string(c.variant) + " '" + c.loader_key + "' on " +
                        (c.device.empty() ? "(no device)" : c.device);
      if (!c.matched_by.empty()) {
        line += " [" + c.matched_by;
        if (c.score != 0) {
          std::string score = std::to_string(c.score);
          score.erase(score.find_last_not_of('0') + 1);
          if (!score.empty() && score.back() == '.') score.pop_back();
          line += ", score " + score;
        }
        if (c.estimate_ns != 0) {
          char estimate[48];
          std::snprintf(estimate, sizeof estimate, ", estimate %.1f us",
                        static_cast<double>(c.estimate_ns) / 1e3);
          line += estimate;
        }
        line += "]";
      }
      if (!c.reason.empty()) line += ": " + c.reason;
      out += line + "\n";
    }
  }
  return out;
}

}  // namespace loom

namespace loom::runtime {

namespace {
// Candidate::position of a selected device for which the delegate has no variant.
constexpr uint32_t kNoVariant = PlacementCandidate::kNoVariant;
}  // namespace

struct Placer::Candidate {
  uint32_t position = 0;  // in DelegateDef::variants
  uint32_t artifact = 0;  // in ProgramDef::artifacts
  std::optional<DeviceRef> device;
  std::string matched_by;
  double score = 0;
  bool excluded = false;  // not to be tried; `reason` says why
  std::string reason;
  bool reference = false;  // a "loom.reference" variant: no device
  int alternative = -1;    // explicit selector: the alternative that offered it
  uint64_t estimate_ns = 0;  // policy:fastest: the plugin's estimate (0: none)
};

namespace {

std::string describe_devices(const std::vector<DeviceInfo>& devices) {
  if (devices.empty()) return "no devices are available";
  std::string out = "available: ";
  for (size_t i = 0; i < devices.size(); ++i) {
    out += (i ? ", " : "") + devices[i].uri + " (" + std::string(device_kind_name(devices[i].kind)) +
           ")";
  }
  return out;
}

}  // namespace

Result<Placer> Placer::create(host::PluginHost& host, DeviceSelector selector) {
  Placer placer;
  placer.host_ = &host;
  placer.selector_ = std::move(selector);
  if (placer.selector_.is_default()) return placer;

  std::vector<std::shared_ptr<host::LoadedPlugin>> plugins;
  std::string notes;
  const std::vector<std::string> named = placer.selector_.named_plugins();
  if (named.empty()) {
    plugins = host.load_all();
  } else {
    for (const std::string& name : named) {
      auto plugin = host.load(name);
      if (plugin.ok()) plugins.push_back(std::move(*plugin));
      else notes += " (" + plugin.status().message() + ")";
    }
  }
  for (const auto& plugin : plugins) {
    for (size_t i = 0; i < plugin->devices().size(); ++i) {
      placer.devices_.push_back(DeviceRef{plugin, i});
    }
  }
  for (const SelectorAlternative& alternative : placer.selector_.alternatives()) {
    for (const DeviceRef& device : placer.devices_) {
      if (alternative.matches(device.info())) return placer;
    }
  }

  // Nothing matches: say what exists, and what was probably meant.
  std::vector<DeviceInfo> all;
  std::vector<std::string> names;
  for (const auto& plugin : host.load_all()) {
    names.push_back(plugin->name());
    for (const DeviceInfo& d : plugin->devices()) {
      all.push_back(d);
      names.push_back(d.uri);
    }
  }
  const bool single = placer.selector_.alternatives().size() == 1 &&
                      placer.selector_.alternatives()[0].terms.size() == 1;
  std::string message = (single ? "no device '" : "no device matches '") +
                        placer.selector_.text() + "'" + notes;
  for (const SelectorAlternative& alternative : placer.selector_.alternatives()) {
    for (const SelectorTerm& term : alternative.terms) {
      if (term.type != SelectorTerm::Type::kUri && term.type != SelectorTerm::Type::kPlugin) {
        continue;
      }
      const bool is_kind = term.value == "cpu" || term.value == "gpu" ||
                           term.value == "accelerator" || term.value == "virtual";
      if (term.type == SelectorTerm::Type::kPlugin && is_kind) {
        message += "; for any device of that kind, write 'kind:" + term.value + "'";
        continue;
      }
      const std::string near = nearest(term.value, names);
      if (!near.empty() && near != term.value) message += "; did you mean '" + near + "'?";
    }
  }
  message += "; " + describe_devices(all);
  return not_found(message);
}

// Under policy:fastest, the plugins' estimates (ABI 1.1 executable_estimate)
// order each alternative's candidates: those with an estimate first, fastest
// first; those without keep the kind order after them.
void Placer::rank_by_estimate(const ProgramDef& program, const ArtifactRegistry& artifacts,
                              std::vector<Candidate>* tried) {
  size_t begin = 0;
  while (begin < tried->size()) {
    size_t end = begin;
    while (end < tried->size() && (*tried)[end].alternative == (*tried)[begin].alternative) ++end;
    const int a = (*tried)[begin].alternative;
    if (a >= 0 && selector_.alternatives()[static_cast<size_t>(a)].policy ==
                      PlacementPolicy::kFastest) {
      for (size_t i = begin; i < end; ++i) {
        Candidate& c = (*tried)[i];
        const ArtifactDef& def = program.artifacts[c.artifact];
        const Artifact* content = artifacts.artifact(c.artifact);
        if (content == nullptr || !c.device) continue;
        auto estimate = host::estimate_blob(*c.device->plugin, c.device->index, def.loader_key,
                                            def.format_version, content->content);
        c.estimate_ns = estimate.ok() ? *estimate : 0;  // an error is no estimate
      }
      std::stable_sort(tried->begin() + static_cast<std::ptrdiff_t>(begin),
                       tried->begin() + static_cast<std::ptrdiff_t>(end),
                       [](const Candidate& x, const Candidate& y) {
                         if ((x.estimate_ns != 0) != (y.estimate_ns != 0)) return x.estimate_ns != 0;
                         return x.estimate_ns < y.estimate_ns;
                       });
    }
    begin = end;
  }
}

Status Placer::collect(const ProgramDef& program, const ArtifactRegistry& artifacts,
                       const DelegateDef& delegate, std::vector<Candidate>* out) {
  const auto key_of = [&](uint32_t artifact) -> const std::string& {
    return program.artifacts[artifact].loader_key;
  };
  for (uint32_t artifact : delegate.variants) {
    if (artifact >= program.artifacts.size()) {
      return invalid_argument("delegate '" + delegate.name + "' names artifact " +
                              std::to_string(artifact) + " of " +
                              std::to_string(program.artifacts.size()));
    }
  }
  std::vector<Candidate> tried, excluded, unserved, reference;
  for (uint32_t p = 0; p < delegate.variants.size(); ++p) {
    const uint32_t artifact = delegate.variants[p];
    if (key_of(artifact) == kReferenceLoaderKey) {
      Candidate c{p, artifact, std::nullopt, {}, 0, false, {}};
      c.reference = true;
      reference.push_back(std::move(c));
    }
  }
  const auto is_reference = [&](uint32_t artifact) {
    return key_of(artifact) == kReferenceLoaderKey;
  };
  if (selector_.is_default()) {
    for (uint32_t p = 0; p < delegate.variants.size(); ++p) {
      const uint32_t artifact = delegate.variants[p];
      if (is_reference(artifact)) continue;
      auto plugins = host_->plugins_for_key(key_of(artifact));
      if (!plugins.ok()) {
        excluded.push_back({p, artifact, std::nullopt, {}, 0, true, plugins.status().message()});
        continue;
      }
      for (const auto& plugin : *plugins) {
        if (plugin->devices().empty()) {
          excluded.push_back({p, artifact, std::nullopt, {}, 0, true,
                              "plugin '" + plugin->name() + "' has no devices"});
        }
        for (size_t i = 0; i < plugin->devices().size(); ++i) {
          tried.push_back({p, artifact, DeviceRef{plugin, i}, {}, 0, false, {}});
        }
      }
    }
  } else {
    const auto seen = [&](uint32_t artifact, const DeviceRef& device) {
      return std::any_of(tried.begin(), tried.end(), [&](const Candidate& c) {
        return c.artifact == artifact && c.device->plugin == device.plugin &&
               c.device->index == device.index;
      });
    };
    std::vector<DeviceInfo> infos;
    for (const DeviceRef& device : devices_) infos.push_back(device.info());
    for (const auto& [d, a] : selector_.order(infos)) {
      const DeviceRef& device = devices_[d];
      const SelectorAlternative& alternative = selector_.alternatives()[a];
      bool any = false;
      for (uint32_t p = 0; p < delegate.variants.size(); ++p) {
        const uint32_t artifact = delegate.variants[p];
        if (is_reference(artifact) || !device.plugin->serves(key_of(artifact))) continue;
        any = true;
        Candidate c{p, artifact, device, alternative.text,
                    policy_rank(alternative.policy, device.info()), false, {}};
        c.alternative = static_cast<int>(a);
        tried.push_back(std::move(c));
      }
      if (!any) {
        std::string keys;
        for (uint32_t artifact : delegate.variants) {
          if (is_reference(artifact)) continue;
          keys += (keys.empty() ? "'" : ", '") + key_of(artifact) + "'";
        }
        unserved.push_back({kNoVariant, 0, device, alternative.text,
                            policy_rank(alternative.policy, device.info()), true,
                            "selected, but the delegate has no variant for plugin '" +
                                device.plugin->name() + "' (variants: " +
                                (keys.empty() ? "none" : keys) + ")"});
      }
    }
    rank_by_estimate(program, artifacts, &tried);
    for (uint32_t p = 0; p < delegate.variants.size(); ++p) {
      const uint32_t artifact = delegate.variants[p];
      if (is_reference(artifact)) continue;
      bool served = false;
      for (const DeviceRef& device : devices_) {
        if (!device.plugin->serves(key_of(artifact))) continue;
        served = true;
        if (seen(artifact, device)) continue;
        std::string why;
        for (const SelectorAlternative& alternative : selector_.alternatives()) {
          why += (why.empty() ? "" : "; ") + alternative.text + ": " +
                 alternative.mismatch(device.info());
        }
        excluded.push_back({p, artifact, device, {}, 0, true, "not selected (" + why + ")"});
      }
      if (!served) {
        excluded.push_back({p, artifact, std::nullopt, {}, 0, true,
                            "no selected device serves loader key '" + key_of(artifact) + "'"});
      }
    }
  }
  *out = std::move(tried);
  out->insert(out->end(), std::make_move_iterator(reference.begin()),
              std::make_move_iterator(reference.end()));
  out->insert(out->end(), std::make_move_iterator(excluded.begin()),
              std::make_move_iterator(excluded.end()));
  out->insert(out->end(), std::make_move_iterator(unserved.begin()),
              std::make_move_iterator(unserved.end()));
  return Status();
}

Result<LoadedDelegate> load_delegate(const ProgramDef& program, const ArtifactRegistry& artifacts,
                                     const DelegateDef& delegate, uint32_t artifact,
                                     const DeviceRef& device) {
  const ArtifactDef& def = program.artifacts[artifact];
  const Artifact* content = artifacts.artifact(artifact);
  if (content == nullptr) {
    return internal_error("artifact " + std::to_string(artifact) + " is not in the registry");
  }
  LOOM_RETURN_IF_ERROR(host::check_blob(*device.plugin, device.index, def.loader_key,
                                        def.format_version, content->content));
  std::vector<std::pair<std::string, std::string>> specs;
  for (const KeyValue& kv : delegate.compile_specs) specs.emplace_back(kv.key, kv.value);
  auto executable = host::Executable::load(device.plugin, device.index, def.loader_key,
                                           def.format_version, content->content, specs);
  if (!executable.ok()) {
    // Marked so that the caller can tell a failed load from a refused check.
    return Status(executable.status().code(), "load failed: " + executable.status().to_string());
  }
  const DeviceInfo& info = device.info();
  LoadedDelegate d;
  d.name = delegate.name;
  d.loader_key = def.loader_key;
  d.device_uri = info.uri;
  d.plugin = device.plugin;
  d.device_index = device.index;
  d.executable = std::move(*executable);
  d.host_execute = (info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_EXECUTE) != 0;
  d.async = (info.capabilities & LOOM_DEVICE_CAP_ASYNC) != 0;
  // The arena is imported only where the device's memory is the host's
  // (a CPU device, or unified memory: all of it host-visible). A discrete
  // GPU would read an imported arena over the bus in every kernel; staging
  // moves each value once.
  const bool unified =
      info.kind == DeviceKind::kCpu ||
      (info.device_memory_bytes != 0 && info.host_visible_memory_bytes >= info.device_memory_bytes);
  d.host_import = unified && (info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT) != 0 &&
                  d.plugin->imports_host_memory();
  return d;
}

Result<LoadedDelegate> Placer::place(const ProgramDef& program, const ArtifactRegistry& artifacts,
                                     uint32_t index, DelegateExplanation* explanation,
                                     std::vector<Alternative>* remaining) {
  const DelegateDef& delegate = program.delegates[index];
  explanation->delegate = delegate.name;
  explanation->candidates.clear();
  std::vector<Candidate> candidates;
  LOOM_RETURN_IF_ERROR(collect(program, artifacts, delegate, &candidates));

  std::optional<LoadedDelegate> loaded;
  std::string reasons;
  Status last_load_error;
  bool refused_before_load = false;
  for (const Candidate& c : candidates) {
    PlacementCandidate& out = explanation->candidates.emplace_back();
    out.device = c.device ? c.device->info().uri : std::string();
    out.matched_by = c.matched_by;
    out.score = c.score;
    out.estimate_ns = c.estimate_ns;
    out.variant = c.position;
    if (c.position == kNoVariant) {
      out.outcome = PlacementCandidate::Outcome::kRefused;
      out.reason = c.reason;
      continue;
    }
    const ArtifactDef& def = program.artifacts[c.artifact];
    out.loader_key = def.loader_key;
    if (c.reference) out.device = "reference";
    const std::string label =
        "variant '" + def.loader_key + "'" + (!out.device.empty() ? " on " + out.device : std::string());
    if (c.excluded) {
      out.outcome = PlacementCandidate::Outcome::kRefused;
      out.reason = c.reason;
      reasons += "; " + label + ": " + c.reason;
      refused_before_load = true;
      continue;
    }
    if (loaded) {
      out.outcome = PlacementCandidate::Outcome::kNotTried;
      out.reason = "an earlier candidate was chosen";
      Alternative alternative;
      if (c.device) alternative.device = *c.device;
      alternative.reference = c.reference;
      alternative.artifact = c.artifact;
      alternative.position = c.position;
      alternative.matched_by = c.matched_by;
      remaining->push_back(std::move(alternative));
      continue;
    }
    Result<LoadedDelegate> attempt =
        c.reference ? (reference_loader_ ? reference_loader_(index, c.artifact)
                                         : Result<LoadedDelegate>(unimplemented(
                                               "no loader for reference variants")))
                    : load_delegate(program, artifacts, delegate, c.artifact, *c.device);
    if (!attempt.ok()) {
      // Load-time fallback: a device that refuses the blob, is out of memory
      // or fails to initialize the executable hands the delegate to the next
      // candidate.
      out.outcome = PlacementCandidate::Outcome::kRefused;
      out.reason = attempt.status().message();
      reasons += "; " + label + ": " + out.reason;
      if (out.reason.rfind("load failed: ", 0) == 0) {
        last_load_error = attempt.status();
      } else {
        refused_before_load = true;
      }
      continue;
    }
    loaded = std::move(*attempt);
    out.outcome = PlacementCandidate::Outcome::kChosen;
    out.reason = c.reference             ? "the core's reference kernels: no device took it"
                 : c.matched_by.empty() ? "the first variant, in the program's order, that loads"
                                        : "the first candidate of '" + selector_.text() +
                                              "' that loads";
  }
  if (loaded) return std::move(*loaded);
  std::string target = "any device";
  if (!selector_.is_default()) {
    const auto& alternatives = selector_.alternatives();
    const bool one_uri = alternatives.size() == 1 && alternatives[0].terms.size() == 1 &&
                         alternatives[0].terms[0].type == SelectorTerm::Type::kUri;
    target = one_uri ? "device " + selector_.text()
                     : "the devices selected by '" + selector_.text() + "'";
  }
  std::string message = "delegate '" + delegate.name + "' cannot run on " + target +
                        (candidates.empty() ? ": it has no variants" : reasons);
  // When every refusal was a failed load, its code says more (for example
  // resource_exhausted) than incompatible would.
  if (!refused_before_load && !last_load_error.ok()) return Status(last_load_error.code(), message);
  return incompatible(message);
}

}  // namespace loom::runtime
