// Placement: which device each delegate of a program runs on. Resolves a
// DeviceSelector against the plugins the host finds, orders each delegate's
// (variant, device) candidates by the selector, and loads the first that
// works, recording why every other one was refused (PlacementExplanation).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "host/plugin_host.hpp"
#include "loom/artifacts.hpp"
#include "loom/device.hpp"
#include "loom/runtime.hpp"
#include "runtime/program_state.hpp"

namespace loom::runtime {

// One device of a loaded plugin.
struct DeviceRef {
  std::shared_ptr<host::LoadedPlugin> plugin;
  size_t index = 0;
  const DeviceInfo& info() const { return plugin->devices()[index]; }
};

class Placer {
 public:
  // Resolves `selector` on `host`'s plugins. A selector that matches no
  // device is an error (not_found) listing the devices that exist, with a
  // suggestion for a near miss. The host must outlive the Placer.
  static Result<Placer> create(host::PluginHost& host, DeviceSelector selector);

  // Places delegate `index` of the program: tries its candidates in order,
  // checking and loading each, and returns the first that loads. Fills
  // `explanation` either way. The error (incompatible, or the last load
  // error's code) names the delegate and every refusal.
  Result<LoadedDelegate> place(const ProgramDef& program, const ArtifactRegistry& artifacts,
                               uint32_t index, DelegateExplanation* explanation);

 private:
  struct Candidate;
  Placer() = default;
  // Every candidate of one delegate, ordered: those to try first.
  Status collect(const ProgramDef& program, const DelegateDef& delegate,
                 std::vector<Candidate>* out);

  host::PluginHost* host_ = nullptr;
  DeviceSelector selector_;
  std::vector<DeviceRef> devices_;  // explicit selector: the devices of the plugins it reaches
};

}  // namespace loom::runtime
