// Runs one ONNX backend test case through the whole path a user takes
// (compile_onnx_file, Runtime::load_program, Session::run) and compares the
// results with the expected outputs of each data set. `loom test-onnx` and
// the conformance suite's execution check are built on it.
//
// Library: loom_conformance (links the runtime and the compiler).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "loom/conformance/onnx_cases.hpp"
#include "loom/runtime.hpp"

namespace loom::conformance {

struct CaseRunOptions {
  RuntimeOptions runtime;  // where plugins are found, their options
  // The device URI; empty: the reference kernels.
  std::string device;
  Tolerance tolerance;
  // How long one run may wait for an asynchronous device (LoadOptions).
  std::chrono::milliseconds run_timeout{60'000};
  // Compile each case once with every input dimension open and no input
  // value known (an open-shape program), then run every data set on that one
  // program, which binds shapes and shape-deciding values per run.
  bool open_shapes = false;
};

// Where a case's nodes went: the device's plugin took `plugin_nodes`, the
// reference kernels `reference_nodes`; `ran_elsewhere` lists the plugin's
// delegates that did not run on the device ("d0 on loom.reference://0").
struct Placement {
  size_t plugin_nodes = 0;
  size_t reference_nodes = 0;
  std::vector<std::string> ran_elsewhere;
  std::string to_string() const;  // "3 nodes on cpu-simd, 1 on reference kernels"
};

struct CaseVerdict {
  Outcome outcome = Outcome::kError;
  // Why it did not pass; for a PASS, a note on how it ran (a data set whose
  // input shapes replaced the model's declared ones) or empty.
  std::string message;
  // Unsupported for a value type Loom lacks (strings, sequences, optionals):
  // out of scope whatever the operators.
  bool type_only = false;
  Placement placement;  // of the last data set compiled
};

// Runs `test` (summarized by `summary`) with its data sets in `scratch` (a
// folder it may write). A plugin's delegate that ran on another device than
// `options.device` makes the case FAIL: the plugin claimed nodes it did not
// run. kUnimplemented anywhere makes it UNSUPPORTED.
CaseVerdict run_onnx_case(const TestCase& test, const ModelSummary& summary,
                          const CaseRunOptions& options, const std::filesystem::path& scratch);
// The same on a runtime the caller made (from options.runtime, which is
// then not read), so that many cases share its loaded plugins.
CaseVerdict run_onnx_case(Runtime& runtime, const TestCase& test, const ModelSummary& summary,
                          const CaseRunOptions& options, const std::filesystem::path& scratch);


// Runs cases one after another in a child process that keeps one Runtime,
// and so the plugins it loaded, from case to case: loading a plugin (for
// vulkan-compute the Vulkan loader, every driver and LLVM) is paid once per
// child rather than once per case. A case
// that crashes the child, or runs past `timeout` (zero: no limit; the child
// is then killed), is that case's ERROR ("crashed (signal 11, ...)", "timed
// out after 300 s"), and the next case gets a fresh child; so does every
// kCasesPerChild-th case, which bounds what one case can leave behind for
// the next. Not thread-safe; one case at a time.
class CaseWorker {
 public:
  static constexpr size_t kCasesPerChild = 256;
  // `cases` must outlive the worker, unchanged: the child runs its own copy
  // of them, the one it was forked with.
  CaseWorker(const std::vector<TestCase>& cases, CaseRunOptions options,
             std::chrono::seconds timeout);
  ~CaseWorker();  // ends the child
  CaseWorker(const CaseWorker&) = delete;
  CaseWorker& operator=(const CaseWorker&) = delete;

  // Runs cases[index] (summarized again in the child) with its data sets
  // in `scratch`.
  CaseVerdict run(size_t index, const std::filesystem::path& scratch);

 private:
  struct Child;
  [[noreturn]] void serve(int fd) const;
  void stop();
  void kill_child();
  const std::vector<TestCase>& cases_;
  CaseRunOptions options_;
  std::chrono::seconds timeout_;
  std::unique_ptr<Child> child_;
};

// A fresh folder under the temporary directory ("loom-<what>-XXXXXX").
Result<std::filesystem::path> make_scratch_dir(std::string_view what);

}  // namespace loom::conformance
