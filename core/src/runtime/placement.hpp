// Placement: which device each delegate of a program runs on. Resolves a
// DeviceSelector against the plugins the host finds, orders each delegate's
// (variant, device) candidates by the selector, and loads the first that
// works, recording why every other one was refused (PlacementExplanation).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "host/plugin_host.hpp"
#include "loom/artifacts.hpp"
#include "loom/device.hpp"
#include "loom/runtime.hpp"
#include "runtime/program_state.hpp"

namespace loom::runtime {



// Checks (executable_check) and loads `artifact` of delegate `delegate` on
// `device`. Errors are the plugin's, without context.
Result<LoadedDelegate> load_delegate(const ProgramDef& program, const ArtifactRegistry& artifacts,
                                     const DelegateDef& delegate, uint32_t artifact,
                                     const DeviceRef& device);

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
  // How "loom.reference" variants are loaded (they need the program's
  // functions); without it they are refused.
  using ReferenceLoader =
      std::function<Result<LoadedDelegate>(uint32_t delegate, uint32_t artifact)>;
  void set_reference_loader(ReferenceLoader loader) { reference_loader_ = std::move(loader); }

  // `remaining` receives the candidates after the chosen one, for run-time
  // fallback. A "loom.reference" variant is always the last candidate,
  // whatever the selector: the core's own kernels, when no device can take
  // the delegate.
  Result<LoadedDelegate> place(const ProgramDef& program, const ArtifactRegistry& artifacts,
                               uint32_t index, DelegateExplanation* explanation,
                               std::vector<Alternative>* remaining);

 private:
  struct Candidate;
  Placer() = default;
  // Every candidate of one delegate, ordered: those to try first.
  Status collect(const ProgramDef& program, const ArtifactRegistry& artifacts,
                 const DelegateDef& delegate, std::vector<Candidate>* out);
  void rank_by_estimate(const ProgramDef& program, const ArtifactRegistry& artifacts,
                        std::vector<Candidate>* tried);

  host::PluginHost* host_ = nullptr;
  DeviceSelector selector_;
  std::vector<DeviceRef> devices_;  // explicit selector: the devices of the plugins it reaches
  ReferenceLoader reference_loader_;
};

}  // namespace loom::runtime
