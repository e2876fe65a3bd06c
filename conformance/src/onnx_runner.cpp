#include "loom/conformance/onnx_runner.hpp"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "loom/compiler.hpp"

namespace loom::conformance {

namespace {

CaseVerdict verdict(Outcome outcome, std::string message, bool type_only = false) {
  CaseVerdict v;
  v.outcome = outcome;
  v.message = std::move(message);
  v.type_only = type_only;
  return v;
}

// kUnimplemented anywhere (the compiler, a kernel, a plugin) means the case
// needs something Loom lacks; anything else is an error of the case.
CaseVerdict from_status(const Status& st, std::string_view stage) {
  CaseVerdict v;
  v.outcome = st.code() == StatusCode::kUnimplemented ? Outcome::kUnsupported : Outcome::kError;
  v.message = std::string(stage) + ": " + st.message();
  return v;
}

// ONNX's test data (made with numpy, which has no bfloat16) stores bf16
// tensors as u16 bit patterns: read them back as the bf16 they are.
const Tensor* as_bf16(const Tensor& t, DType wanted, Tensor& storage) {
  if (wanted != DType::kBF16 || t.dtype() != DType::kU16) return &t;
  auto view = Tensor::view(DType::kBF16, t.shape(), const_cast<void*>(t.data()), t.byte_size());
  if (!view.ok()) return &t;
  storage = std::move(*view);
  return &storage;
}

}  // namespace

std::string Placement::to_string() const {
  std::string text = std::to_string(plugin_nodes) + (plugin_nodes == 1 ? " node" : " nodes") +
                     " on the device, " + std::to_string(reference_nodes) +
                     " on reference kernels";
  for (const std::string& d : ran_elsewhere) text += "; delegate " + d;
  return text;
}

CaseVerdict run_onnx_case(const TestCase& test, const ModelSummary& summary,
                          const CaseRunOptions& options, const std::filesystem::path& scratch) {
  auto runtime = Runtime::create(options.runtime);
  if (!runtime.ok()) return from_status(runtime.status(), "runtime");
  return run_onnx_case(**runtime, test, summary, options, scratch);
}

CaseVerdict run_onnx_case(Runtime& runtime, const TestCase& test, const ModelSummary& summary,
                          const CaseRunOptions& options, const std::filesystem::path& scratch) {
  compiler::CompileOptions compile;
  std::string plugin;
  if (!options.device.empty()) {
    // Only the device's plugin is loaded (a case is one short process: the
    // others would be loaded for nothing). Its name is the URI's scheme.
    auto uri = parse_device_uri(options.device);
    if (!uri.ok()) return verdict(Outcome::kError, uri.status().message());
    auto devices = runtime.devices(uri->plugin);
    std::string known;
    if (devices.ok()) {
      for (const DeviceInfo& d : *devices) {
        if (d.uri == options.device) plugin = d.plugin;
        known += (known.empty() ? "" : ", ") + d.uri;
      }
    }
    if (plugin.empty()) {
      // Say what there is instead: every device of every plugin.
      known.clear();
      for (const DeviceInfo& d : runtime.devices()) known += (known.empty() ? "" : ", ") + d.uri;
      return verdict(Outcome::kError, "no device '" + options.device + "' (devices: " +
                                   (known.empty() ? "none" : known) +
                                   (devices.ok() ? "" : "; " + devices.status().message()) + ")");
    }
    compile.targets = {plugin};
  }
  if (!summary.non_tensor.empty()) return verdict(Outcome::kUnsupported, summary.non_tensor, true);
  LoadOptions load;
  load.device = options.device;
  load.run_timeout = options.run_timeout;
  CaseVerdict result = verdict(Outcome::kPass, "");
  std::shared_ptr<Program> open_program;  // options.open_shapes: compiled once
  Placement open_placement;
  for (size_t s = 0; s < test.data_sets.size(); ++s) {
    std::string set_label = " (data set " + std::to_string(s) + ")";
    auto data = read_data_set(test.data_sets[s], summary.inputs, summary.outputs);
    if (!data.ok()) {
      CaseVerdict v = from_status(data.status(), "test data");
      v.type_only = v.outcome == Outcome::kUnsupported;
      return v;
    }
    // Every input's shape comes from the data set, which binds any dynamic
    // dimension; values are handed over when shape inference asks for one.
    // Data sets may differ in shapes, so each is compiled on its own.
    compile.input_shapes.clear();
    for (const NamedTensor& in : data->inputs) compile.input_shapes.emplace_back(in.name, in.tensor.shape());
    const auto input_value = [&data](std::string_view name) -> const Tensor* {
      for (const NamedTensor& in : data->inputs) {
        if (in.name == name) return &in.tensor;
      }
      return nullptr;
    };
    compile.input_value = input_value;
    if (options.open_shapes) {
      for (auto& [name, shape] : compile.input_shapes) std::fill(shape.begin(), shape.end(), -1);
      compile.input_value = nullptr;
    }
    std::filesystem::path program = scratch / ("set" + std::to_string(s) + ".loom");
    Placement placement = open_placement;
    std::string plugin_key;
    Result<std::shared_ptr<Program>> loaded = open_program;
    if (open_program == nullptr) {
      auto report = compiler::compile_onnx_file(runtime.plugin_host(), test.dir / "model.onnx", program, compile);
      if (!report.ok()) return from_status(report.status(), "compile" + set_label);
      for (const compiler::TargetReport& t : report->targets) {
        placement.plugin_nodes += t.nodes;
        if (t.plugin == plugin) plugin_key = t.loader_key;
      }
      placement.reference_nodes = report->reference_nodes;
      loaded = runtime.load_program(program, load);
      if (!loaded.ok()) return from_status(loaded.status(), "load" + set_label);
      if (options.open_shapes) {
        open_program = *loaded;
        open_placement = placement;
      }
    }
    auto session = (*loaded)->create_session();
    if (!session.ok()) return from_status(session.status(), "session" + set_label);
    for (const ArgumentInfo& arg : (*session)->function().inputs) {
      const Tensor* value = input_value(arg.name);
      if (!value) {
        return verdict(Outcome::kError,
                "the program's input '" + arg.name + "' is not in the data set" + set_label);
      }
      Tensor bf16;
      Status st = (*session)->set_input(arg.name, *as_bf16(*value, arg.dtype, bf16));
      if (!st.ok()) return from_status(st, "input '" + arg.name + "'" + set_label);
    }
    Status st = (*session)->run();
    if (!st.ok()) return from_status(st, "run" + set_label);
    if (options.open_shapes && (*loaded)->function("main").ok() && (*loaded)->function("main")->open) {
      // Where the binding's delegates went (the open program has none of
      // its own), from the session of this binding: `plugin_nodes` then
      // counts the delegates on the device, not their nodes.
      placement.plugin_nodes = 0;
      for (const DelegateTransfers& t : (*session)->transfers()) {
        if (t.device == options.device) ++placement.plugin_nodes;
        if (!options.device.empty() && t.device != options.device && t.device != "reference") {
          placement.ran_elsewhere.push_back(t.delegate + " on " + t.device);
        }
      }
    }
    // A delegate compiled for the device's plugin must have run there; a
    // load that failed over to another device would hide a broken plugin.
    if (!plugin_key.empty()) {
      for (const DelegatePlacement& p : (*loaded)->placements()) {
        if (p.loader_key == plugin_key && p.device != options.device) {
          placement.ran_elsewhere.push_back(p.delegate + " on " + p.device);
        }
      }
    }
    result.placement = placement;
    for (const NamedTensor& expected : data->outputs) {
      auto got = (*session)->output(expected.name);
      if (!got.ok()) return from_status(got.status(), "output" + set_label);
      Tensor bf16;
      st = compare_tensors(expected.name, **got, *as_bf16(expected.tensor, (*got)->dtype(), bf16),
                           options.tolerance);
      if (!st.ok()) {
        result.outcome = Outcome::kFail;
        result.message = st.message() + set_label;
        return result;
      }
    }
    if (!placement.ran_elsewhere.empty()) {
      result.outcome = Outcome::kFail;
      result.message = "the plugin's delegates ran on another device than " + options.device +
                        ": " + placement.to_string() + set_label;
      return result;
    }
    std::error_code ec;
    std::filesystem::remove(program, ec);
  }
  return result;
}

namespace {

void append_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
uint64_t read_u64(const std::string& in, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, in.data() + at, 8);
  return v;
}

}  // namespace

// The child's report: outcome, type_only, the two node counts, then the
// message (delegates that ran elsewhere are in it already).
CaseVerdict run_onnx_case_isolated(const TestCase& test, const ModelSummary& summary,
                                   const CaseRunOptions& options,
                                   const std::filesystem::path& scratch,
                                   std::chrono::seconds timeout) {
  int fds[2];
  if (::pipe(fds) != 0) return verdict(Outcome::kError, std::string("pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return verdict(Outcome::kError, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (timeout.count() > 0) ::alarm(static_cast<unsigned>(timeout.count()));
    CaseVerdict v = run_onnx_case(test, summary, options, scratch);
    std::string out(1, static_cast<char>(v.outcome));
    out += v.type_only ? '1' : '0';
    append_u64(out, v.placement.plugin_nodes);
    append_u64(out, v.placement.reference_nodes);
    out += v.message;
    for (size_t done = 0; done < out.size();) {
      ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0 && errno != EINTR) break;
      if (n > 0) done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string in;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      if (in.size() < (1u << 20)) in.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    if (sig == SIGALRM) {
      return verdict(Outcome::kError, "timed out after " + std::to_string(timeout.count()) + " s");
    }
    return verdict(Outcome::kError,
            "crashed (signal " + std::to_string(sig) + ", " + ::strsignal(sig) + ")");
  }
  if (in.empty()) {
    return verdict(Outcome::kError, "the test process exited (status " +
                                 std::to_string(WEXITSTATUS(wstatus)) + ") without a result");
  }
  auto outcome = static_cast<Outcome>(in[0]);
  if (in.size() < 18 || (outcome != Outcome::kPass && outcome != Outcome::kFail &&
                         outcome != Outcome::kUnsupported && outcome != Outcome::kError)) {
    return verdict(Outcome::kError, "the test process sent a bad result");
  }
  CaseVerdict v = verdict(outcome, in.substr(18), in[1] == '1');
  v.placement.plugin_nodes = read_u64(in, 2);
  v.placement.reference_nodes = read_u64(in, 10);
  return v;
}

Result<std::filesystem::path> make_scratch_dir(std::string_view what) {
  std::error_code ec;
  std::filesystem::path base = std::filesystem::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / ("loom-" + std::string(what) + "-XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return unavailable("cannot create a scratch folder in " + base.string() + ": " +
                       std::strerror(errno));
  }
  return std::filesystem::path(pattern);
}

}  // namespace loom::conformance
