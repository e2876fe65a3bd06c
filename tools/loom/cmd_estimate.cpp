// `loom estimate`: every device's estimate of each delegate of a program,
// as policy:fastest sees them (ABI 1.1 executable_estimate), for scripts
// that compare devices. A thin front end over Runtime::load_program with
// policy:fastest and its PlacementExplanation.
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {
namespace {

// One device's total over the delegates it has an estimate for.
struct DeviceTotal {
  uint64_t estimate_ns = 0;
  size_t estimated = 0;  // delegates with an estimate here
};

std::string microseconds(uint64_t ns) {
  char text[48];
  std::snprintf(text, sizeof text, "%.1f us", static_cast<double>(ns) / 1e3);
  return text;
}

std::string pad(std::string text, size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

}  // namespace

int run_estimate(const EstimateArgs& args) {
  RuntimeOptions options;
  options.threads = args.threads;
  if (Status s = add_plugin_options(args.plugin_options, &options); !s.ok()) return fail(s);
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status());
  PlacementExplanation explanation;
  LoadOptions load;
  load.device = "policy:fastest";
  load.explanation = &explanation;
  // Loading places every delegate by the estimates (and loads the fastest);
  // a failure still leaves the estimates in the explanation.
  auto program = (*runtime)->load_program(args.file, load);

  std::map<std::string, DeviceTotal> totals;
  size_t delegates = explanation.delegates.size();
  nlohmann::json json_delegates = nlohmann::json::array();
  std::string text;
  for (const DelegateExplanation& d : explanation.delegates) {
    text += "delegate '" + d.delegate + "':\n";
    nlohmann::json candidates = nlohmann::json::array();
    for (const PlacementCandidate& c : d.candidates) {
      if (c.device.empty()) continue;  // the reference kernels: no device, no estimate
      const bool variant = c.variant != PlacementCandidate::kNoVariant;
      // Totals are per device URI ("reference" is the host's kernels).
      if (c.device.find("://") != std::string::npos) {
        DeviceTotal& t = totals[c.device];
        if (variant && c.estimate_ns != 0) {
          t.estimate_ns += c.estimate_ns;
          ++t.estimated;
        }
      }
      text += "  " + pad(c.device, 22) +
              pad(variant ? "variant " + std::to_string(c.variant) + " '" + c.loader_key + "'"
                          : "(no variant)",
                  30) +
              (!variant ? "-" : c.estimate_ns != 0 ? microseconds(c.estimate_ns) : "no estimate") +
              "\n";
      nlohmann::json jc = {{"device", c.device}, {"estimate_ns", c.estimate_ns}};
      if (variant) {
        jc["variant"] = c.variant;
        jc["loader_key"] = c.loader_key;
      } else {
        jc["variant"] = nullptr;
      }
      candidates.push_back(std::move(jc));
    }
    json_delegates.push_back({{"delegate", d.delegate}, {"candidates", std::move(candidates)}});
  }
  nlohmann::json json_devices = nlohmann::json::array();
  text += "per device (sum over the delegates it has an estimate for):\n";
  for (const auto& [device, t] : totals) {
    text += "  " + pad(device, 22) + pad(t.estimated != 0 ? microseconds(t.estimate_ns) : "-", 16) +
            std::to_string(t.estimated) + " of " + std::to_string(delegates) + " delegates\n";
    json_devices.push_back({{"device", device},
                            {"estimate_ns", t.estimate_ns},
                            {"delegates_estimated", t.estimated},
                            {"delegates", delegates}});
  }
  if (args.json) {
    nlohmann::json doc = {{"file", args.file},
                          {"delegates", std::move(json_delegates)},
                          {"devices", std::move(json_devices)}};
    if (!program.ok()) doc["error"] = program.status().to_string();
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << text;
  }
  return program.ok() ? 0 : fail(program.status());
}

}  // namespace loom::cli
