// `loom test-onnx`: runs ONNX backend test cases through the whole path a
// user takes (compile_onnx_file, Runtime::load_program, Session::run) and
// compares the results with the expected outputs of each data set.
//
// Each case runs in a child process (unless --no-fork), so that a crash or a
// hang in one case is reported as that case's ERROR and the run goes on; the
// child sends its outcome back through a pipe.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "conformance_baseline.hpp"
#include "loom/compiler.hpp"
#include "loom/runtime.hpp"
#include "onnx_conformance.hpp"

namespace loom::cli {
namespace {

namespace fs = std::filesystem;
namespace cf = loom::conformance;

struct Verdict {
  cf::Outcome outcome = cf::Outcome::kError;
  std::string message;
  // Unsupported for a value type Loom lacks (strings, sequences, optionals),
  // which is outside issue 3 whatever the ops: the op-list rule does not apply.
  bool type_only = false;
};

// kUnimplemented anywhere (the compiler, a kernel, a plugin) means the case
// needs something Loom lacks; anything else is an error of the case.
Verdict from_status(const Status& st, std::string_view stage) {
  Verdict v;
  v.outcome = st.code() == StatusCode::kUnimplemented ? cf::Outcome::kUnsupported
                                                      : cf::Outcome::kError;
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

Verdict run_case(const cf::TestCase& test, const cf::ModelSummary& summary,
                 const TestOnnxArgs& args, const fs::path& scratch) {
  RuntimeOptions options;
  options.threads = args.threads;
  if (Status s = add_plugin_options(args.plugin_options, &options); !s.ok()) {
    return from_status(s, "runtime");
  }
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return from_status(runtime.status(), "runtime");
  compiler::CompileOptions compile;
  if (!args.device.empty()) {
    std::string known;
    for (const DeviceInfo& d : (*runtime)->devices()) {
      if (d.uri == args.device) compile.targets = {d.plugin};
      known += (known.empty() ? "" : ", ") + d.uri;
    }
    if (compile.targets.empty()) {
      return {cf::Outcome::kError, "no device '" + args.device + "' (devices: " +
                                       (known.empty() ? "none" : known) + ")"};
    }
  }
  if (!summary.non_tensor.empty()) return {cf::Outcome::kUnsupported, summary.non_tensor, true};
  LoadOptions load;
  load.device = args.device;
  for (size_t s = 0; s < test.data_sets.size(); ++s) {
    std::string set_label = " (data set " + std::to_string(s) + ")";
    auto data = cf::read_data_set(test.data_sets[s], summary.inputs, summary.outputs);
    if (!data.ok()) {
      Verdict v = from_status(data.status(), "test data");
      v.type_only = v.outcome == cf::Outcome::kUnsupported;
      return v;
    }
    // Every input's shape comes from the data set, which binds any dynamic
    // dimension; values are handed over when shape inference asks for one.
    // Data sets may differ in shapes, so each is compiled on its own.
    compile.input_shapes.clear();
    for (const cf::NamedTensor& in : data->inputs) {
      compile.input_shapes.emplace_back(in.name, in.tensor.shape());
    }
    compile.input_value = [&data](std::string_view name) -> const Tensor* {
      for (const cf::NamedTensor& in : data->inputs) {
        if (in.name == name) return &in.tensor;
      }
      return nullptr;
    };
    fs::path program = scratch / ("set" + std::to_string(s) + ".loom");
    auto report = compiler::compile_onnx_file(**runtime, test.dir / "model.onnx", program, compile);
    if (!report.ok()) return from_status(report.status(), "compile" + set_label);
    auto loaded = (*runtime)->load_program(program, load);
    if (!loaded.ok()) return from_status(loaded.status(), "load" + set_label);
    auto session = (*loaded)->create_session();
    if (!session.ok()) return from_status(session.status(), "session" + set_label);
    for (const ArgumentInfo& arg : (*session)->function().inputs) {
      const Tensor* value = compile.input_value(arg.name);
      if (!value) {
        return {cf::Outcome::kError, "the program's input '" + arg.name +
                                         "' is not in the data set" + set_label};
      }
      Tensor bf16;
      Status st = (*session)->set_input(arg.name, *as_bf16(*value, arg.dtype, bf16));
      if (!st.ok()) return from_status(st, "input '" + arg.name + "'" + set_label);
    }
    Status st = (*session)->run();
    if (!st.ok()) return from_status(st, "run" + set_label);
    for (const cf::NamedTensor& expected : data->outputs) {
      auto got = (*session)->output(expected.name);
      if (!got.ok()) return from_status(got.status(), "output" + set_label);
      Tensor bf16;
      st = cf::compare_tensors(expected.name, **got,
                               *as_bf16(expected.tensor, (*got)->dtype(), bf16));
      if (!st.ok()) return {cf::Outcome::kFail, st.message() + set_label};
    }
    std::error_code ec;
    fs::remove(program, ec);
  }
  return {cf::Outcome::kPass, ""};
}

// The child's report: one byte of outcome, then the message.
Verdict run_isolated(const cf::TestCase& test, const cf::ModelSummary& summary,
                     const TestOnnxArgs& args, const fs::path& scratch) {
  int fds[2];
  if (::pipe(fds) != 0) return {cf::Outcome::kError, std::string("pipe: ") + std::strerror(errno)};
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {cf::Outcome::kError, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (args.timeout_s > 0) ::alarm(args.timeout_s);
    Verdict v = run_case(test, summary, args, scratch);
    std::string out(1, static_cast<char>(v.outcome));
    out += v.type_only ? '1' : '0';
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
      return {cf::Outcome::kError, "timed out after " + std::to_string(args.timeout_s) + " s"};
    }
    return {cf::Outcome::kError, "crashed (signal " + std::to_string(sig) + ", " +
                                     ::strsignal(sig) + ")"};
  }
  if (in.empty()) {
    return {cf::Outcome::kError, "the test process exited (status " +
                                     std::to_string(WEXITSTATUS(wstatus)) + ") without a result"};
  }
  auto outcome = static_cast<cf::Outcome>(in[0]);
  if (in.size() < 2 ||
      (outcome != cf::Outcome::kPass && outcome != cf::Outcome::kFail &&
       outcome != cf::Outcome::kUnsupported && outcome != cf::Outcome::kError)) {
    return {cf::Outcome::kError, "the test process sent a bad result"};
  }
  return {outcome, in.substr(2), in.size() > 1 && in[1] == '1'};
}

Result<fs::path> make_scratch() {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "loom-test-onnx-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return unavailable("cannot create a scratch folder in " + base.string() + ": " +
                       std::strerror(errno));
  }
  return fs::path(pattern);
}

}  // namespace

int run_test_onnx(const TestOnnxArgs& args) {
  std::vector<fs::path> roots(args.dirs.begin(), args.dirs.end());
  auto cases = cf::discover_cases(roots, args.filter);
  if (!cases.ok()) return fail(cases.status());
  std::optional<cf::KnownFailures> known;
  if (!args.known_failures.empty()) {
    auto loaded = cf::KnownFailures::load(args.known_failures);
    if (!loaded.ok()) return fail(loaded.status());
    known = std::move(*loaded);
  }
  std::optional<cf::Baseline> baseline;
  if (!args.baseline.empty()) {
    auto loaded = cf::Baseline::load(args.baseline);
    if (!loaded.ok()) return fail(loaded.status());
    baseline = std::move(*loaded);
  }
  auto scratch = make_scratch();
  if (!scratch.ok()) return fail(scratch.status());
  const std::string device = cf::device_key(args.device);

  std::vector<cf::CaseResult> results;
  std::vector<std::string> problems;
  for (size_t i = 0; i < cases->size(); ++i) {
    const cf::TestCase& test = (*cases)[i];
    auto start = std::chrono::steady_clock::now();
    cf::CaseResult result;
    result.name = test.name;
    result.dir = test.dir;
    auto summary = cf::summarize_model(test.dir / "model.onnx");
    Verdict v;
    if (!summary.ok()) {
      v = {cf::Outcome::kError, summary.status().message()};
    } else {
      fs::path dir = *scratch / std::to_string(i);
      std::error_code ec;
      fs::create_directories(dir, ec);
      v = args.no_fork ? run_case(test, *summary, args, dir)
                       : run_isolated(test, *summary, args, dir);
      fs::remove_all(dir, ec);
    }
    // Outside issue 3's scope (a value type Loom lacks, an opset outside
    // 7-17): an UNSUPPORTED verdict is allowed whatever the operators. Such a
    // case still runs, and a wrong result still fails.
    const bool out_of_scope = summary.ok() && !summary->out_of_scope.empty();
    if (out_of_scope && v.outcome == cf::Outcome::kUnsupported) {
      v.message = summary->out_of_scope + ": " + v.message;
    }
    if (summary.ok() && !v.type_only && !out_of_scope) result.op_types = summary->op_types;
    result.outcome = v.outcome;
    result.message = std::move(v.message);
    result.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                          start).count();
    std::vector<cf::CaseResult> one{std::move(result)};
    for (std::string& p : cf::classify(one, known ? &*known : nullptr, device)) {
      problems.push_back(std::move(p));
    }
    if (!args.json) std::cout << cf::format_case(one[0]) << std::endl;
    results.push_back(std::move(one[0]));
  }
  std::error_code ec;
  fs::remove_all(*scratch, ec);

  std::optional<cf::BaselineCheck> pinned;
  if (baseline) {
    pinned = cf::check_baseline(results, *baseline, args.filter.empty());
    for (std::string& p : pinned->problems) problems.push_back(std::move(p));
  }
  if (!args.write_baseline.empty()) {
    std::ofstream out(args.write_baseline, std::ios::binary | std::ios::trunc);
    out << cf::baseline_text(results, args.device);
    out.close();
    if (!out) problems.push_back("cannot write the baseline " + args.write_baseline);
  }
  if (!args.report.empty()) {
    std::ofstream out(args.report, std::ios::binary | std::ios::trunc);
    out << cf::report_json(results, args.device, problems);
    out.close();
    if (!out) problems.push_back("cannot write the report " + args.report);
  }
  cf::Totals totals = cf::count(results);
  if (args.json) {
    std::cout << cf::report_json(results, args.device, problems) << std::endl;
  } else {
    for (const std::string& p : problems) std::cout << "problem: " << p << "\n";
    if (pinned) std::cout << cf::format_baseline(*pinned, *baseline) << "\n";
    std::cout << cf::format_totals(totals, args.device) << std::endl;
  }
  return totals.failed == 0 && totals.errors == 0 && problems.empty() ? 0 : 1;
}

}  // namespace loom::cli
