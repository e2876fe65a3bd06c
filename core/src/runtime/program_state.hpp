// Private state of a loaded Program: the verified file, the executables of
// its delegates, and one execution plan per function.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "host/handles.hpp"
#include "host/plugin_host.hpp"
#include "kernels/kernel.hpp"
#include "loom/artifacts.hpp"
#include "loom/runtime.hpp"
#include "runtime/parameter_store.hpp"

namespace loom::runtime {

// A delegate loaded on the device chosen for it.
struct LoadedDelegate {
  std::string name;
  std::string loader_key;
  std::string device_uri;
  std::shared_ptr<host::LoadedPlugin> plugin;
  size_t device_index = 0;
  std::unique_ptr<host::Executable> executable;
  // The device executes on host pointers; otherwise the session stages every
  // tensor through device buffers.
  bool host_execute = false;
  // The device imports host memory (buffer_import_host) and its memory is
  // the host's (a CPU device, or unified memory): the session hands it the
  // arena itself, so values between delegates are not staged.
  bool host_import = false;
  // The device may complete asynchronously; the session waits on a fence.
  bool async = false;
  // A "loom.reference" variant: the function (index in Program::State::
  // functions) the session runs on the reference kernels; no plugin.
  int32_t reference_function = -1;
};

// One device of a loaded plugin.
struct DeviceRef {
  std::shared_ptr<host::LoadedPlugin> plugin;
  size_t index = 0;
  const DeviceInfo& info() const { return plugin->devices()[index]; }
};

// A (variant, device) pair a delegate can move to when its device fails at
// run time: the candidates placement ranked after the chosen one.
struct Alternative {
  DeviceRef device;        // unset for the reference variant
  bool reference = false;  // the "loom.reference" variant
  uint32_t artifact = 0;   // in ProgramDef::artifacts
  uint32_t position = 0;   // in the delegate's variants
  std::string matched_by;  // the selector alternative that offered it
};

// Where a value's bytes live during a run.
enum class Storage : uint8_t {
  kInput,      // the session's staging tensor, or caller memory
  kOutput,     // the session's output tensor
  kParameter,  // a constant in the program file (read-only)
  kArena,      // the session's arena, at the memory plan's offset
  kOwned,      // a buffer of its own, allocated with the session
  kNone,       // not a tensor, or never used by a step
};

struct ValuePlan {
  std::string name;
  DType dtype = DType::kInvalid;
  Shape shape;
  uint64_t bytes = 0;
  Storage storage = Storage::kNone;
  uint64_t arena_offset = 0;              // kArena
  const std::byte* parameter = nullptr;   // kParameter: in the ParameterStore
  uint32_t io_index = 0;                  // kInput/kOutput: argument index
};

struct StepPlan {
  OpCode op = OpCode::kKernelCall;
  uint32_t instruction = 0;                      // index in the function
  const kernels::KernelInfo* kernel = nullptr;   // kKernelCall
  kernels::Attributes attributes;                // kKernelCall
  int32_t delegate = -1;                         // kDelegateCall
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
};

class OpenFunction;
struct StagedPlan;

struct FunctionPlan {
  FunctionInfo info;
  // An open-shape function (info.open): everything else is empty; sessions
  // run the programs this makes per binding.
  std::shared_ptr<OpenFunction> open;
  // A staged function (control flow, format 1.5): its steps, run by a
  // StagedSession; everything below is empty.
  std::shared_ptr<const StagedPlan> staged;
  std::vector<uint32_t> inputs;   // value indices
  std::vector<uint32_t> outputs;  // value indices
  std::vector<ValuePlan> values;
  std::vector<StepPlan> steps;
  uint64_t arena_size = 0;
  uint32_t arena_alignment = 64;
};

// Builds the plan of `def`, validating it against the kernels and the
// parameters resolved in `parameters`. Errors name the function, instruction
// and value.
Result<FunctionPlan> build_function_plan(const ProgramReader& reader,
                                         const ParameterStore& parameters,
                                         const FunctionDef& def,
                                         const kernels::KernelRegistry& kernels,
                                         size_t delegate_count);

// Whether `fn`, the function of a "loom.reference" variant of `delegate`,
// takes and returns what `step` of `caller` passes it (count, dtype and
// shape of every operand); INVALID_ARGUMENT saying what differs.
Status check_reference_call(const FunctionPlan& caller, const StepPlan& step,
                            const FunctionPlan& fn, const std::string& delegate);

}  // namespace loom::runtime

namespace loom {

struct Program::State {
  std::unique_ptr<ProgramReader> reader;
  runtime::ParameterStore parameters;  // keeps the archives of external ones open
  ArtifactRegistry registry;
  kernels::KernelRegistry kernels;
  PlacementExplanation explanation;

  // The current delegate of each DelegateDef, replaced by a run-time
  // fallback; guarded by placement_mutex once the program is loaded.
  std::vector<std::shared_ptr<const runtime::LoadedDelegate>> delegates;
  std::vector<DelegatePlacement> placements;
  // Per delegate: where it may move next, best first (consumed by fallbacks).
  std::vector<std::vector<runtime::Alternative>> alternatives;
  std::vector<FallbackEvent> fallback_events;
  mutable std::mutex placement_mutex;
  // Bumped on every fallback, so that sessions notice with one atomic load.
  std::atomic<uint64_t> placement_generation{0};
  bool fallback = false;
  std::function<void(const FallbackEvent&)> on_fallback;

  std::shared_ptr<const runtime::LoadedDelegate> delegate(size_t index) const {
    std::lock_guard<std::mutex> lock(placement_mutex);
    return delegates[index];
  }
  // Moves delegate `index` off the device of `failed` (which reported `why`)
  // to its next alternative that loads, unless another session did so
  // already; returns the delegate to use now. Errors when none is left.
  Result<std::shared_ptr<const runtime::LoadedDelegate>> fall_back(
      size_t index, const runtime::LoadedDelegate* failed, const Status& why);

  std::vector<runtime::FunctionPlan> functions;
  // Functions named by "loom.reference" variants that could not be planned
  // (an op without a reference kernel): (name, why). Such a variant is
  // refused; the program still loads.
  std::vector<std::pair<std::string, std::string>> unplanned_functions;

  // Loads the "loom.reference" variant `artifact` of `delegate`.
  // Checks that the function it names matches every call of the delegate.
  Result<runtime::LoadedDelegate> load_reference(uint32_t delegate, uint32_t artifact) const;
  std::chrono::milliseconds run_timeout{0};  // LoadOptions::run_timeout
  // A program with open-shape functions keeps the host that compiles their
  // specializations; null otherwise.
  std::shared_ptr<host::PluginHost> host;
  // LoadOptions::max_tensor_bytes, its default resolved.
  uint64_t max_tensor_bytes = UINT64_MAX;
  uint64_t max_loop_iterations = 0;  // LoadOptions::max_loop_iterations
  std::shared_ptr<host::LogChannel> channel;  // the host's: where runs find the active trace
};

}  // namespace loom
