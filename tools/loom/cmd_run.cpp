#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "commands.hpp"
#include "io/npy.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {
namespace {

// Splits "NAME=VALUE"; the error names the option. A parameter scope may be
// empty (IREE's default scope), so --params accepts "=PATH".
Result<std::pair<std::string, std::string>> split_binding(const std::string& text,
                                                          const char* option,
                                                          const char* form = "NAME=VALUE",
                                                          bool allow_empty_name = false) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || (eq == 0 && !allow_empty_name) || eq + 1 == text.size()) {
    return invalid_argument(std::string(option) + " '" + text + "' is not " + form);
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Result<Tensor> random_tensor(const ArgumentInfo& arg, std::mt19937_64& rng) {
  LOOM_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(arg.dtype, arg.shape));
  uint64_t n = t.element_count();
  switch (arg.dtype) {
    case DType::kF32: {
      std::uniform_real_distribution<float> d(-1.0f, 1.0f);
      for (uint64_t i = 0; i < n; ++i) t.data_as<float>()[i] = d(rng);
      break;
    }
    case DType::kF64: {
      std::uniform_real_distribution<double> d(-1.0, 1.0);
      for (uint64_t i = 0; i < n; ++i) t.data_as<double>()[i] = d(rng);
      break;
    }
    case DType::kI32: {
      std::uniform_int_distribution<int32_t> d(-8, 8);
      for (uint64_t i = 0; i < n; ++i) t.data_as<int32_t>()[i] = d(rng);
      break;
    }
    case DType::kI64: {
      std::uniform_int_distribution<int64_t> d(-8, 8);
      for (uint64_t i = 0; i < n; ++i) t.data_as<int64_t>()[i] = d(rng);
      break;
    }
    case DType::kU8:
    case DType::kI8:
    case DType::kBool: {
      std::uniform_int_distribution<int> d(0, arg.dtype == DType::kBool ? 1 : 100);
      for (uint64_t i = 0; i < n; ++i) t.data_as<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
      break;
    }
    default:
      return unimplemented("input '" + arg.name + "': random values of dtype " +
                           std::string(dtype_name(arg.dtype)) + " are not supported; "
                           "pass a .npy file");
  }
  return t;
}

void print_summary(const std::string& name, const Tensor& t) {
  std::cout << name << ": " << dtype_name(t.dtype()) << shape_to_string(t.shape());
  if (t.dtype() == DType::kF32) {
    const float* p = t.data_as<float>();
    uint64_t n = t.element_count();
    std::cout << " = [";
    for (uint64_t i = 0; i < std::min<uint64_t>(n, 8); ++i) {
      std::printf("%s%.6g", i ? ", " : "", p[i]);
      std::fflush(stdout);
    }
    std::cout << (n > 8 ? ", ...]" : "]");
  }
  std::cout << "\n";
}

}  // namespace

int run_run(const RunArgs& args) {
  RuntimeOptions options;
  options.threads = args.threads;
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status());
  LoadOptions load;
  load.device = args.device;
  load.check_parameter_checksums = !args.no_param_checksums;
  for (const std::string& text : args.params) {
    auto binding = split_binding(text, "--params", "SCOPE=PATH.irpa", true);
    if (!binding.ok()) return fail(binding.status());
    load.parameter_archives.emplace_back(binding->first, binding->second);
  }
  auto program = (*runtime)->load_program(args.file, load);
  if (!program.ok()) return fail(program.status());
  auto session = (*program)->create_session(args.function);
  if (!session.ok()) return fail(session.status());
  const FunctionInfo& fn = (*session)->function();

  std::mt19937_64 rng(1234);
  std::vector<bool> given(fn.inputs.size(), false);
  for (const std::string& text : args.inputs) {
    auto binding = split_binding(text, "--input");
    if (!binding.ok()) return fail(binding.status());
    const auto& [name, source] = *binding;
    auto it = std::find_if(fn.inputs.begin(), fn.inputs.end(),
                           [&](const ArgumentInfo& a) { return a.name == name; });
    if (it == fn.inputs.end()) {
      std::string names;
      for (const auto& a : fn.inputs) names += (names.empty() ? "" : ", ") + a.name;
      return fail(not_found("function '" + fn.name + "' has no input '" + name +
                            "' (inputs: " + names + ")"));
    }
    size_t index = static_cast<size_t>(it - fn.inputs.begin());
    Result<Tensor> tensor = source == "random" ? random_tensor(*it, rng) : io::read_npy(source);
    if (!tensor.ok()) return fail(tensor.status().with_context("--input " + name));
    Status st = (*session)->set_input(index, *tensor);
    if (!st.ok()) return fail(st.with_context("--input " + name + "=" + source));
    given[index] = true;
  }
  for (size_t i = 0; i < fn.inputs.size(); ++i) {
    if (!given[i]) {
      return fail(invalid_argument("input '" + fn.inputs[i].name + "' (" +
                                   std::string(dtype_name(fn.inputs[i].dtype)) +
                                   shape_to_string(fn.inputs[i].shape) + ") is not given; use "
                                   "--input " + fn.inputs[i].name + "=PATH.npy or " +
                                   fn.inputs[i].name + "=random"));
    }
  }
  std::vector<std::pair<std::string, std::string>> outputs;
  for (const std::string& text : args.outputs) {
    auto binding = split_binding(text, "--output");
    if (!binding.ok()) return fail(binding.status());
    if (!(*session)->output(binding->first).ok()) {
      return fail((*session)->output(binding->first).status());
    }
    outputs.push_back(*binding);
  }

  using Clock = std::chrono::steady_clock;
  std::vector<double> times_us;
  uint32_t warmup = args.repeat > 1 ? 1 : 0;
  for (uint32_t i = 0; i < args.repeat + warmup; ++i) {
    auto start = Clock::now();
    Status st = (*session)->run();
    auto end = Clock::now();
    if (!st.ok()) return fail(st);
    if (i >= warmup) times_us.push_back(std::chrono::duration<double, std::micro>(end - start).count());
  }

  for (const DelegatePlacement& p : (*program)->placements()) {
    std::cout << "delegate " << p.delegate << " -> " << p.device << " (" << p.loader_key << ")\n";
  }
  for (size_t i = 0; i < (*session)->output_count(); ++i) {
    print_summary(fn.outputs[i].name, (*session)->output(i));
  }
  for (const auto& [name, path] : outputs) {
    Status st = io::write_npy(path, **(*session)->output(name));
    if (!st.ok()) return fail(st.with_context("--output " + name));
    std::cout << "wrote " << name << " to " << path << "\n";
  }
  if (args.repeat > 1) {
    std::sort(times_us.begin(), times_us.end());
    auto pick = [&](double q) {
      size_t k = static_cast<size_t>(q * static_cast<double>(times_us.size() - 1) + 0.5);
      return times_us[std::min(k, times_us.size() - 1)];
    };
    std::printf("latency over %u runs (after 1 warm-up): median %.3f us, p90 %.3f us\n",
                args.repeat, pick(0.5), pick(0.9));
  }
  return 0;
}

}  // namespace loom::cli
