#include "runtime/open_function.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "host/isolation/log_channel.hpp"
#include "loom/trace.hpp"
#include "program_file/function_layout.hpp"
#include "runtime/program_state.hpp"
#include "runtime/session_state.hpp"

namespace loom::runtime {

namespace {

uint64_t steady_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string binding_text(const lowering::OpenSignature& signature, std::span<const Shape> shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size() && i < signature.inputs.size(); ++i) {
    s += (s.empty() ? "" : ", ") + signature.inputs[i].name + "=" + shape_to_string(shapes[i]);
  }
  return s;
}

}  // namespace

Specialized::~Specialized() {
  plan.reset();  // before `def`, which it reads
  def.reset();
  program.reset();  // before `bytes`, which it reads
}

bool Specialized::matches(std::span<const Shape> input_shapes, std::span<const std::vector<std::byte>> inputs,
                          std::span<const DType> input_dtypes) const {
  if (!std::equal(shapes.begin(), shapes.end(), input_shapes.begin(), input_shapes.end())) return false;
  if (!std::equal(dtypes.begin(), dtypes.end(), input_dtypes.begin(), input_dtypes.end())) return false;
  for (size_t k = 0; k < frozen_inputs.size(); ++k) {
    const size_t i = frozen_inputs[k];
    if (i >= inputs.size() || inputs[i].size() != frozen_values[k].size() ||
        !std::equal(inputs[i].begin(), inputs[i].end(), frozen_values[k].begin())) {
      return false;
    }
  }
  return true;
}

FunctionPlan open_function_plan(const FunctionDef& def) {
  FunctionPlan plan;
  plan.info.name = def.name;
  plan.info.reflection = def.reflection;
  plan.info.open = true;
  plan.inputs = def.inputs;
  plan.outputs = def.outputs;
  auto argument = [&](uint32_t v) {
    const ValueDef& vd = def.values[v];
    return ArgumentInfo{vd.name, vd.dtype, vd.shape, vd.dim_symbols, vd.dim_min, vd.dim_max, vd.kind};
  };
  for (uint32_t v : def.inputs) plan.info.inputs.push_back(argument(v));
  for (uint32_t v : def.outputs) plan.info.outputs.push_back(argument(v));
  return plan;
}

Result<std::shared_ptr<OpenFunction>> OpenFunction::create(
    const ProgramReader& reader, const ParameterStore& parameters, std::span<const std::byte> artifact,
    const FunctionDef& def, std::shared_ptr<host::PluginHost> host, ProgramLoader load,
    size_t cache_size, uint64_t max_tensor_bytes, std::shared_ptr<host::LogChannel> channel) {
  const ProgramDef& program = reader.program();
  std::shared_ptr<OpenFunction> f(new OpenFunction());
  f->name_ = def.name;
  for (uint32_t v : def.inputs) {
    f->signature_.inputs.push_back(def.values[v]);
    f->untyped_ = f->untyped_ || def.values[v].dtype == DType::kInvalid;
  }
  for (uint32_t v : def.outputs) f->signature_.outputs.push_back(def.values[v]);
  // By name, once: a model may have thousands of weights.
  std::unordered_map<std::string_view, uint32_t> by_name;
  for (size_t p = 0; p < program.parameters.size(); ++p) {
    by_name.emplace(program.parameters[p].name, static_cast<uint32_t>(p));
  }
  auto parameter = [&](const std::string& name) -> Result<graph::ConstantBytes> {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return invalid_argument("graph IR names parameter '" + name + "', which the program does not have");
    }
    std::span<const std::byte> bytes = parameters.bytes(it->second);
    return std::make_shared<const std::vector<std::byte>>(bytes.begin(), bytes.end());
  };
  const ArtifactDef& a = program.artifacts[static_cast<size_t>(def.graph_artifact)];
  auto graph = lowering::decode_open_graph(artifact, a.metadata, def.inputs.size(), parameter);
  if (!graph.ok()) {
    return graph.status().with_context("function '" + def.name + "': artifact " +
                                       std::to_string(def.graph_artifact) + " ('" + a.file_name + "')");
  }
  f->graph_ = std::move(*graph);
  // BatchNormalization into Conv depends on the weights alone, never on a
  // binding: folded once here, so that no specialization copies and
  // rescales the filters again (bind_open_graph folds only what a binding
  // made constant since).
  auto folded = lowering::passes::fold_batch_norm(f->graph_.graph);
  if (!folded.ok()) return folded.status().with_context("function '" + def.name + "'");
  for (size_t i = 0; i < def.inputs.size(); ++i) {
    const graph::Tensor& t = f->graph_.graph.tensors[static_cast<size_t>(f->graph_.graph.inputs[i])];
    const ValueDef& v = def.values[def.inputs[i]];
    if (t.name != v.name || t.dtype != v.dtype) {
      return invalid_argument("function '" + def.name + "': input " + std::to_string(i) + " is '" + v.name +
                              "' " + std::string(dtype_name(v.dtype)) + ", but its graph's is '" + t.name +
                              "' " + std::string(dtype_name(t.dtype)));
    }
  }
  if (f->graph_.graph.outputs.size() != def.outputs.size()) {
    return invalid_argument("function '" + def.name + "' has " + std::to_string(def.outputs.size()) +
                            " results, but its graph has " + std::to_string(f->graph_.graph.outputs.size()));
  }
  f->host_ = std::move(host);
  f->load_ = std::move(load);
  f->kernels_ = kernels::KernelRegistry::reference();
  f->max_tensor_bytes_ = max_tensor_bytes;
  f->capacity_ = std::max<size_t>(cache_size, 1);
  f->channel_ = std::move(channel);
  return f;
}

Status OpenFunction::enable_native(const ProgramReader& reader, const ParameterStore& parameters,
                                   const FunctionDef& def, const kernels::KernelRegistry& kernels,
                                   size_t delegate_count) {
  auto native = std::make_unique<Native>();
  native->def = def;
  native->reader = &reader;
  native->parameters = &parameters;
  native->kernels = &kernels;
  native->delegate_count = delegate_count;
  const std::vector<std::vector<Shape>> probes = lowering::probe_bindings(signature_);
  // Both probes, as the compiler bound them: the Reshape targets and Resize
  // scales it spelled for every binding (lowering::unify_shape_targets) are
  // in the reference.
  std::vector<graph::Graph> probed;
  for (const std::vector<Shape>& shapes : probes) {
    auto bound = lowering::bind_open_graph(graph_, shapes, kernels_, UINT64_MAX);
    if (!bound.ok()) {
      return bound.status().with_context("function '" + name_ + "': binding its graph at " +
                                         binding_text(signature_, shapes) + ", a binding it was compiled at");
    }
    probed.push_back(std::move(bound->graph));
  }
  lowering::unify_shape_targets(probed[0], probed[1]);
  native->reference = std::move(probed[0]);
  native_ = std::move(native);
  return Status();
}

Status OpenFunction::native_plan(std::span<const Shape> shapes, Specialized* out) const {
  LOOM_ASSIGN_OR_RETURN(lowering::BoundGraph bound,
                        lowering::bind_open_graph(graph_, shapes, kernels_, max_tensor_bytes_));
  if (!bound.frozen_inputs.empty()) return unimplemented("input values decide shapes at this binding");
  lowering::adopt_shape_targets(native_->reference, bound.graph);
  const std::string differs = lowering::compare_bindings(native_->reference, bound.graph);
  if (!differs.empty()) return unimplemented("the graph's structure differs from the compiled one: " + differs);
  std::unordered_map<std::string_view, size_t> by_name;
  for (size_t t = 0; t < bound.graph.tensors.size(); ++t) by_name.emplace(bound.graph.tensors[t].name, t);
  // On the heap before planning: the plan points into it (attributes).
  auto owned = std::make_unique<FunctionDef>(native_->def);
  FunctionDef& def = *owned;
  for (ValueDef& v : def.values) {
    if (!lowering::has_open_dims(v)) continue;
    auto it = by_name.find(v.name);
    if (it == by_name.end()) return unimplemented("value '" + v.name + "' is not in the bound graph");
    const Shape& got = bound.graph.tensors[it->second].shape;
    if (got.size() != v.shape.size()) {
      return unimplemented("value '" + v.name + "' has rank " + std::to_string(got.size()) + " at this binding, " +
                           std::to_string(v.shape.size()) + " in the program");
    }
    for (size_t d = 0; d < got.size(); ++d) {
      if (v.shape[d] >= 0 && v.shape[d] != got[d]) {
        return unimplemented("value '" + v.name + "' is " + shape_to_string(got) + " at this binding, but the " +
                             "program fixed dimension " + std::to_string(d) + " at " + std::to_string(v.shape[d]));
      }
    }
    v.shape = got;
  }
  plan_function_memory(def);
  LOOM_ASSIGN_OR_RETURN(FunctionPlan plan, build_function_plan(*native_->reader, *native_->parameters, def,
                                                               *native_->kernels, native_->delegate_count));
  out->plan = std::make_unique<FunctionPlan>(std::move(plan));
  out->def = std::move(owned);
  return Status();
}

std::shared_ptr<Trace> OpenFunction::active_trace() const {
  if (channel_ == nullptr || !channel_->tracing()) return nullptr;
  return channel_->active_trace();
}

uint64_t OpenFunction::specializations_made() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return made_;
}

Result<std::shared_ptr<const Specialized>> OpenFunction::specialization(
    std::span<const Shape> shapes, std::span<const std::vector<std::byte>> inputs, std::span<const DType> dtypes) {
  if (untyped_ != !dtypes.empty() || (!dtypes.empty() && dtypes.size() != shapes.size())) {
    return internal_error("function '" + name_ + "': " + std::to_string(dtypes.size()) + " input dtypes for " +
                          std::to_string(shapes.size()) + " inputs");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (Entry& e : cache_) {
      if (e.value->matches(shapes, inputs, dtypes)) {
        e.used = ++clock_;
        return e.value;
      }
    }
  }
  LOOM_RETURN_IF_ERROR(lowering::check_binding(signature_, shapes));
  const uint64_t start = steady_ns();
  const std::string binding = binding_text(signature_, shapes);
  auto fail = [&](const Status& s) {
    return s.with_context("function '" + name_ + "' at " + binding);
  };
  auto value = std::make_shared<Specialized>();
  // A native function: the program's own instructions at this binding's
  // shapes, when its graph has the structure they were compiled for.
  if (native_ != nullptr) {
    Status st = native_plan(shapes, value.get());
    if (st.ok()) {
      value->shapes.assign(shapes.begin(), shapes.end());
    } else if (st.code() != StatusCode::kUnimplemented) {
      return fail(st);
    } else if (channel_ != nullptr) {
      channel_->write(LOOM_LOG_INFO, "loom", "function '" + name_ + "' at " + binding + ": compiled for this binding (" +
                                                 st.message() + ")");
    }
  }
  if (value->plan == nullptr) {
  std::vector<std::span<const std::byte>> values(inputs.begin(), inputs.end());
  // An untyped function's inputs take this run's dtypes.
  std::optional<lowering::OpenGraph> typed;
  if (!dtypes.empty()) {
    typed = graph_;  // constants are shared, not copied
    for (size_t i = 0; i < dtypes.size(); ++i) {
      typed->graph.tensors[static_cast<size_t>(typed->graph.inputs[i])].dtype = dtypes[i];
    }
  }
  auto made = lowering::specialize_open_graph(typed ? *typed : graph_, shapes, *host_, kernels_, max_tensor_bytes_,
                                              values);
  if (!made.ok()) return fail(made.status());
  value->shapes.assign(shapes.begin(), shapes.end());
  value->dtypes.assign(dtypes.begin(), dtypes.end());
  value->frozen_inputs = std::move(made->frozen_inputs);
  for (size_t i : value->frozen_inputs) value->frozen_values.push_back(inputs[i]);
  value->bytes = std::move(made->program);
  value->skipped_targets = std::move(made->skipped_targets);
  auto program = load_(value->bytes);
  if (!program.ok()) return fail(program.status());
  value->program = std::move(*program);
  // The specialized function must keep the signature's names and dtypes.
  auto info = value->program->function("main");
  if (!info.ok()) return fail(info.status());
  for (size_t i = 0; i < info->outputs.size() && i < signature_.outputs.size(); ++i) {
    const ValueDef& want = signature_.outputs[i];
    const ArgumentInfo& got = info->outputs[i];
    if (want.dtype != DType::kInvalid && want.dtype != got.dtype) {
      return fail(invalid_argument("result '" + got.name + "' is " + std::string(dtype_name(got.dtype)) +
                                   ", but the signature says " + std::string(dtype_name(want.dtype))));
    }
  }
  }
  if (channel_ != nullptr && channel_->tracing()) {
    if (auto trace = channel_->active_trace()) {
      Trace::Event e;
      e.track = Trace::kHostTrack;
      e.category = "specialize";
      e.name = name_ + " " + binding;
      e.timestamp_ns = start;
      e.duration_ns = steady_ns() - start;
      trace->record(std::move(e));
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++made_;
  for (Entry& e : cache_) {  // another session made it meanwhile
    if (e.value->matches(shapes, inputs, dtypes)) {
      e.used = ++clock_;
      return e.value;
    }
  }
  if (cache_.size() >= capacity_) {
    cache_.erase(std::min_element(cache_.begin(), cache_.end(),
                                  [](const Entry& x, const Entry& y) { return x.used < y.used; }));
  }
  cache_.push_back({value, ++clock_});
  return std::shared_ptr<const Specialized>(std::move(value));
}

// ---------------------------------------------------------------------------

OpenSession::OpenSession(std::shared_ptr<Program::State> program, std::shared_ptr<OpenFunction> function,
                         const FunctionInfo& info, std::chrono::milliseconds run_timeout)
    : program_(std::move(program)),
      function_(std::move(function)),
      info_(info),
      run_timeout_(run_timeout),
      staging_(info.inputs.size()),
      shapes_(info.inputs.size()),
      dtypes_(function_->untyped() ? info.inputs.size() : 0, DType::kInvalid),
      set_(info.inputs.size(), false) {
  bound_.reserve(function_->cache_size());
}

Status OpenSession::set_input(size_t index, const Tensor& tensor) {
  const ValueDef& v = function_->signature().inputs[index];
  if (v.dtype == DType::kInvalid && dtype_size(tensor.dtype()) != 0) {
    dtypes_[index] = tensor.dtype();  // an untyped input takes the run's dtype
  } else if (tensor.dtype() != v.dtype) {
    return invalid_argument("input '" + v.name + "' of function '" + info_.name + "' must be " +
                            std::string(dtype_name(v.dtype)) + ", got " + std::string(dtype_name(tensor.dtype())));
  }
  LOOM_RETURN_IF_ERROR(lowering::check_input_shape(v, tensor.shape()));
  std::vector<std::byte>& staging = staging_[index];
  staging.resize(tensor.byte_size());  // keeps its capacity when shrinking
  if (!staging.empty()) std::memcpy(staging.data(), tensor.data(), staging.size());
  shapes_[index] = tensor.shape();
  set_[index] = true;
  return Status();
}

Status OpenSession::set_run_timeout(std::chrono::milliseconds timeout) {
  run_timeout_ = timeout;
  for (Bound& b : bound_) LOOM_RETURN_IF_ERROR(b.session->set_run_timeout(timeout));
  return Status();
}

Status OpenSession::run() {
  const auto& inputs = function_->signature().inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (set_[i]) continue;
    if (inputs[i].unranked || inputs[i].dtype == DType::kInvalid) {
      return failed_precondition("input '" + inputs[i].name + "' of function '" + info_.name +
                                 "' takes its type from the run and was not set");
    }
    if (lowering::has_open_dims(inputs[i])) {
      return failed_precondition("input '" + inputs[i].name + "' of function '" + info_.name +
                                 "' has open dimensions " + shape_to_string(inputs[i].shape) +
                                 " and was not set; set_input gives its shape");
    }
    // A fixed input left unset is zero, as in any session.
    shapes_[i] = inputs[i].shape;
    auto count = element_count(shapes_[i]);
    if (!count.ok()) return count.status();
    staging_[i].assign(static_cast<size_t>(*count) * dtype_size(inputs[i].dtype), std::byte{0});
    set_[i] = true;
  }
  Bound* hit = nullptr;
  for (Bound& b : bound_) {
    if (b.specialized->matches(shapes_, staging_, dtypes_)) hit = &b;
  }
  if (hit == nullptr) {
    current_ = nullptr;  // bound_ may move below
    current_bound_ = nullptr;
    LOOM_ASSIGN_OR_RETURN(auto specialized, function_->specialization(shapes_, staging_, dtypes_));
    std::unique_ptr<Session> session;
    if (specialized->plan != nullptr) {
      LOOM_ASSIGN_OR_RETURN(auto state, make_session_state(program_, specialized->plan.get()));
      session.reset(new Session(std::move(state)));
    } else {
      // A specialization's one function is "main", whatever this function's name.
      LOOM_ASSIGN_OR_RETURN(session, specialized->program->create_session("main"));
    }
    LOOM_RETURN_IF_ERROR(session->set_run_timeout(run_timeout_));
    std::vector<int32_t> slot(info_.inputs.size(), -1);
    const auto& inner = session->function().inputs;
    for (size_t i = 0; i < info_.inputs.size(); ++i) {
      for (size_t k = 0; k < inner.size(); ++k) {
        if (inner[k].name == info_.inputs[i].name) slot[i] = static_cast<int32_t>(k);
      }
      const bool frozen = std::find(specialized->frozen_inputs.begin(), specialized->frozen_inputs.end(), i) !=
                          specialized->frozen_inputs.end();
      if ((slot[i] < 0) != frozen) {
        return internal_error("function '" + info_.name + "': the specialization lost input '" +
                              info_.inputs[i].name + "'");
      }
    }
    if (bound_.size() >= function_->cache_size()) {
      auto oldest = std::min_element(bound_.begin(), bound_.end(),
                                     [](const Bound& x, const Bound& y) { return x.used < y.used; });
      bound_.erase(oldest);
    }
    bound_.push_back({std::move(specialized), std::move(session), std::move(slot), 0});
    hit = &bound_.back();
  }
  hit->used = ++clock_;
  current_ = hit->session.get();
  current_bound_ = hit;
  for (size_t i = 0; i < staging_.size(); ++i) {
    const int32_t slot = hit->slot[i];
    if (slot < 0) continue;  // its value is part of the binding
    LOOM_RETURN_IF_ERROR(current_->bind_input(static_cast<size_t>(slot), staging_[i].data(), staging_[i].size()));
  }
  // When tracing, a span per run names the binding it ran (strings are
  // built only then: a run without a trace allocates nothing).
  std::shared_ptr<Trace> trace = function_->active_trace();
  const uint64_t start = trace != nullptr ? steady_ns() : 0;
  Status st = current_->run();
  if (trace != nullptr) {
    Trace::Event e;
    e.track = Trace::kHostTrack;
    e.category = "binding";
    e.name = info_.name + " " + binding_text(function_->signature(), shapes_);
    e.timestamp_ns = start;
    e.duration_ns = steady_ns() - start;
    trace->record(std::move(e));
  }
  return st;
}

const Tensor& OpenSession::output(size_t index) const {
  return current_ != nullptr ? current_->output(index) : empty_;
}

}  // namespace loom::runtime
