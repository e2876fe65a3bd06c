// Private state of a loaded Program: the verified file, the executables of
// its delegates, and one execution plan per function.
#pragma once

#include <chrono>
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
  // The device may complete asynchronously; the session waits on a fence.
  bool async = false;
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

struct FunctionPlan {
  FunctionInfo info;
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

}  // namespace loom::runtime

namespace loom {

struct Program::State {
  std::unique_ptr<ProgramReader> reader;
  runtime::ParameterStore parameters;  // keeps the archives of external ones open
  ArtifactRegistry registry;
  kernels::KernelRegistry kernels;
  std::vector<runtime::LoadedDelegate> delegates;
  std::vector<DelegatePlacement> placements;
  PlacementExplanation explanation;
  std::vector<runtime::FunctionPlan> functions;
  std::chrono::milliseconds run_timeout{0};  // LoadOptions::run_timeout
  std::shared_ptr<host::LogChannel> channel;  // the host's: where runs find the active trace
};

}  // namespace loom
