// executables.*, execution.* and fences.execute_signals: the plugin's own
// blobs, garbage and mutated blobs, the ONNX node tests, and fences
// signaled by executions.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "check_context.hpp"
#include "loom/conformance/time_scale.hpp"
#include "loom/conformance/onnx_cases.hpp"
#include "loom/conformance/onnx_runner.hpp"

namespace loom::conformance::detail {

namespace fs = std::filesystem;
fs::path default_onnx_dir();

namespace {

// The device under test, with the blobs the checks run (`blobs` = how many
// to find; `no_blob` says why there are none, a skip).
struct Target : DeviceUnderTest {
  std::vector<TestBlob> blobs;
  std::string no_blob;
};

Target open_target(CheckContext& ctx, size_t blobs) {
  Target t;
  if (blobs > 0) {
    t.blobs = ctx.blobs(blobs, &t.no_blob);
    if (t.blobs.empty()) return t;
  }
  static_cast<DeviceUnderTest&>(t) = open_device(ctx);
  return t;
}

Verdict own_blobs(CheckContext& ctx) {
  Target t = open_target(ctx, ctx.count(3, 10));
  if (!t.error.empty()) return fail(t.error);
  if (t.blobs.empty()) return skip(t.no_blob);
  for (const TestBlob& blob : t.blobs) {
    ctx.note("executable_check of the blob " + blob.origin);
    if (std::string e = check_blob(*t.plugin, t.device, blob, blob.bytes); !e.empty()) {
      return fail("executable_check refused its own blob (" + blob.origin + "): " + e);
    }
    ctx.note("executable_load of the blob " + blob.origin);
    ExecutableGuard exe{&t.plugin->api(), nullptr};
    if (std::string e = load_blob(*t.plugin, t.device, blob, blob.bytes, &exe.executable); !e.empty()) {
      return fail("executable_load refused its own blob (" + blob.origin + "): " + e);
    }
    if (blob.inputs.empty() && blob.outputs.empty()) continue;
    ctx.note("execute of the blob " + blob.origin);
    std::vector<std::vector<std::byte>> in, out;
    if (std::string e = execute_blob(*t.plugin, t.device, t.capabilities, exe.executable, blob, in, out); !e.empty()) {
      return fail("execute of its own blob (" + blob.origin + ") on zero inputs failed: " + e);
    }
  }
  return pass(std::to_string(t.blobs.size()) + " blob(s)");
}

Verdict reject_garbage(CheckContext& ctx) {
  auto plugin = ctx.load();
  if (!plugin.ok()) return fail(plugin.status().message());
  auto index = ctx.device_index(**plugin);
  if (!index.ok()) return fail(index.status().message());
  loom_device_t* device = (*plugin)->device_handle(*index);
  std::vector<std::pair<std::string, std::vector<std::byte>>> garbage;
  garbage.emplace_back("an empty blob", std::vector<std::byte>{});
  garbage.emplace_back("3 bytes 'abc'", std::vector<std::byte>{std::byte{'a'}, std::byte{'b'}, std::byte{'c'}});
  garbage.emplace_back("64 zero bytes", std::vector<std::byte>(64));
  std::vector<std::byte> noise(4096);
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (auto& b : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<std::byte>(x);
  }
  garbage.emplace_back("4096 pseudo-random bytes", noise);
  for (const std::string& key : ctx.manifest().loader_keys) {
    for (const auto& [what, bytes] : garbage) {
      TestBlob blob{what, key, 0, bytes, {}, {}};
      ctx.note("executable_check of " + what + " under '" + key + "'");
      if (check_blob(**plugin, device, blob, bytes).empty()) {
        return fail("executable_check accepted " + what + " as a '" + key + "' blob; it must be refused");
      }
      ctx.note("executable_load of " + what + " under '" + key + "'");
      loom_executable_t* exe = nullptr;
      if (load_blob(**plugin, device, blob, bytes, &exe).empty()) {
        (*plugin)->api().executable_destroy(exe);
        return fail("executable_load accepted " + what + " as a '" + key + "' blob; it must be refused");
      }
    }
  }
  return pass();
}

// Deterministic mutations of each blob: truncations, bit flips, bytes set
// to 0xFF. Each is refused, or loads and runs without crashing; and
// executable_check agrees with executable_load.
Verdict mutations(CheckContext& ctx) {
  Target t = open_target(ctx, ctx.count(2, 4));
  if (!t.error.empty()) return fail(t.error);
  if (t.blobs.empty()) return skip(t.no_blob);
  const size_t per_blob = ctx.count(96, 1000);
  size_t refused = 0, ran = 0;
  for (const TestBlob& blob : t.blobs) {
    const size_t n = blob.bytes.size();
    uint64_t x = 0x2545F4914F6CDD1Dull ^ n;
    auto next = [&x] {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      return x;
    };
    for (size_t m = 0; m < per_blob; ++m) {
      std::vector<std::byte> bytes = blob.bytes;
      std::string what;
      if (n == 0) break;
      switch (m % 3) {
        case 0: {
          const size_t len = m < 24 ? (n * m) / 24 : next() % n;
          bytes.resize(len);
          what = "truncated to " + std::to_string(len) + " of " + std::to_string(n) + " bytes";
          break;
        }
        case 1: {
          const size_t bit = next() % (n * 8);
          bytes[bit / 8] ^= std::byte(1u << (bit % 8));
          what = "bit " + std::to_string(bit % 8) + " of byte " + std::to_string(bit / 8) + " flipped";
          break;
        }
        default: {
          const size_t at = next() % n;
          bytes[at] = std::byte{0xFF};
          what = "byte " + std::to_string(at) + " set to 0xFF";
          break;
        }
      }
      const std::string label = "mutation " + std::to_string(m) + " of " + blob.origin + " (" + what + ")";
      ctx.note("executable_check of " + label);
      const bool check_ok = check_blob(*t.plugin, t.device, blob, bytes).empty();
      ctx.note("executable_load of " + label);
      ExecutableGuard exe{&t.plugin->api(), nullptr};
      const std::string load_error = load_blob(*t.plugin, t.device, blob, bytes, &exe.executable);
      if (check_ok != load_error.empty()) {
        return fail("executable_check " + std::string(check_ok ? "accepted" : "refused") + " but executable_load " +
                    (check_ok ? "refused (" + load_error + ")" : std::string("accepted")) + " the " + label);
      }
      if (!load_error.empty()) {
        ++refused;
        continue;
      }
      ++ran;
      if (blob.inputs.empty() && blob.outputs.empty()) continue;
      ctx.note("execute of " + label);
      std::vector<std::vector<std::byte>> in, out;
      (void)execute_blob(*t.plugin, t.device, t.capabilities, exe.executable, blob, in, out);
    }
  }
  return pass(std::to_string(refused) + " refused, " + std::to_string(ran) + " loaded and ran");
}

Verdict execute_signals(CheckContext& ctx) {
  Target t = open_target(ctx, 1);
  if (!t.error.empty()) return fail(t.error);
  if (t.blobs.empty()) return skip(t.no_blob);
  const TestBlob& blob = t.blobs[0];
  if (blob.inputs.empty() && blob.outputs.empty()) return skip("the blob's tensors are not known");
  const loom_plugin_api_t& api = t.plugin->api();
  ExecutableGuard exe{&api, nullptr};
  if (std::string e = load_blob(*t.plugin, t.device, blob, blob.bytes, &exe.executable); !e.empty()) {
    return fail("executable_load refused its own blob: " + e);
  }
  const size_t runs = ctx.count(4, 32);
  // Real work: 5 s, stretched on a slow build (a fake that never signals
  // costs it once).
  const auto wait = scaled(std::chrono::milliseconds(5000));
  const uint64_t wait_ns = static_cast<uint64_t>(wait.count()) * 1'000'000ull;
  for (size_t i = 0; i < runs; ++i) {
    FenceGuard fence{&api, nullptr};
    if (std::string e = take(api, api.fence_create(t.device, &fence.fence)); !e.empty()) {
      return fail("fence_create failed: " + e);
    }
    ctx.note("execute " + std::to_string(i) + " with a signal fence, waiting " +
             std::to_string(wait.count()) + " ms for it");
    std::vector<std::vector<std::byte>> in, out;
    std::string e = execute_blob(*t.plugin, t.device, t.capabilities, exe.executable, blob, in, out,
                                 fence.fence, wait_ns);
    if (!e.empty()) {
      return fail("an execution with a signal fence (" + std::string((t.capabilities & LOOM_DEVICE_CAP_ASYNC) ? "asynchronous" : "synchronous") +
                  " device) did not complete: " + e);
    }
  }
  return pass(std::to_string(runs) + " executions signaled their fences");
}

bool t_has_compile(CheckContext& ctx) {
  auto plugin = ctx.load();
  return plugin.ok() && (*plugin)->api().compile != nullptr;
}

// The ONNX node tests the plugin takes nodes of, compared with the expected
// outputs at test-onnx's tolerances. A case that fails on the plugin counts
// against it unless the reference kernels fail it too.
Verdict onnx_node_tests(CheckContext& ctx) {
  std::vector<fs::path> roots = ctx.options().onnx_dirs;
  if (roots.empty()) roots.push_back(default_onnx_dir());
  std::error_code ec;
  for (const fs::path& r : roots) {
    if (!fs::is_directory(r, ec)) return skip("no ONNX test cases: " + r.string() + " does not exist (install libonnx-testdata or give --onnx-dir)");
  }
  auto cases = discover_cases(roots);
  if (!cases.ok()) return fail(cases.status().message());
  auto scratch = make_scratch_dir("conformance");
  if (!scratch.ok()) return fail(scratch.status().message());
  CaseRunOptions on_plugin;
  on_plugin.runtime.plugin_paths = {ctx.manifest().manifest_path.parent_path()};
  on_plugin.runtime.use_environment = false;
  on_plugin.runtime.use_default_folder = false;
  on_plugin.runtime.probe_plugins = false;
  on_plugin.runtime.plugin_options = ctx.options().plugin_options;
  on_plugin.runtime.log_sink = [](LogLevel, std::string_view) {};
  on_plugin.device = ctx.options().device;
  // How long a case's run may wait for an asynchronous device: the node
  // tests are tiny (milliseconds), so 30 s, stretched on a slow build, is
  // ample for real work on a loaded machine (a lavapipe first dispatch
  // compiles shaders), and a device that never signals costs it once.
  on_plugin.run_timeout = scaled(std::chrono::milliseconds(30'000));
  if (on_plugin.device.empty()) return fail("no device to run on");
  CaseRunOptions on_reference = on_plugin;
  on_reference.device.clear();
  // One runtime each for every case: a plugin is loaded once per check, not
  // once per case.
  auto plugin_runtime = Runtime::create(on_plugin.runtime);
  if (!plugin_runtime.ok()) return fail("runtime: " + plugin_runtime.status().message());
  auto reference_runtime = Runtime::create(on_reference.runtime);
  if (!reference_runtime.ok()) return fail("runtime: " + reference_runtime.status().message());
  const size_t wanted = ctx.count(40, SIZE_MAX);
  size_t counted = 0, passed = 0, tried = 0, reference_fails = 0;
  std::vector<std::string> failures;
  for (const TestCase& test : *cases) {
    if (counted >= wanted) break;
    auto summary = summarize_model(test.dir / "model.onnx");
    if (!summary.ok() || !summary->out_of_scope.empty()) continue;
    ++tried;
    ctx.note("ONNX case " + test.name);
    const fs::path dir = *scratch / test.name;
    fs::create_directories(dir, ec);
    CaseVerdict v = run_onnx_case(**plugin_runtime, test, *summary, on_plugin, dir);
    fs::remove_all(dir, ec);
    if (v.placement.plugin_nodes == 0) continue;  // the plugin took none of it
    if (v.outcome == Outcome::kUnsupported) continue;
    ++counted;
    if (v.outcome == Outcome::kPass) {
      ++passed;
      continue;
    }
    ctx.note("ONNX case " + test.name + " on the reference kernels");
    fs::create_directories(dir, ec);
    CaseVerdict ref = run_onnx_case(**reference_runtime, test, *summary, on_reference, dir);
    fs::remove_all(dir, ec);
    if (ref.outcome != Outcome::kPass) {
      ++reference_fails;
      continue;
    }
    failures.push_back(test.name + ": " + std::string(conformance::outcome_name(v.outcome)) + ": " + v.message);
  }
  fs::remove_all(*scratch, ec);
  if (!failures.empty()) {
    std::string text = std::to_string(failures.size()) + " of " + std::to_string(counted) +
                       " ONNX node tests the plugin took fail where the reference kernels pass; first: " + failures[0];
    if (text.size() > 600) text = text.substr(0, 600) + "...";
    return fail(text);
  }
  if (counted == 0) {
    if (t_has_compile(ctx)) {
      return fail("the plugin has compile entries but took no node of the " + std::to_string(tried) +
                  " ONNX node tests tried: it claims nothing, or its claims never reach the device");
    }
    return skip("the plugin does not compile (no compile entries), so no ONNX test runs on it");
  }
  return pass(std::to_string(passed) + " of " + std::to_string(counted) + " cases taken passed" +
              (reference_fails ? " (" + std::to_string(reference_fails) + " failing on reference kernels too not counted)" : ""));
}

const CheckDef kExecutableChecks[] = {
    {"executables.own_blobs",
     "blobs the plugin compiled pass executable_check, load and run", own_blobs},
    {"executables.reject_garbage",
     "empty, short, zero and random blobs are refused by executable_check and executable_load",
     reject_garbage},
    {"executables.mutations",
     "truncated and bit-flipped blobs are refused or run without crashing, and "
     "executable_check agrees with executable_load",
     mutations},
    {"fences.execute_signals", "executions given a signal fence signal it within 5 s",
     execute_signals},
    {"execution.onnx_node_tests",
     "ONNX node tests the plugin takes match the expected outputs, and its nodes run on it",
     onnx_node_tests},
    {"execution.open_shapes",
     "a plugin serving open shapes (ABI 1.2) compiles ONNX node tests once with their dimensions "
     "open and runs them at bindings it never saw, matching the reference kernels",
     open_shape_bindings},
};

}  // namespace

std::span<const CheckDef> executable_checks() { return kExecutableChecks; }

}  // namespace loom::conformance::detail
