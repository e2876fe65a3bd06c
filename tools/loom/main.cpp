// loom: list devices, inspect and run programs, run the demo, make and edit
// parameter archives, and compile ONNX models.
#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "loom/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Loom: run machine-learning programs on the devices this machine has"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "loom " LOOM_VERSION_STRING);
  // Usage errors read like every other error: one line, exit code 1.
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "loom: error: " + loom::escape_control(e.what()) + " (see --help)\n";
  });

  loom::cli::DevicesArgs devices;
  auto* cmd_devices = app.add_subcommand("devices", "List plugins and their devices");
  cmd_devices->add_flag("--json", devices.json, "Print JSON");
  cmd_devices->add_option("--plugin-option", devices.plugin_options,
                          "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);
  cmd_devices->add_option("--isolate", devices.isolate,
                          "NAME[,NAME]: load these plugins each in a process of its own ('*': all)")
      ->allow_extra_args(false);
  cmd_devices->add_flag("--require-conformance", devices.require_conformance,
                        "Reject every plugin without a valid conformance stamp (loom "
                        "conformance --stamp)");

  loom::cli::DoctorArgs doctor;
  auto* cmd_doctor = app.add_subcommand(
      "doctor", "Explain, without running any plugin code, why a plugin is or would be "
                "rejected: manifest, library, ELF class and machine, needed libraries, entry "
                "point, ABI range, hash, conformance stamp; exit 1 when one would be");
  cmd_doctor->add_option("PLUGIN", doctor.plugin,
                         "A manifest (*.loom-plugin.json), a library, or a plugin name "
                         "(default: every manifest found)");
  cmd_doctor->add_option("--plugin-path", doctor.plugin_paths, "Also search DIR for plugins")
      ->allow_extra_args(false);
  cmd_doctor->add_flag("--require-conformance", doctor.require_conformance,
                       "Count a missing or mismatched conformance stamp as a problem");
  cmd_doctor->add_flag("--json", doctor.json, "Print JSON");

  loom::cli::InspectArgs inspect;
  auto* cmd_inspect = app.add_subcommand("inspect", "Show a program file's head, segments, "
                                                    "artifacts and functions");
  cmd_inspect->add_option("FILE", inspect.file, "Program file (.loom)")->required();
  cmd_inspect->add_flag("--json", inspect.json, "Print JSON");

  loom::cli::RunArgs run;
  auto* cmd_run = app.add_subcommand("run", "Run a function of a program");
  cmd_run->add_option("FILE", run.file, "Program file (.loom), or an ONNX model (.onnx) to "
                                        "compile first when loom has the compiler")->required();
  cmd_run->add_option("--function", run.function, "Function to run (default: the first)");
  cmd_run->add_option("--device", run.device,
                      "Device selector: a URI (cpu-simd://0), a plugin name, kind:gpu, a "
                      "list tried in order (vulkan-compute,fpga-stub,cpu-simd), "
                      "policy:fastest, policy:prefer-accelerator, requirements joined by & "
                      "(kind:gpu&dtype:f16, cap:async); default: each delegate's first "
                      "variant that a device can load");
  cmd_run->add_flag("--explain", run.explain,
                    "Print, for each delegate, every variant x device considered and why it "
                    "was chosen or refused (also when loading fails)");
  cmd_run->add_flag("--fallback", run.fallback,
                    "When a device fails a run (lost, or past --timeout), move its delegate "
                    "to the next device the selector allows and run once more");
  cmd_run->add_option("--trace", run.trace,
                      "Write a timeline of the runs as Chrome trace-event JSON (open it in "
                      "Perfetto or chrome://tracing): one track per device plus the host");
  cmd_run->add_flag("--profile", run.profile,
                    "Print time per delegate and op: device, calls, total, mean, share of the "
                    "run");
  cmd_run->add_flag("--verbose", run.verbose,
                    "Print the plugins' info lines on stderr (for example the size of the "
                    "weights cpu-simd packs)");
  cmd_run->add_flag("--json", run.json, "Print one JSON document (placements, outputs, "
                                        "latency; the error and placement on failure)");
  cmd_run->add_option("--input", run.inputs, "NAME=PATH.npy, NAME=PATH.pb (an ONNX "
                                             "TensorProto) or NAME=random")->required();
  cmd_run->add_option("--output", run.outputs, "NAME=PATH.npy: write a result");
  cmd_run->add_option("--output-dir", run.output_dir,
                      "Write every result as DIR/<name>.npy (characters other than letters, "
                      "digits, '.', '-' and '_' become '_')");
  cmd_run->add_option("--params", run.params,
                      "SCOPE=PATH.irpa: take the external parameters of SCOPE from this "
                      "archive (default: the path the program records, beside it)");
  cmd_run->add_flag("--no-param-checksums", run.no_param_checksums,
                    "Accept external parameters whose bytes differ from the checksums the "
                    "program records (other weights of the same shapes)");
  cmd_run->add_option("--repeat", run.repeat, "Run N times and print latency")
      ->check(CLI::Range(1u, 10000000u));
  cmd_run->add_option("--threads", run.threads, "Cap on plugin worker threads (0 = all cores)");
  cmd_run->add_option("--timeout", run.timeout_s,
                      "Seconds to wait for each asynchronous delegate before failing with "
                      "DEADLINE_EXCEEDED (default 60; 0: no limit)");
  cmd_run->add_option("--max-tensor-bytes", run.max_tensor_bytes,
                      "Largest tensor or arena the program may make a session allocate, in "
                      "bytes (default 0: half of this machine's memory)");
  cmd_run->add_option("--plugin-option", run.plugin_options,
                      "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);
  cmd_run->add_option("--record", run.record,
                      "Record every call loom makes into its plugins (loads with their blobs, "
                      "executions with their inputs and outputs, copies, fences, statuses) "
                      "into this capture file; replay it with loom replay");
  cmd_run->add_option("--isolate", run.isolate,
                      "NAME[,NAME]: run these plugins each in a process of its own ('*': all); "
                      "a crash there loses the device, not this process")
      ->allow_extra_args(false);
  cmd_run->add_flag("--require-conformance", run.require_conformance,
                    "Refuse every plugin without a valid conformance stamp (loom conformance "
                    "--stamp): unstamped, stamped for another build, or with failed checks");

  loom::cli::EstimateArgs estimate;
  auto* cmd_estimate = app.add_subcommand(
      "estimate", "Print every device's estimate of each delegate of a program, as "
                  "policy:fastest ranks them (the plugins' executable_estimate)");
  cmd_estimate->add_option("FILE", estimate.file, "Program file (.loom)")->required();
  cmd_estimate->add_option("--threads", estimate.threads,
                           "Cap on plugin worker threads (0 = all cores), as for run");
  cmd_estimate->add_option("--plugin-option", estimate.plugin_options,
                           "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);
  cmd_estimate->add_flag("--json", estimate.json, "Print JSON");

  loom::cli::DemoArgs demo;
  auto* cmd_demo = app.add_subcommand(
      "demo", "Compile small ONNX models from the ONNX test data for every device and check "
              "them against their expected outputs (without the test data, or with --mlp, "
              "--save-dir or --external-params: build a small MLP program, run it on every "
              "device and compare with the reference kernels)");
  cmd_demo->add_flag("--mlp", demo.mlp, "Run the built-in MLP demo");
  cmd_demo->add_option("--onnx-data", demo.onnx_data,
                       "Root of the ONNX backend test data (default: "
                       "/usr/share/libonnx-testdata/data)");
  cmd_demo->add_option("--save-dir", demo.save_dir,
                       "Write program.loom, input_<NAME>.npy and expected_<NAME>.npy here");
  cmd_demo->add_option("--threads", demo.threads, "Cap on plugin worker threads");
  cmd_demo->add_option("--plugin-option", demo.plugin_options,
                       "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);
  cmd_demo->add_flag("--json", demo.json,
                     "Print one JSON document (every run with its result, max |diff| and "
                     "median latency) instead of the table");
  cmd_demo->add_flag("--external-params", demo.external_params,
                     "Also run the program with its weights in a parameter archive "
                     "(--save-dir then writes that program and weights.irpa)");

#if LOOM_HAVE_COMPILER
  loom::cli::TestOnnxArgs test_onnx;
  auto* cmd_test_onnx = app.add_subcommand(
      "test-onnx", "Compile and run ONNX backend test cases (model.onnx + test_data_set_N) and "
                   "compare with their expected outputs");
  cmd_test_onnx->add_option("DIR", test_onnx.dirs, "A test case, or a folder of test cases")
      ->required();
  cmd_test_onnx->add_option("--device", test_onnx.device,
                            "Device URI, e.g. cpu-simd://0: compile for its plugin and run "
                            "there (default: the reference kernels)");
  cmd_test_onnx->add_option("--report", test_onnx.report, "Write a JSON report of every case");
  cmd_test_onnx->add_option("--known-failures", test_onnx.known_failures,
                            "File of cases expected to fail: '<case> <reference|PLUGIN|*> "
                            "<reason>' per line");
  cmd_test_onnx->add_option("--baseline", test_onnx.baseline,
                            "File of the cases that pass on this device, one a line: a listed "
                            "case that does not pass, or a passing case not listed, fails the "
                            "run");
  cmd_test_onnx->add_option("--write-baseline", test_onnx.write_baseline,
                            "Write the names of the cases that passed to this file");
  cmd_test_onnx->add_option("--filter", test_onnx.filter,
                            "Run only the cases whose name contains this");
  cmd_test_onnx->add_option("--timeout", test_onnx.timeout_s,
                            "Seconds per case before it counts as an error (0: none; default "
                            "300, times $LOOM_TIME_SCALE when set)")
      ->each([&test_onnx](const std::string&) { test_onnx.timeout_given = true; });
  cmd_test_onnx->add_option("--threads", test_onnx.threads, "Cap on plugin worker threads");
  cmd_test_onnx->add_option("--plugin-option", test_onnx.plugin_options,
                            "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);
  cmd_test_onnx->add_flag("--json", test_onnx.json,
                          "Print one JSON document (totals, every case, problems: the --report "
                          "document) instead of text");
  cmd_test_onnx->add_flag("--open-shapes", test_onnx.open_shapes,
                          "Compile each case once with every input dimension open (an "
                          "open-shape program), then run all its data sets on it");
  cmd_test_onnx->add_flag("--no-fork", test_onnx.no_fork,
                          "Run every case in this process (for debuggers; a crash ends the run)");
  loom::cli::ConformanceArgs conformance;
  CLI::App* cmd_conformance = loom::cli::add_conformance_command(app, conformance);

  loom::cli::CompareArgs compare;
  auto* cmd_compare = app.add_subcommand(
      "compare", "Run an ONNX model or a compiled program (.loom) on a device and on the reference "
                 "kernels (or a second device) with every value between its steps observed; report "
                 "each step's worst error and name the first step that leaves the tolerance; exit 1 "
                 "when one does");
  cmd_compare->add_option("MODEL", compare.model,
                          "ONNX model (.onnx), or a program (.loom): its instructions are compared as "
                          "compiled, each delegate against its loom.reference variant (loom compile "
                          "--variants all, the default without --target)")
      ->required();
  cmd_compare->add_option("--device", compare.device, "The device under test (a selector, as "
                                                      "for loom run)")->required();
  cmd_compare->add_option("--reference", compare.reference,
                          "Compare against this device instead of the reference kernels");
  cmd_compare->add_option("--input", compare.inputs, "NAME=PATH.npy or NAME=PATH.pb")
      ->required()
      ->allow_extra_args(false);
  cmd_compare->add_option("--rtol", compare.rtol, "Relative tolerance (default 1e-3): a value is "
                                                   "within when |got - ref| <= atol + rtol * |ref|");
  cmd_compare->add_option("--atol", compare.atol, "Absolute tolerance (default 1e-4)");
  cmd_compare->add_flag("--split-delegates", compare.split_delegates,
                        "Compile every node a plugin takes as a delegate of its own, to compare "
                        "inside delegates (fusion across nodes is then off); a program's delegates "
                        "are rebuilt from their loom.reference variants");
  cmd_compare->add_option("--bisect", compare.bisect,
                          "DIR: write the first divergent step as DIR/model.onnx (a program: "
                          "DIR/model.loom, that one instruction) with its inputs (from the reference "
                          "run) and expected outputs as .npy files");
  cmd_compare->add_flag("--json", compare.json,
                        "Print the comparison as one JSON document (every step, every value) instead "
                        "of text; the exit status is the same");
  cmd_compare->add_option("--threads", compare.threads, "Cap on plugin worker threads");
  cmd_compare->add_option("--plugin-option", compare.plugin_options,
                          "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);
#endif

  loom::cli::ParamsArgs params;
  CLI::App* cmd_params = loom::cli::add_params_command(app, params);

  loom::cli::CompileArgs compile;
  auto* cmd_compile = app.add_subcommand("compile", "Compile an ONNX model into a program");
  cmd_compile->add_option("MODEL", compile.model, "ONNX model (.onnx)")->required();
  cmd_compile->add_option("-o,--output", compile.output, "Program file to write (.loom)")->required();
  cmd_compile->add_option("--target", compile.targets,
                          "Plugins to compile for, in order of preference (cpu-simd,...); "
                          "what none takes runs on the reference kernels. Default: every "
                          "plugin found that compiles, accelerators first (as "
                          "policy:prefer-accelerator), with --variants all; 'none': "
                          "the reference kernels only");
  cmd_compile->add_option("--input-shape", compile.input_shapes,
                          "NAME=DIMS (1x3x224x224, 1,3,?,?, 1,3,32..2048,32..2048): bind an "
                          "input's dimensions; '?' or MIN..MAX leaves one open (an open-shape "
                          "program); dimensions the model leaves open stay open unless bound");
  cmd_compile->add_option("--params-out", compile.params_out,
                          "Write the weights to this .irpa archive (in the program's folder) "
                          "instead of into the program");
  cmd_compile->add_option("--params-scope", compile.params_scope,
                          "Scope of the weights in the archive (default: model)");
  cmd_compile->add_option("--variants", compile.variants,
                          "first: one variant per subgraph, for the plugin that took it; all: "
                          "also one for every other --target that supports all of its nodes, "
                          "and one for the reference kernels, so that the program runs "
                          "wherever any of them is present (default: all without --target, "
                          "first with it)")
      ->check(CLI::IsMember({"first", "all"}));
  cmd_compile->add_flag("--json", compile.json, "Print the report as one JSON document");
  cmd_compile->add_option("--plugin-path", compile.plugin_paths, "Also search DIR for plugins");
  cmd_compile->add_option("--plugin-option", compile.plugin_options,
                          "KEY=VALUE handed to every plugin when it is created")
      ->allow_extra_args(false);

  loom::cli::ReplayArgs replay;
  auto* cmd_replay = app.add_subcommand(
      "replay", "Replay the executions of a capture (loom run --record) against a plugin, each "
                "output compared with the recorded one, or with --calls all every recorded call "
                "in order; exit 1 when one differs or fails");
  cmd_replay->add_option("CAPTURE", replay.capture, "Capture file")->required();
  cmd_replay->add_option("--plugin", replay.plugin,
                         "Plugin to replay against: a name or a manifest (*.loom-plugin.json); "
                         "default: the recorded one. Another plugin compiles the recorded graph");
  cmd_replay->add_option("--device", replay.device,
                         "Device URI of that plugin (default: the recorded device's index)");
  cmd_replay->add_option("--tolerance", replay.tolerances,
                         "[DTYPE=]BOUND[,BOUND]: DTYPE f32, f16, bf16 or f64 (default: all "
                         "floats), BOUND ulps:N, rel:X, abs:X or exact (the default); integers "
                         "are always exact")
      ->allow_extra_args(false);
  cmd_replay->add_option("--report", replay.report, "Write the report as JSON");
  cmd_replay->add_option("--junit", replay.junit, "Write the report as JUnit XML");
  cmd_replay->add_option("--plugin-path", replay.plugin_paths, "Also search DIR for plugins")
      ->allow_extra_args(false);
  cmd_replay->add_option("--plugin-option", replay.plugin_options,
                         "KEY=VALUE handed to the plugin when it is created")
      ->allow_extra_args(false);
  cmd_replay->add_option("--threads", replay.threads, "Cap the plugin's worker threads");
  cmd_replay->add_flag("--in-process", replay.in_process,
                       "Load the plugin into this process instead of a child process");
  cmd_replay->add_flag("--json", replay.json, "Print the report as JSON");
  cmd_replay->add_option("--calls", replay.calls,
                         "executions (default): each recorded execution on fresh buffers with its "
                         "recorded inputs. all: every recorded call of the plugin in order: "
                         "buffers allocated and imported again, copies, maps, fences, executions "
                         "on those buffers; copies to the host and outputs compared (a copy as "
                         "the dtype of the output that last wrote it), statuses compared; serial "
                         "(each execution waited for at once); after a crash, calls on the lost "
                         "buffers and fences are skipped");

  cmd_replay->add_option("--timeout", replay.timeout_ms,
                         "With --calls all: how long to wait for an execution to signal its "
                         "fence, in ms (default 60000); one that does not is failed, and the "
                         "plugin's process started again")
      ->check(CLI::Range(uint64_t{1}, uint64_t{86'400'000}));

  loom::cli::CaptureArgs capture;
  auto* cmd_capture = app.add_subcommand("capture", "Summarize a capture or dump its calls");
  cmd_capture->require_subcommand(1);
  auto* cmd_capture_info = cmd_capture->add_subcommand(
      "info", "Plugins, devices, payloads and calls by kind of a capture");
  cmd_capture_info->add_option("CAPTURE", capture.capture, "Capture file")->required();
  cmd_capture_info->add_flag("--json", capture.json, "Print JSON");
  auto* cmd_capture_dump = cmd_capture->add_subcommand(
      "dump", "Write the capture's header and then each call as one JSON object per line");
  cmd_capture_dump->add_option("CAPTURE", capture.capture, "Capture file")->required();

#if LOOM_HAVE_SERVE
  loom::cli::ServeArgs serve;
  auto* cmd_serve = loom::cli::add_serve_command(app, serve);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error exits 1, like any
    // other error (CLI11's own codes, such as 106, would tell a script
    // nothing more and break "1 means a reported error").
    return app.exit(e) == 0 ? 0 : 1;
  }

  if (*cmd_devices) return loom::cli::run_devices(devices);
  if (*cmd_doctor) return loom::cli::run_doctor(doctor);
  if (*cmd_inspect) return loom::cli::run_inspect(inspect);
  if (*cmd_run) return loom::cli::run_run(run);
  if (*cmd_estimate) return loom::cli::run_estimate(estimate);
  if (*cmd_replay) return loom::cli::run_replay(replay);
  if (*cmd_capture) {
    capture.action = *cmd_capture_info ? "info" : "dump";
    return loom::cli::run_capture(capture);
  }
  if (*cmd_demo) return loom::cli::run_demo(demo);
  if (*cmd_params) return loom::cli::run_params(params);
  if (*cmd_compile) return loom::cli::run_compile(compile);
#if LOOM_HAVE_SERVE
  if (*cmd_serve) return loom::cli::run_serve(serve);
#endif
#if LOOM_HAVE_COMPILER
  if (*cmd_test_onnx) return loom::cli::run_test_onnx(test_onnx);
  if (*cmd_conformance) return loom::cli::run_conformance(conformance);
  if (*cmd_compare) return loom::cli::run_compare(compare);
#endif
  return 1;
}
