// threads.* and lifecycle.*: the entries the header calls thread-safe,
// called from 4 threads at once, and many create/destroy cycles without
// growth in memory.
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "check_context.hpp"

namespace loom::conformance::detail {

namespace {

constexpr int kThreads = 4;

// Rounds the threads have finished, and threads that have ended, so that
// the check's own thread can report progress while it waits: the suite's
// time limit is per step (a note), and a threaded phase of hundreds of
// rounds must not count as one step on a slow machine.
struct Progress {
  std::atomic<size_t> rounds{0};
  std::atomic<int> ended{0};
};

// Counts its thread in `p.ended` when the thread's body ends, however it
// returns.
struct CountEnd {
  Progress& p;
  ~CountEnd() { ++p.ended; }
};

// Waits for `threads` (each of which ends by counting itself in
// `progress.ended`), noting the rounds done about once a second, then joins
// them.
void join_noting(CheckContext& ctx, std::vector<std::thread>& threads, Progress& progress,
                 size_t total, const std::string& what) {
  size_t noted = 0;
  while (progress.ended.load() < static_cast<int>(threads.size())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const size_t now = progress.rounds.load();
    if (now >= noted + 1 && (now - noted) * 20 >= total) {  // each 5 %
      ctx.note(what + ": " + std::to_string(now) + " of " + std::to_string(total) + " rounds");
      noted = now;
    }
  }
  for (auto& th : threads) th.join();
}

// The first error any thread saw.
struct FirstError {
  std::mutex mutex;
  std::string text;
  void set(std::string e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (text.empty()) text = std::move(e);
  }
  bool any() {
    std::lock_guard<std::mutex> lock(mutex);
    return !text.empty();
  }
};

Verdict concurrent_calls(CheckContext& ctx) {
  std::string no_blob;
  const std::vector<TestBlob> blobs = ctx.blobs(1, &no_blob);
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const loom_plugin_api_t& api = t.plugin->api();
  const size_t rounds = ctx.count(200, 2000);
  FirstError error;
  const std::string calls = "device_info, buffers, copies, fences, executable_check and executable_load from 4 threads";
  ctx.note(calls);
  Progress progress;
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      CountEnd ended{progress};
      std::vector<unsigned char> data(1000 + id), back(1000 + id);
      for (size_t r = 0; r < rounds && !error.any(); ++r, ++progress.rounds) {
        loom_device_info_t info{};
        info.struct_size = sizeof info;
        if (std::string e = take(api, api.device_info(t.device, &info)); !e.empty()) return error.set("device_info: " + e);
        loom_buffer_allocate_args_t a{};
        a.struct_size = sizeof a;
        a.device = t.device;
        a.size = data.size();
        if (std::string e = take(api, api.buffer_allocate(&a)); !e.empty()) return error.set("buffer_allocate: " + e);
        BufferGuard b{&api, a.out_buffer};
        for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 31 + r + id * 7);
        loom_buffer_copy_args_t c{sizeof(loom_buffer_copy_args_t), a.out_buffer, 0, data.data(), data.size()};
        if (std::string e = take(api, api.buffer_copy_from_host(&c)); !e.empty()) return error.set("buffer_copy_from_host: " + e);
        c.host_pointer = back.data();
        if (std::string e = take(api, api.buffer_copy_to_host(&c)); !e.empty()) return error.set("buffer_copy_to_host: " + e);
        if (back != data) return error.set("a buffer read back another thread's data or garbage");
        FenceGuard f{&api, nullptr};
        if (std::string e = take(api, api.fence_create(t.device, &f.fence)); !e.empty()) return error.set("fence_create: " + e);
        if (std::string e = take(api, api.fence_signal(f.fence)); !e.empty()) return error.set("fence_signal: " + e);
        if (std::string e = take(api, api.fence_wait(f.fence, 1'000'000'000ull)); !e.empty()) return error.set("fence_wait: " + e);
        if (blobs.empty() || r % 4 != 0) continue;
        const TestBlob& blob = blobs[0];
        if (std::string e = check_blob(*t.plugin, t.device, blob, blob.bytes); !e.empty()) {
          return error.set("executable_check of its own blob: " + e);
        }
        ExecutableGuard exe{&api, nullptr};
        if (std::string e = load_blob(*t.plugin, t.device, blob, blob.bytes, &exe.executable); !e.empty()) {
          return error.set("executable_load of its own blob: " + e);
        }
      }
    });
  }
  join_noting(ctx, threads, progress, rounds * kThreads, calls);
  if (!error.text.empty()) return fail("called from 4 threads at once: " + error.text);
  return pass(std::to_string(rounds * kThreads) + " rounds" +
              (blobs.empty() ? " (no blob for executable_check/load: " + no_blob + ")" : ""));
}

bool is_float(loom_dtype_t d) { return d == LOOM_DTYPE_F32; }

// One executable run from 4 threads at once, each with its own inputs; each
// result must equal what the same inputs gave when run alone.
Verdict concurrent_execute(CheckContext& ctx) {
  std::string why;
  std::vector<TestBlob> blobs = ctx.blobs(1, &why);
  if (blobs.empty()) return skip(why);
  const TestBlob& blob = blobs[0];
  if (blob.inputs.empty() || blob.outputs.empty()) return skip("the blob's tensors are not known");
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const loom_plugin_api_t& api = t.plugin->api();
  ExecutableGuard exe{&api, nullptr};
  if (std::string e = load_blob(*t.plugin, t.device, blob, blob.bytes, &exe.executable); !e.empty()) {
    return fail("executable_load refused its own blob: " + e);
  }
  const size_t rounds = ctx.count(50, 500);
  // Per thread, per round: inputs from a seed; expected outputs computed
  // first, one execution at a time.
  auto make_inputs = [&](int id, size_t round) {
    std::vector<std::vector<std::byte>> in(blob.inputs.size());
    uint32_t x = 2463534242u ^ static_cast<uint32_t>(id * 7919 + round * 104729 + 1);
    for (size_t i = 0; i < blob.inputs.size(); ++i) {
      in[i].resize(blob.inputs[i].byte_size);
      if (!is_float(blob.inputs[i].dtype)) continue;  // zeros: indices and the like stay valid
      for (size_t k = 0; k + 4 <= in[i].size(); k += 4) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        float v = static_cast<float>(x % 2001) / 1000.0f - 1.0f;
        std::memcpy(in[i].data() + k, &v, 4);
      }
    }
    return in;
  };
  const size_t distinct = 8;  // input sets per thread, reused across rounds
  std::vector<std::vector<std::vector<std::byte>>> expected(kThreads * distinct);
  for (int id = 0; id < kThreads; ++id) {
    for (size_t r = 0; r < distinct; ++r) {
      auto in = make_inputs(id, r);
      std::vector<std::vector<std::byte>> out;
      ctx.note("execute alone for the expected results");
      if (std::string e = execute_blob(*t.plugin, t.device, t.capabilities, exe.executable, blob, in, out); !e.empty()) {
        return fail("execute of its own blob failed: " + e);
      }
      expected[id * distinct + r] = std::move(out);
    }
  }
  FirstError error;
  const std::string at_once = "execute from 4 threads at once on one executable";
  ctx.note(at_once);
  Progress progress;
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) {
    threads.emplace_back([&, id] {
      CountEnd ended{progress};
      for (size_t r = 0; r < rounds && !error.any(); ++r, ++progress.rounds) {
        auto in = make_inputs(id, r % distinct);
        std::vector<std::vector<std::byte>> out;
        if (std::string e = execute_blob(*t.plugin, t.device, t.capabilities, exe.executable, blob, in, out); !e.empty()) {
          return error.set("execute: " + e);
        }
        const auto& want = expected[id * distinct + r % distinct];
        for (size_t o = 0; o < out.size(); ++o) {
          if (out[o].size() != want[o].size()) return error.set("an output changed size");
          if (!is_float(blob.outputs[o].dtype)) {
            if (out[o] != want[o]) return error.set("output " + std::to_string(o) + " differs from the same execution run alone");
            continue;
          }
          for (size_t k = 0; k + 4 <= out[o].size(); k += 4) {
            float a, b;
            std::memcpy(&a, out[o].data() + k, 4);
            std::memcpy(&b, want[o].data() + k, 4);
            if (!(std::fabs(a - b) <= 1e-5f + 1e-4f * std::fabs(b)) && !(std::isnan(a) && std::isnan(b))) {
              return error.set("output " + std::to_string(o) + " element " + std::to_string(k / 4) + " is " +
                               std::to_string(a) + " under concurrency, " + std::to_string(b) + " when run alone");
            }
          }
        }
      }
    });
  }
  join_noting(ctx, threads, progress, rounds * kThreads, at_once);
  if (!error.text.empty()) return fail("one executable run from 4 threads at once (" + blob.origin + "): " + error.text);
  return pass(std::to_string(rounds * kThreads) + " executions");
}

}  // namespace
}  // namespace loom::conformance::detail

// Under AddressSanitizer malloc is ASan's, which glibc's mallinfo2 does not
// see; its own count is used then (weak: absent in a plain build).
extern "C" size_t __sanitizer_get_current_allocated_bytes() __attribute__((weak));

namespace loom::conformance::detail {
namespace {

// Bytes malloc has handed out and not got back (heap and mmap'd chunks).
size_t heap_in_use() {
  if (&__sanitizer_get_current_allocated_bytes != nullptr) return __sanitizer_get_current_allocated_bytes();
  struct mallinfo2 m = ::mallinfo2();
  return m.uordblks + m.hblkhd;
}

constexpr size_t kGrowthLimit = 2u << 20;

std::string growth_text(size_t before, size_t after, size_t cycles) {
  const size_t grew = after > before ? after - before : 0;
  return "memory in use grew by " + std::to_string(grew / 1024) + " KiB over " + std::to_string(cycles) +
         " cycles (" + std::to_string(grew / std::max<size_t>(cycles, 1)) + " bytes a cycle)";
}

Verdict plugin_cycles(CheckContext& ctx) {
  const size_t cycles = ctx.count(100, 1000), warmup = 10;
  size_t before = 0;
  for (size_t i = 0; i < cycles + warmup; ++i) {
    if (i == warmup) before = heap_in_use();
    ctx.note("plugin load/create/destroy cycle " + std::to_string(i));
    auto plugin = ctx.load();
    if (!plugin.ok()) return fail("cycle " + std::to_string(i) + ": " + plugin.status().message());
  }
  const size_t after = heap_in_use();
  if (after > before + kGrowthLimit) {
    return fail("plugin instances created and destroyed: " + growth_text(before, after, cycles));
  }
  return pass(growth_text(before, after, cycles));
}

Verdict object_cycles(CheckContext& ctx) {
  std::string why;
  std::vector<TestBlob> blobs = ctx.blobs(1, &why);
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const loom_plugin_api_t& api = t.plugin->api();
  const size_t cycles = ctx.count(300, 3000), warmup = 20;
  size_t before = 0;
  for (size_t i = 0; i < cycles + warmup; ++i) {
    if (i == warmup) before = heap_in_use();
    ctx.note("object cycle " + std::to_string(i));
    if (!blobs.empty()) {
      ExecutableGuard exe{&api, nullptr};
      if (std::string e = load_blob(*t.plugin, t.device, blobs[0], blobs[0].bytes, &exe.executable); !e.empty()) {
        return fail("executable_load of its own blob failed: " + e);
      }
      if (!blobs[0].inputs.empty()) {
        std::vector<std::vector<std::byte>> in, out;
        if (std::string e = execute_blob(*t.plugin, t.device, t.capabilities, exe.executable, blobs[0], in, out); !e.empty()) {
          return fail("execute failed: " + e);
        }
      }
    }
    loom_buffer_allocate_args_t a{};
    a.struct_size = sizeof a;
    a.device = t.device;
    a.size = 4096;
    if (std::string e = take(api, api.buffer_allocate(&a)); !e.empty()) return fail("buffer_allocate failed: " + e);
    api.buffer_free(a.out_buffer);
    FenceGuard f{&api, nullptr};
    if (std::string e = take(api, api.fence_create(t.device, &f.fence)); !e.empty()) return fail("fence_create failed: " + e);
  }
  const size_t after = heap_in_use();
  const std::string what = blobs.empty() ? "buffers and fences" : "executables, executions, buffers and fences";
  if (after > before + kGrowthLimit) return fail(what + " made and destroyed: " + growth_text(before, after, cycles));
  return pass(growth_text(before, after, cycles));
}

const CheckDef kStressChecks[] = {
    {"threads.concurrent_calls",
     "device_info, buffers, copies, fences, executable_check and executable_load called from 4 "
     "threads at once give correct results",
     concurrent_calls},
    {"threads.concurrent_execute",
     "one executable run from 4 threads at once gives each thread the results it gives alone",
     concurrent_execute},
    {"lifecycle.plugin_cycles", "loading, creating and destroying the plugin many times leaks no memory",
     plugin_cycles},
    {"lifecycle.object_cycles",
     "executables, executions, buffers and fences made and destroyed many times leak no memory",
     object_cycles},
};

}  // namespace

std::span<const CheckDef> stress_checks() { return kStressChecks; }

}  // namespace loom::conformance::detail
