// loom-soak: the soak test behind scripts/soak.sh (not part of CI).
//
// Phase "cycles": N times, a Runtime is created (discovering its plugins), a
// program is loaded (which loads the plugin), a session runs it once, and all
// of it is destroyed again. Phase "runs": one Runtime, program and session,
// and M runs. Every result is checked. Resident memory (/proc/self/statm),
// open file descriptors and threads are sampled through both phases and
// printed; after a warm-up (the first tenth of each phase) memory may grow
// by at most --max-growth-kb and descriptors and threads by at most 4, else
// the exit code is 1. With --max-growth-kb 0 memory growth is only reported
// (under ASan its quarantine grows on purpose; LeakSanitizer checks at exit
// instead).
//
// Targets: "cpu-simd" (the demo MLP on cpu-simd://0) and "fake" (a + b on the
// fake plugin of tests/support; --fake-async makes it complete on a worker
// thread through fences). Only the public API is used.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "program_builder/demo_program.hpp"
#include "program_builder/program_builder.hpp"
#include "loom/runtime.hpp"

namespace {

using loom::DType;
using loom::Status;
using loom::Tensor;

struct Options {
  std::string target = "fake";
  uint64_t cycles = 10'000;
  uint64_t runs = 1'000'000;
  uint64_t samples = 20;
  uint64_t max_growth_kb = 2048;
  bool fake_async = false;
  std::vector<std::filesystem::path> plugin_paths;
};

int usage(const char* why) {
  std::fprintf(stderr,
               "loom-soak: %s\n"
               "usage: loom-soak [--target cpu-simd|fake] [--cycles N] [--runs M]\n"
               "                 [--samples K] [--max-growth-kb KB] [--fake-async]\n"
               "                 [--plugin-path DIR]...\n",
               why);
  return 2;
}

bool parse_count(const char* text, uint64_t* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = v;
  return true;
}

uint64_t resident_kb() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
}

// Open file descriptors of this process (a child process or channel left
// behind shows here before it shows in memory).
uint64_t open_fds() {
  std::error_code ec;
  uint64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return n;
}

// Threads of this process, from /proc/self/status.
uint64_t thread_count() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long n = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::sscanf(line, "Threads: %llu", &n) == 1) break;
  }
  std::fclose(f);
  return n;
}

// What one target runs: its program, inputs, and the check of a result.
struct Workload {
  std::vector<std::byte> program;
  std::string device;
  std::vector<std::pair<std::string, Tensor>> inputs;
  Tensor expected;  // empty until the first run sets it (cpu-simd)
};

Tensor filled(float start) {
  Tensor t = Tensor::zeros(DType::kF32, {2, 3}).value();
  for (int i = 0; i < 6; ++i) t.data_as<float>()[i] = start + static_cast<float>(i);
  return t;
}

loom::RuntimeOptions runtime_options(const Options& options) {
  loom::RuntimeOptions o;
  o.plugin_paths = options.plugin_paths;
  o.use_environment = false;
  o.use_default_folder = options.plugin_paths.empty();
  o.use_user_folder = false;
  o.log_sink = [](loom::LogLevel level, std::string_view line) {
    if (level >= loom::LogLevel::kWarning) {
      std::fprintf(stderr, "loom-soak: plugin: %.*s\n", static_cast<int>(line.size()), line.data());
    }
  };
  if (options.target == "fake" && options.fake_async) {
    o.plugin_options = {{"fake.async", "1"}, {"fake.separate_memory", "1"}};
  }
  return o;
}

loom::Result<Workload> make_workload(const Options& options) {
  Workload w;
  if (options.target == "cpu-simd") {
    const loom::tools::MlpShape shape{4, 64, 128, 10};
    // Compiled by cpu-simd on a runtime of its own, gone before the soak.
    LOOM_ASSIGN_OR_RETURN(auto compiler, loom::Runtime::create(runtime_options(options)));
    LOOM_ASSIGN_OR_RETURN(auto writer, loom::tools::build_mlp_program(*compiler, shape));
    LOOM_ASSIGN_OR_RETURN(w.program, writer.write_buffer());
    w.device = "cpu-simd://0";
    w.inputs.emplace_back("x", loom::tools::mlp_input(shape));
    return w;
  }
  // main(a, b) = delegate "sum"(a, b) with the fake plugins' blob "fake:add".
  loom::tools::ProgramBuilder b("loom-soak");
  static constexpr char kAdd[] = "fake:add";
  const uint32_t art = b.add_artifact(
      "fake", 1, "sum.fake", {reinterpret_cast<const std::byte*>(kAdd), sizeof kAdd - 1});
  const uint32_t d = b.add_delegate("sum", {art});
  loom::tools::FunctionBuilder f = b.add_function("main");
  const uint32_t a = f.input("a", DType::kF32, {2, 3});
  const uint32_t x = f.input("b", DType::kF32, {2, 3});
  const uint32_t y = f.value("y", DType::kF32, {2, 3});
  f.delegate_call(d, {a, x}, {y});
  f.output(y);
  LOOM_ASSIGN_OR_RETURN(auto writer, b.finish());
  LOOM_ASSIGN_OR_RETURN(w.program, writer.write_buffer());
  w.device = "fake://0";
  w.inputs.emplace_back("a", filled(1));
  w.inputs.emplace_back("b", filled(10));
  w.expected = Tensor::zeros(DType::kF32, {2, 3}).value();
  for (int i = 0; i < 6; ++i) {
    w.expected.data_as<float>()[i] =
        w.inputs[0].second.data_as<float>()[i] + w.inputs[1].second.data_as<float>()[i];
  }
  return w;
}


// Runs the session once and checks the result against w.expected (set from
// the first result when empty).
Status run_and_check(loom::Session& session, Workload& w) {
  for (const auto& [name, tensor] : w.inputs) LOOM_RETURN_IF_ERROR(session.set_input(name, tensor));
  LOOM_RETURN_IF_ERROR(session.run());
  const Tensor& y = session.output(0);
  if (w.expected.byte_size() == 0) {
    w.expected = Tensor::zeros(y.dtype(), y.shape()).value();
    std::memcpy(w.expected.data(), y.data(), y.byte_size());
    return Status();
  }
  if (y.byte_size() != w.expected.byte_size() ||
      std::memcmp(y.data(), w.expected.data(), y.byte_size()) != 0) {
    return loom::internal_error("the result differs from the first run's");
  }
  return Status();
}

// Samples resident memory at `samples` points of a phase of `total` steps,
// and at the end of the warm-up (the first tenth), the baseline of growth.
class Sampler {
 public:
  Sampler(const char* phase, uint64_t total, uint64_t samples)
      : phase_(phase),
        total_(total),
        every_(std::max<uint64_t>(1, total / std::max<uint64_t>(1, samples))),
        warm_(std::max<uint64_t>(1, total / 10)),
        start_(std::chrono::steady_clock::now()) {
    std::printf("%-6s %10s %10s %6s %8s %9s\n", phase, "step", "rss_kb", "fds", "threads",
                "seconds");
    print(0, resident_kb(), open_fds(), thread_count());
  }

  void step(uint64_t done) {
    if (done % every_ != 0 && done != total_ && done != warm_) return;
    const uint64_t kb = resident_kb(), fds = open_fds(), threads = thread_count();
    print(done, kb, fds, threads);
    if (done == warm_) {
      warm_kb_ = kb;
      warm_fds_ = fds;
      warm_threads_ = threads;
    }
    if (done > warm_) {
      max_after_warm_ = std::max(max_after_warm_, kb);
      extra_fds_ = std::max(extra_fds_, fds > warm_fds_ ? fds - warm_fds_ : 0);
      extra_threads_ =
          std::max(extra_threads_, threads > warm_threads_ ? threads - warm_threads_ : 0);
    }
  }

  // File descriptors and threads more than after the warm-up, at most.
  uint64_t extra_fds() const { return extra_fds_; }
  uint64_t extra_threads() const { return extra_threads_; }

  // Growth after the warm-up, in KiB (0 if it shrank).
  uint64_t growth_kb() const {
    return max_after_warm_ > warm_kb_ ? max_after_warm_ - warm_kb_ : 0;
  }
  uint64_t warm_kb() const { return warm_kb_; }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  void print(uint64_t done, uint64_t kb, uint64_t fds, uint64_t threads) {
    std::printf("%-6s %10llu %10llu %6llu %8llu %9.1f\n", phase_,
                static_cast<unsigned long long>(done), static_cast<unsigned long long>(kb),
                static_cast<unsigned long long>(fds), static_cast<unsigned long long>(threads),
                seconds());
    std::fflush(stdout);
  }

  const char* phase_;
  uint64_t total_;
  uint64_t every_;
  uint64_t warm_;
  std::chrono::steady_clock::time_point start_;
  uint64_t warm_kb_ = 0;
  uint64_t max_after_warm_ = 0;
  uint64_t warm_fds_ = 0;
  uint64_t warm_threads_ = 0;
  uint64_t extra_fds_ = 0;
  uint64_t extra_threads_ = 0;
};

Status one_cycle(const Options& options, Workload& w) {
  LOOM_ASSIGN_OR_RETURN(auto runtime, loom::Runtime::create(runtime_options(options)));
  loom::LoadOptions load;
  load.device = w.device;
  LOOM_ASSIGN_OR_RETURN(auto program, runtime->load_program(w.program, load));
  LOOM_ASSIGN_OR_RETURN(auto session, program->create_session("main"));
  return run_and_check(*session, w);
}

// Prints the verdict of one phase; false when it grew too much.
bool verdict(const char* phase, const Sampler& s, const Options& options) {
  std::printf("%s: %.1f s, rss after warm-up %llu kB, growth since %llu kB (limit %s), "
              "%llu more fds, %llu more threads\n",
              phase, s.seconds(), static_cast<unsigned long long>(s.warm_kb()),
              static_cast<unsigned long long>(s.growth_kb()),
              options.max_growth_kb == 0
                  ? "none"
                  : (std::to_string(options.max_growth_kb) + " kB").c_str(),
              static_cast<unsigned long long>(s.extra_fds()),
              static_cast<unsigned long long>(s.extra_threads()));
  std::fflush(stdout);
  if (options.max_growth_kb != 0 && s.growth_kb() > options.max_growth_kb) {
    std::fprintf(stderr, "loom-soak: %s: resident memory grew by %llu kB after the warm-up\n",
                 phase, static_cast<unsigned long long>(s.growth_kb()));
    return false;
  }
  // A few may come and go (a plugin's worker between runs); a steady rise
  // past this is a leak.
  constexpr uint64_t kSlack = 4;
  if (s.extra_fds() > kSlack || s.extra_threads() > kSlack) {
    std::fprintf(stderr,
                 "loom-soak: %s: %llu more file descriptors and %llu more threads than after "
                 "the warm-up\n",
                 phase, static_cast<unsigned long long>(s.extra_fds()),
                 static_cast<unsigned long long>(s.extra_threads()));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    auto count = [&](uint64_t* out) {
      if (value == nullptr || !parse_count(value, out)) return false;
      ++i;
      return true;
    };
    if (arg == "--target" && value != nullptr) {
      options.target = value;
      ++i;
    } else if (arg == "--plugin-path" && value != nullptr) {
      options.plugin_paths.emplace_back(value);
      ++i;
    } else if (arg == "--fake-async") {
      options.fake_async = true;
    } else if (arg == "--cycles") {
      if (!count(&options.cycles)) return usage("--cycles needs a count");
    } else if (arg == "--runs") {
      if (!count(&options.runs)) return usage("--runs needs a count");
    } else if (arg == "--samples") {
      if (!count(&options.samples)) return usage("--samples needs a count");
    } else if (arg == "--max-growth-kb") {
      if (!count(&options.max_growth_kb)) return usage("--max-growth-kb needs a count");
    } else {
      return usage(("unknown argument '" + arg + "'").c_str());
    }
  }
  if (options.target != "cpu-simd" && options.target != "fake") {
    return usage("--target is cpu-simd or fake");
  }
  auto workload = make_workload(options);
  if (!workload.ok()) {
    std::fprintf(stderr, "loom-soak: %s\n", workload.status().to_string().c_str());
    return 1;
  }
  std::printf("loom-soak: target %s%s, %llu cycles, %llu runs\n", options.target.c_str(),
              options.fake_async ? " (async)" : "", static_cast<unsigned long long>(options.cycles),
              static_cast<unsigned long long>(options.runs));
  bool ok = true;

  if (options.cycles > 0) {
    Sampler s("cycles", options.cycles, options.samples);
    for (uint64_t i = 1; i <= options.cycles; ++i) {
      Status st = one_cycle(options, *workload);
      if (!st.ok()) {
        std::fprintf(stderr, "loom-soak: cycle %llu: %s\n", static_cast<unsigned long long>(i),
                     st.to_string().c_str());
        return 1;
      }
      s.step(i);
    }
    ok &= verdict("cycles", s, options);
  }

  if (options.runs > 0) {
    auto runtime = loom::Runtime::create(runtime_options(options));
    if (!runtime.ok()) {
      std::fprintf(stderr, "loom-soak: %s\n", runtime.status().to_string().c_str());
      return 1;
    }
    loom::LoadOptions load;
    load.device = workload->device;
    auto program = (*runtime)->load_program(workload->program, load);
    if (!program.ok()) {
      std::fprintf(stderr, "loom-soak: %s\n", program.status().to_string().c_str());
      return 1;
    }
    auto session = (*program)->create_session("main");
    if (!session.ok()) {
      std::fprintf(stderr, "loom-soak: %s\n", session.status().to_string().c_str());
      return 1;
    }
    Sampler s("runs", options.runs, options.samples);
    for (uint64_t i = 1; i <= options.runs; ++i) {
      Status st = run_and_check(**session, *workload);
      if (!st.ok()) {
        std::fprintf(stderr, "loom-soak: run %llu: %s\n", static_cast<unsigned long long>(i),
                     st.to_string().c_str());
        return 1;
      }
      s.step(i);
    }
    ok &= verdict("runs", s, options);
  }
  std::fflush(stdout);
  std::printf("loom-soak: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
