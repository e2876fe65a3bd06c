// `loom demo` on real ONNX models from the ONNX backend test data: a
// convolution, a pooling layer and a Gemm (the test data holds no single
// conv net with all three, and its PyTorch-converted models use opset 6,
// older than the importer takes), compiled for the
// reference kernels and for every device, run, and checked against the
// outputs shipped with them.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "loom/compiler.hpp"
#include "loom/runtime.hpp"
#include "loom/conformance/onnx_cases.hpp"

namespace loom::cli {
namespace {

namespace fs = std::filesystem;
namespace cf = loom::conformance;

constexpr int kTimedRuns = 50;
// A conv layer exported by PyTorch (opset 6, whose Conv opset 7 kept), a
// pool and a fully connected layer: the parts of a conv net. The test data
// has no whole conv net at an opset Loom takes.
constexpr const char* kModels[] = {"pytorch-converted/test_Conv2d",
                                   "node/test_averagepool_2d_default",
                                   "node/test_gemm_all_attributes"};

// The largest |got - expected| over f32 outputs; NaN where one is NaN and
// the other not. Other dtypes do not enter (compare_tensors checks them).
double max_abs_diff(const Tensor& got, const Tensor& expected) {
  if (got.dtype() != DType::kF32 || expected.dtype() != DType::kF32 ||
      got.element_count() != expected.element_count()) {
    return 0;
  }
  double worst = 0;
  for (uint64_t i = 0; i < got.element_count(); ++i) {
    double a = got.data_as<float>()[i], e = expected.data_as<float>()[i];
    if (std::isnan(a) && std::isnan(e)) continue;
    double d = std::fabs(a - e);
    if (!(d <= worst)) worst = d;
  }
  return worst;
}

struct Row {
  std::string model, device, result, detail;
  double max_abs_diff = -1;  // -1: not run
  double median_us = -1;
  size_t plugin_nodes = 0;   // nodes compiled for the device's plugin
};

Row run_one(Runtime& runtime, const fs::path& dir, const cf::ModelSummary& summary,
            const cf::DataSet& data, const std::string& uri, const std::string& plugin,
            const fs::path& scratch) {
  Row row{dir.filename().string(), uri.empty() ? "reference" : uri, "FAILED", ""};
  compiler::CompileOptions options;
  if (!plugin.empty()) options.targets = {plugin};
  for (const NamedTensor& in : data.inputs) {
    options.input_shapes.emplace_back(in.name, in.tensor.shape());
  }
  fs::path out = scratch / (row.model + "-" + plugin + ".loom");
  auto report = compiler::compile_onnx_file(runtime.plugin_host(), dir / "model.onnx", out, options);
  if (!report.ok()) return row.detail = "compile: " + report.status().message(), row;
  LoadOptions load;
  load.device = uri;
  auto program = runtime.load_program(out, load);
  if (!program.ok()) return row.detail = "load: " + program.status().message(), row;
  auto session = (*program)->create_session();
  if (!session.ok()) return row.detail = session.status().message(), row;
  for (const NamedTensor& in : data.inputs) {
    Status st = (*session)->set_input(in.name, in.tensor);
    if (!st.ok()) return row.detail = st.message(), row;
  }
  std::vector<double> times;
  Status st;
  for (int i = 0; i < kTimedRuns + 1 && st.ok(); ++i) {
    auto start = std::chrono::steady_clock::now();
    st = (*session)->run();
    if (i > 0) {  // the first run warms up
      times.push_back(std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start).count());
    }
  }
  if (!st.ok()) return row.detail = "run: " + st.message(), row;
  double worst = 0;
  Status verdict;
  for (const NamedTensor& expected : data.outputs) {
    auto got = (*session)->output(expected.name);
    if (!got.ok()) return row.detail = got.status().message(), row;
    worst = std::max(worst, max_abs_diff(**got, expected.tensor));
    if (verdict.ok()) verdict = cf::compare_tensors(expected.name, **got, expected.tensor);
  }
  std::sort(times.begin(), times.end());
  char detail[160];
  std::snprintf(detail, sizeof detail, "max |diff| %.2e, median %.1f us over %d runs, %zu nodes "
                "on the plugin", worst, times[times.size() / 2], kTimedRuns,
                report->targets.empty() ? size_t{0} : report->targets[0].nodes);
  row.detail = detail;
  row.max_abs_diff = worst;
  row.median_us = times[times.size() / 2];
  row.plugin_nodes = report->targets.empty() ? size_t{0} : report->targets[0].nodes;
  if (!verdict.ok()) row.detail += "; " + verdict.message();
  row.result = verdict.ok() ? "passed" : "FAILED";
  return row;
}

}  // namespace

int run_onnx_demo(const DemoArgs& args, const fs::path& data_root) {
  RuntimeOptions options;
  options.threads = args.threads;
  if (Status s = add_plugin_options(args.plugin_options, &options); !s.ok()) return fail(s);
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status());
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec) base = "/tmp";
  std::string pattern = (base / "loom-demo-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return fail(unavailable("cannot create a scratch folder in " + base.string()));
  }
  fs::path scratch = pattern;

  std::vector<std::pair<std::string, std::string>> targets = {{"", ""}};  // uri, plugin
  for (const DeviceInfo& d : (*runtime)->devices()) targets.emplace_back(d.uri, d.plugin);
  if (!args.json) {
    std::cout << "Loom demo: ONNX models from " << data_root.string()
              << ", compiled for the reference kernels and " << targets.size() - 1
              << " device(s), checked against their expected outputs\n";
  }

  std::vector<Row> rows;
  int failed = 0;
  for (const char* model : kModels) {
    fs::path dir = data_root / model;
    auto summary = cf::summarize_model(dir / "model.onnx");
    auto data = summary.ok() ? cf::read_data_set(dir / "test_data_set_0", summary->inputs,
                                                 summary->outputs)
                             : Result<cf::DataSet>(summary.status());
    for (const auto& [uri, plugin] : targets) {
      Row row = data.ok() ? run_one(**runtime, dir, *summary, *data, uri, plugin, scratch)
                          : Row{dir.filename().string(), uri.empty() ? "reference" : uri,
                                "FAILED", data.status().message()};
      failed += row.result != "passed";
      rows.push_back(std::move(row));
    }
  }
  fs::remove_all(scratch, ec);

  const Status verdict =
      failed > 0 ? internal_error(std::to_string(failed) + " of " + std::to_string(rows.size()) +
                                  " run(s) disagree with the expected outputs")
                 : Status();
  if (args.json) {
    nlohmann::json runs = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json row = {{"model", r.model}, {"device", r.device}, {"result", r.result},
                            {"detail", r.detail}};
      if (r.max_abs_diff >= 0) {
        row["max_abs_diff"] = r.max_abs_diff;
        row["median_us"] = r.median_us;
        row["plugin_nodes"] = r.plugin_nodes;
      }
      runs.push_back(std::move(row));
    }
    nlohmann::json doc = {{"demo", "onnx"},
                          {"data", data_root.string()},
                          {"devices", targets.size() - 1},
                          {"runs", std::move(runs)},
                          {"passed", verdict.ok()}};
    if (!verdict.ok()) {
      doc["error"] = {{"code", status_code_name(verdict.code())}, {"message", verdict.message()}};
    }
    std::cout << doc.dump(2) << std::endl;
    return verdict.ok() ? 0 : fail(verdict);
  }

  size_t mw = 5, dw = 6;
  for (const Row& r : rows) mw = std::max(mw, r.model.size()), dw = std::max(dw, r.device.size());
  auto print = [&](const Row& r) {
    std::printf("%-*s  %-*s  %-8s  %s\n", static_cast<int>(mw), r.model.c_str(),
                static_cast<int>(dw), r.device.c_str(), r.result.c_str(), r.detail.c_str());
  };
  print({"model", "device", "result", "detail"});
  for (const Row& r : rows) print(r);
  std::fflush(stdout);
  if (!verdict.ok()) return fail(verdict);
  std::cout << "demo passed: " << std::size(kModels) << " ONNX models on the reference kernels and "
            << targets.size() - 1 << " device(s)\n";
  return 0;
}

}  // namespace loom::cli
