#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <span>
#include <utility>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "program_builder/demo_program.hpp"
#include "loom/npy.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {
namespace {

constexpr float kTolerance = 1e-5f;
constexpr int kTimedRuns = 50;

struct Row {
  std::string device;
  std::string weights;  // "inline" or the archive
  std::string result;
  std::string detail;
  double max_abs_diff = -1;  // -1: not run
  double median_us = -1;
};

float max_abs_diff(const Tensor& a, const Tensor& b) {
  float worst = 0;
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  for (uint64_t i = 0; i < a.element_count(); ++i) {
    float d = std::fabs(pa[i] - pb[i]);
    if (!(d <= worst)) worst = d;  // NaN counts as worst
  }
  return worst;
}

// A folder of its own under the temp dir, removed with this object: where
// the demo puts the external-weights program when no --save-dir is given.
class ScratchDir {
 public:
  static Result<ScratchDir> create() {
    std::error_code ec;
    std::filesystem::path base = std::filesystem::temp_directory_path(ec);
    if (ec) base = "/tmp";
    std::string pattern = (base / "loom-demo-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return unavailable("cannot create a scratch folder in " + base.string() + ": " +
                         std::strerror(errno));
    }
    ScratchDir dir;
    dir.path_ = pattern;
    return dir;
  }
  ScratchDir() = default;
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  ScratchDir& operator=(ScratchDir&& other) noexcept {
    std::swap(path_, other.path_);  // `other` removes what this held
    return *this;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

Status write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return data_loss("cannot write " + path.string());
  return Status();
}

// The outcome of an MLP demo that ran nothing: the JSON document, or the
// error line.
int demo_verdict(const DemoArgs& args, const Status& error) {
  if (args.json) {
    nlohmann::json doc = {{"demo", "mlp"}, {"runs", nlohmann::json::array()}, {"devices_run", 0},
                          {"passed", false}};
    doc["error"] = {{"code", status_code_name(error.code())}, {"message", error.message()}};
    std::cout << doc.dump(2) << std::endl;
  }
  return fail(error);
}

}  // namespace

int run_demo(const DemoArgs& args) {
#if LOOM_HAVE_COMPILER
  // The ONNX demo, unless asked for what only the MLP demo does (save its
  // program, external weights).
  if (!args.mlp && args.save_dir.empty() && !args.external_params) {
    std::filesystem::path root =
        args.onnx_data.empty() ? "/usr/share/libonnx-testdata/data" : args.onnx_data;
    std::error_code ec;
    if (std::filesystem::is_directory(root / "node", ec)) {
      return run_onnx_demo(args, root);
    }
    if (!args.json) {
      std::cout << "ONNX test data not found at " << root.string()
                << " (scripts/setup.sh installs libonnx-testdata); running the built-in MLP "
                   "demo instead\n";
    }
  }
#endif
  tools::MlpShape shape;
  const std::vector<tools::NamedWeight> weights = tools::mlp_weights(shape);
  Tensor x = tools::mlp_input(shape);

  RuntimeOptions options;
  options.threads = args.threads;
  if (Status s = add_plugin_options(args.plugin_options, &options); !s.ok()) return fail(s);
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status());

  // The delegate is compiled by every plugin that takes the whole MLP, one
  // variant each; a device then loads the variant of its plugin.
  tools::MlpOptions inline_options;
  inline_options.targets = {};
  auto inline_program = tools::build_mlp(**runtime, shape, weights, inline_options);
  if (!inline_program.ok()) {
    if (inline_program.status().code() != StatusCode::kFailedPrecondition) {
      return fail(inline_program.status());
    }
    // No plugin compiles it: nothing can run; said like any failed demo.
    return demo_verdict(args, unavailable(inline_program.status().message()));
  }
  auto bytes = inline_program->writer.write_buffer();
  if (!bytes.ok()) return fail(bytes.status());

  // The reference: the same graph on the core's portable kernels.
  auto ref_writer = tools::build_mlp_program(**runtime, shape, 7, /*with_delegate=*/false);
  if (!ref_writer.ok()) return fail(ref_writer.status());
  auto ref_bytes = ref_writer->write_buffer();
  if (!ref_bytes.ok()) return fail(ref_bytes.status());
  auto ref_program = (*runtime)->load_program(*ref_bytes);
  if (!ref_program.ok()) return fail(ref_program.status().with_context("reference program"));
  NamedTensor input{"x", x};
  auto expected = (*ref_program)->run("reference", {&input, 1});
  if (!expected.ok()) return fail(expected.status().with_context("reference run"));
  const Tensor& y_ref = (*expected)[0].tensor;

  // The external-weights variant is written to disk and loaded from there,
  // so that its archive is found the way a user's is: beside the program.
  std::filesystem::path dir(args.save_dir);
  if (!args.save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return fail(invalid_argument("cannot create " + args.save_dir + ": " + ec.message()));
  }
  ScratchDir scratch;
  std::filesystem::path external_path;
  if (args.external_params) {
    tools::MlpOptions external_options = inline_options;
    external_options.external_weights = true;
    auto external = tools::build_mlp(**runtime, shape, weights, external_options);
    if (!external.ok()) return fail(external.status());
    if (dir.empty()) {
      auto made = ScratchDir::create();
      if (!made.ok()) return fail(made.status());
      scratch = std::move(*made);
    }
    const std::filesystem::path& folder = dir.empty() ? scratch.path() : dir;
    external_path = folder / "program.loom";
    Status st = external->writer.write_file(external_path);
    if (st.ok()) st = write_file(folder / external_options.archive, external->archive);
    if (!st.ok()) return fail(st);
  }

  if (!args.json) std::cout << "Loom demo: MLP x[" << shape.batch << "x" << shape.in << "] -> " << shape.hidden
            << " -> Relu -> " << shape.out << " -> Softmax, " << bytes->size()
            << "-byte program, its delegate compiled by";
  if (!args.json) {
    for (const std::string& plugin : inline_program->compiled_for) std::cout << " " << plugin;
    std::cout << "\n";
  }

  std::vector<Row> rows;
  int ran = 0, failed = 0;
  // Returns whether the program loaded on `device`. A device that cannot
  // load the demo is skipped; one that loads it with inline weights must load
  // it with external ones too.
  auto run_on = [&](const DeviceInfo& device, bool external) {
    LoadOptions load;
    load.device = device.uri;
    const char* weights_label = external ? "weights.irpa" : "inline";
    auto program = external ? (*runtime)->load_program(external_path, load)
                            : (*runtime)->load_program(*bytes, load);
    if (!program.ok()) {
      // A plugin that did not compile the MLP says why, rather than the
      // loader's "no variant for this device".
      std::string why = program.status().message();
      for (const auto& [plugin, reason] : inline_program->declined) {
        if (device.plugin == plugin) why = reason;
      }
      rows.push_back({device.uri, weights_label, external ? "FAILED" : "skipped", why});
      failed += external;
      return false;
    }
    auto session = (*program)->create_session("main");
    Status st = session.ok() ? (*session)->set_input("x", x) : session.status();
    if (st.ok()) st = (*session)->run();
    if (!st.ok()) {
      rows.push_back({device.uri, weights_label, "FAILED", st.message()});
      ++failed;
      return true;
    }
    float err = max_abs_diff((*session)->output(0), y_ref);
    std::vector<double> times;
    for (int i = 0; i < kTimedRuns && st.ok(); ++i) {
      auto start = std::chrono::steady_clock::now();
      st = (*session)->run();
      times.push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start).count());
    }
    std::sort(times.begin(), times.end());
    char detail[128];
    std::snprintf(detail, sizeof detail, "max |diff| %.2e, median %.1f us over %d runs", err,
                  times[times.size() / 2], kTimedRuns);
    bool ok = st.ok() && err <= kTolerance;
    rows.push_back({device.uri, weights_label, ok ? "passed" : "FAILED", detail, err,
                    times[times.size() / 2]});
    failed += !ok;
    return true;
  };
  std::vector<DeviceInfo> devices = (*runtime)->devices();
  for (const DeviceInfo& device : devices) {
    if (!run_on(device, false)) continue;
    ++ran;
    if (args.external_params) run_on(device, true);
  }

  // The verdict, for the text and the JSON alike.
  Status verdict;
  if (ran == 0) {
    verdict = unavailable(devices.empty()
                              ? "no devices found; run `loom devices` to see which plugins "
                                "were found and why any were rejected"
                              : "no device could run the demo program");
  } else if (failed > 0) {
    verdict = internal_error(std::to_string(failed) + " run(s) disagree with the "
                             "reference kernels");
  }
  Status saved;
  if (!args.save_dir.empty()) {
    if (!args.external_params) saved = inline_program->writer.write_file(dir / "program.loom");
    if (saved.ok()) saved = io::write_npy(dir / "input_x.npy", x);
    if (saved.ok()) saved = io::write_npy(dir / "expected_y.npy", y_ref);
  }
  if (args.json) {
    nlohmann::json runs = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json row = {{"device", r.device}, {"weights", r.weights}, {"result", r.result},
                            {"detail", r.detail}};
      if (r.max_abs_diff >= 0) {
        row["max_abs_diff"] = r.max_abs_diff;
        row["median_us"] = r.median_us;
      }
      runs.push_back(std::move(row));
    }
    nlohmann::json doc = {{"demo", "mlp"},
                          {"program_bytes", bytes->size()},
                          {"compiled_for", inline_program->compiled_for},
                          {"runs", std::move(runs)},
                          {"devices_run", ran},
                          {"passed", verdict.ok() && saved.ok()}};
    if (!args.save_dir.empty() && saved.ok()) doc["saved_to"] = args.save_dir;
    const Status& error = !saved.ok() ? saved : verdict;
    if (!error.ok()) {
      doc["error"] = {{"code", status_code_name(error.code())}, {"message", error.message()}};
    }
    std::cout << doc.dump(2) << std::endl;
    return error.ok() ? 0 : fail(error);
  }

  size_t width = 8;
  for (const Row& r : rows) width = std::max(width, r.device.size());
  auto print_row = [&](const std::string& device, const std::string& weights,
                       const std::string& result, const std::string& detail) {
    std::printf("%-*s  ", static_cast<int>(width), device.c_str());
    if (args.external_params) std::printf("%-12s  ", weights.c_str());
    std::printf("%-8s  %s\n", result.c_str(), detail.c_str());
  };
  print_row("device", "weights", "result", "detail");
  for (const Row& r : rows) print_row(r.device, r.weights, r.result, r.detail);

  if (!args.save_dir.empty()) {
    if (!saved.ok()) return fail(saved);
    std::cout << "saved program.loom" << (args.external_params ? ", weights.irpa" : "")
              << ", input_x.npy and expected_y.npy in " << args.save_dir << "\n";
  }
  if (!verdict.ok()) return fail(verdict);
  std::cout << "demo passed on " << ran << " device(s)"
            << (args.external_params ? ", with inline and with external weights" : "") << "\n";
  return 0;
}

}  // namespace loom::cli
