#include "loom/conformance/onnx_runner.hpp"

#include <signal.h>
#include <stdlib.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
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
    auto data = read_data_set(test.data_sets[s], summary.inputs, summary.outputs, summary.values);
    if (!data.ok()) {
      CaseVerdict v = from_status(data.status(), "test data");
      v.type_only = v.outcome == Outcome::kUnsupported;
      return v;
    }
    // Every input's shape comes from the data set, which binds any dynamic
    // dimension; values are handed over when shape inference asks for one.
    // Data sets may differ in shapes, so each is compiled on its own. As in
    // ONNX's own test runner, the data set's tensors are what the model runs
    // on, even where the model declares another shape for an input (onnx
    // 1.12's CastLike bfloat16 cases declare 'like' [3, 4] and give it [1]):
    // the verdict then says so.
    compile.input_shapes_replace_declared = true;
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
      if (!report->replaced_input_shapes.empty() && result.message.empty()) {
        std::string replaced;
        for (const std::string& r : report->replaced_input_shapes) replaced += (replaced.empty() ? "" : "; ") + r;
        result.message = "the data set's input shapes replace the model's declared ones (" + replaced + ")" +
                         set_label;
      }
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
      const Value* given = nullptr;  // a sequence or an optional
      for (const auto& [name, v] : data->input_values) {
        if (name == arg.name) given = &v;
      }
      if (given != nullptr) {
        Status st = (*session)->set_input_value(arg.name, *given);
        if (!st.ok()) return from_status(st, "input '" + arg.name + "'" + set_label);
        continue;
      }
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
    for (const auto& [name, expected] : data->output_values) {
      auto got = (*session)->output_value(name);
      if (!got.ok()) return from_status(got.status(), "output" + set_label);
      st = compare_values(name, *got, expected, options.tolerance);
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

// A verdict as a child sends it: outcome, type_only, the two node counts,
// then the message (delegates that ran elsewhere are in it already).
std::string encode_verdict(const CaseVerdict& v) {
  std::string out(1, static_cast<char>(v.outcome));
  out += v.type_only ? '1' : '0';
  append_u64(out, v.placement.plugin_nodes);
  append_u64(out, v.placement.reference_nodes);
  out += v.message;
  return out;
}
CaseVerdict decode_verdict(const std::string& in) {
  auto outcome = static_cast<Outcome>(in.empty() ? 0 : in[0]);
  if (in.size() < 18 || (outcome != Outcome::kPass && outcome != Outcome::kFail &&
                         outcome != Outcome::kUnsupported && outcome != Outcome::kError)) {
    return verdict(Outcome::kError, "the test process sent a bad result");
  }
  CaseVerdict v = verdict(outcome, in.substr(18), in[1] == '1');
  v.placement.plugin_nodes = read_u64(in, 2);
  v.placement.reference_nodes = read_u64(in, 10);
  return v;
}

// What a child that ended without answering did: "crashed (signal 11,
// Segmentation fault)" or "exited (status 3)".
std::string child_end_text(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    const int sig = WTERMSIG(wstatus);
    return "crashed (signal " + std::to_string(sig) + ", " + ::strsignal(sig) + ")";
  }
  return "exited (status " + std::to_string(WEXITSTATUS(wstatus)) + ") without a result";
}

// Writes all of `bytes` to a socket; false when the other end is gone
// (MSG_NOSIGNAL: no SIGPIPE).
bool send_all(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A frame: its length (u64) then its bytes.
bool send_frame(int fd, const std::string& payload) {
  std::string frame;
  append_u64(frame, payload.size());
  frame += payload;
  return send_all(fd, frame);
}

// Reads exactly `size` bytes before `deadline` (none when nullopt). 1: read;
// 0: the other end closed or failed; -1: the deadline passed.
int receive_exact(int fd, char* out, size_t size,
                  std::optional<std::chrono::steady_clock::time_point> deadline) {
  size_t done = 0;
  while (done < size) {
    int wait_ms = -1;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return -1;
      wait_ms = static_cast<int>(std::min<int64_t>(left.count(), 60'000));
    }
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return 0;
    if (ready == 0) continue;  // the loop checks the deadline
    ssize_t n = ::recv(fd, out + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    done += static_cast<size_t>(n);
  }
  return 1;
}

// A frame sent by send_frame, at most `limit` bytes; the codes of
// receive_exact, and 0 for a frame over the limit.
int receive_frame(int fd, std::string* payload, size_t limit,
                  std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt) {
  char size_bytes[8];
  int got = receive_exact(fd, size_bytes, 8, deadline);
  if (got != 1) return got;
  uint64_t size = 0;
  std::memcpy(&size, size_bytes, 8);
  if (size > limit) return 0;
  payload->assign(static_cast<size_t>(size), '\0');
  return size == 0 ? 1 : receive_exact(fd, payload->data(), payload->size(), deadline);
}

}  // namespace


struct CaseWorker::Child {
  pid_t pid = -1;
  int fd = -1;  // the parent's end of the socket pair
  size_t cases_run = 0;
};

CaseWorker::CaseWorker(const std::vector<TestCase>& cases, CaseRunOptions options,
                       std::chrono::seconds timeout)
    : cases_(cases), options_(std::move(options)), timeout_(timeout) {}

CaseWorker::~CaseWorker() { stop(); }

void CaseWorker::stop() {
  if (!child_) return;
  ::close(child_->fd);  // the child reads end of input and exits
  int wstatus = 0;
  while (::waitpid(child_->pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  child_.reset();
}

void CaseWorker::kill_child() {
  if (!child_) return;
  ::kill(child_->pid, SIGKILL);
  stop();
}

// The child: one Runtime for every case it is sent (made at the first), a
// case per request (its index and scratch folder), a verdict per reply.
// It never returns.
[[noreturn]] void CaseWorker::serve(int fd) const {
  std::unique_ptr<Runtime> runtime;
  std::string request;
  while (receive_frame(fd, &request, 1u << 20) == 1) {
    CaseVerdict v;
    if (request.size() < 8) {
      v = verdict(Outcome::kError, "the test runner sent a bad request");
    } else {
      const uint64_t index = read_u64(request, 0);
      const std::filesystem::path scratch = request.substr(8);
      if (index >= cases_.size()) {
        v = verdict(Outcome::kError, "the test runner sent a bad case index");
      } else if (!runtime) {
        auto made = Runtime::create(options_.runtime);
        if (made.ok()) runtime = std::move(*made);
        v = made.ok() ? CaseVerdict{} : from_status(made.status(), "runtime");
      }
      if (index < cases_.size() && runtime) {
        const TestCase& test = cases_[index];
        auto summary = summarize_model(test.dir / "model.onnx");
        v = summary.ok() ? run_onnx_case(*runtime, test, *summary, options_, scratch)
                         : verdict(Outcome::kError, summary.status().message());
      }
    }
    if (!send_frame(fd, encode_verdict(v))) break;
  }
  ::_exit(0);
}

CaseVerdict CaseWorker::run(size_t index, const std::filesystem::path& scratch) {
  if (child_ && child_->cases_run >= kCasesPerChild) stop();
  if (!child_) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      return verdict(Outcome::kError, std::string("socketpair: ") + std::strerror(errno));
    }
    pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      return verdict(Outcome::kError, std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::close(fds[0]);
      serve(fds[1]);
    }
    ::close(fds[1]);
    child_ = std::make_unique<Child>();
    child_->pid = pid;
    child_->fd = fds[0];
  }
  ++child_->cases_run;
  std::string request;
  append_u64(request, index);
  request += scratch.string();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (timeout_.count() > 0) deadline = std::chrono::steady_clock::now() + timeout_;
  std::string reply;
  const int got = send_frame(child_->fd, request)
                      ? receive_frame(child_->fd, &reply, 1u << 20, deadline)
                      : 0;
  if (got == 1) return decode_verdict(reply);
  if (got < 0) {
    kill_child();
    return verdict(Outcome::kError, "timed out after " + std::to_string(timeout_.count()) + " s");
  }
  // The child ended during the case: that case crashed it.
  int wstatus = 0;
  while (::waitpid(child_->pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  ::close(child_->fd);
  child_.reset();
  return verdict(Outcome::kError, child_end_text(wstatus));
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
