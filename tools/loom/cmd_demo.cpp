#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "commands.hpp"
#include "common/demo_program.hpp"
#include "io/npy.hpp"
#include "loom/runtime.hpp"

namespace loom::cli {
namespace {

constexpr float kTolerance = 1e-5f;
constexpr int kTimedRuns = 50;

struct Row {
  std::string device;
  std::string result;
  std::string detail;
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

}  // namespace

int run_demo(const DemoArgs& args) {
  tools::MlpShape shape;
  auto writer = tools::build_mlp_program(shape);
  if (!writer.ok()) return fail(writer.status());
  auto bytes = writer->write_buffer();
  if (!bytes.ok()) return fail(bytes.status());
  Tensor x = tools::mlp_input(shape);

  RuntimeOptions options;
  options.threads = args.threads;
  auto runtime = Runtime::create(options);
  if (!runtime.ok()) return fail(runtime.status());

  // The reference: the same graph on the core's portable kernels.
  auto ref_writer = tools::build_mlp_program(shape, 7, /*with_delegate=*/false);
  if (!ref_writer.ok()) return fail(ref_writer.status());
  auto ref_bytes = ref_writer->write_buffer();
  if (!ref_bytes.ok()) return fail(ref_bytes.status());
  auto ref_program = (*runtime)->load_program(*ref_bytes);
  if (!ref_program.ok()) return fail(ref_program.status().with_context("reference program"));
  NamedTensor input{"x", x};
  auto expected = (*ref_program)->run("reference", {&input, 1});
  if (!expected.ok()) return fail(expected.status().with_context("reference run"));
  const Tensor& y_ref = (*expected)[0].tensor;

  std::cout << "Loom demo: MLP x[" << shape.batch << "x" << shape.in << "] -> " << shape.hidden
            << " -> Relu -> " << shape.out << " -> Softmax, " << bytes->size()
            << "-byte program\n";

  std::vector<Row> rows;
  int ran = 0, failed = 0;
  std::vector<DeviceInfo> devices = (*runtime)->devices();
  for (const DeviceInfo& device : devices) {
    auto program = (*runtime)->load_program(*bytes, LoadOptions{device.uri});
    if (!program.ok()) {
      rows.push_back({device.uri, "skipped", program.status().message()});
      continue;
    }
    auto session = (*program)->create_session("main");
    Status st = session.ok() ? (*session)->set_input("x", x) : session.status();
    if (st.ok()) st = (*session)->run();
    if (!st.ok()) {
      rows.push_back({device.uri, "FAILED", st.message()});
      ++failed;
      continue;
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
    rows.push_back({device.uri, ok ? "passed" : "FAILED", detail});
    ++ran;
    failed += !ok;
  }

  size_t width = 8;
  for (const Row& r : rows) width = std::max(width, r.device.size());
  std::printf("%-*s  %-8s  %s\n", static_cast<int>(width), "device", "result", "detail");
  for (const Row& r : rows) {
    std::printf("%-*s  %-8s  %s\n", static_cast<int>(width), r.device.c_str(), r.result.c_str(),
                r.detail.c_str());
  }

  if (!args.save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.save_dir, ec);
    if (ec) return fail(invalid_argument("cannot create " + args.save_dir + ": " + ec.message()));
    std::filesystem::path dir(args.save_dir);
    Status st = writer->write_file(dir / "program.loom");
    if (st.ok()) st = io::write_npy(dir / "input_x.npy", x);
    if (st.ok()) st = io::write_npy(dir / "expected_y.npy", y_ref);
    if (!st.ok()) return fail(st);
    std::cout << "saved program.loom, input_x.npy and expected_y.npy in " << args.save_dir << "\n";
  }

  if (ran == 0) {
    return fail(unavailable(devices.empty()
                                ? "no devices found; run `loom devices` to see which plugins "
                                  "were found and why any were rejected"
                                : "no device could run the demo program"));
  }
  if (failed > 0) {
    return fail(internal_error(std::to_string(failed) + " device(s) disagree with the "
                               "reference kernels"));
  }
  std::cout << "demo passed on " << ran << " device(s)\n";
  return 0;
}

}  // namespace loom::cli
