// devices.*, memory.* and fences.*: what a device says of itself, buffers,
// copies, mapping, host import and fences signaled by the host.
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "check_context.hpp"
#include "loom/conformance/time_scale.hpp"

namespace loom::conformance::detail {

namespace {

std::string allocate(const DeviceUnderTest& t, uint64_t size, uint64_t alignment, uint32_t flags,
                     loom_buffer_t** out) {
  loom_buffer_allocate_args_t a{};
  a.struct_size = sizeof a;
  a.device = t.device;
  a.size = size;
  a.alignment = alignment;
  a.flags = flags;
  std::string e = take(*t.api, t.api->buffer_allocate(&a));
  *out = e.empty() ? a.out_buffer : nullptr;
  if (e.empty() && a.out_buffer == nullptr) return "buffer_allocate returned OK without a buffer";
  return e;
}

std::string copy(const DeviceUnderTest& t, bool to_device, loom_buffer_t* b, uint64_t offset, void* host,
                 uint64_t size) {
  loom_buffer_copy_args_t c{};
  c.struct_size = sizeof c;
  c.buffer = b;
  c.buffer_offset = offset;
  c.host_pointer = host;
  c.size = size;
  return take(*t.api, to_device ? t.api->buffer_copy_from_host(&c) : t.api->buffer_copy_to_host(&c));
}

Verdict list(CheckContext& ctx) {
  auto plugin = ctx.load();
  if (!plugin.ok()) return fail(plugin.status().message());
  const loom_plugin_api_t& api = (*plugin)->api();
  size_t count = 0;
  if (std::string e = take(api, api.device_count((*plugin)->instance(), &count)); !e.empty()) {
    return fail("device_count failed: " + e);
  }
  if (count == 0) return fail("the plugin lists no device (a plugin without devices should refuse plugin_create or report UNAVAILABLE)");
  std::set<std::string> uris;
  std::set<loom_device_t*> handles;
  const std::string prefix = ctx.manifest().name + "://";
  for (size_t i = 0; i < count; ++i) {
    loom_device_t* d = nullptr;
    if (std::string e = take(api, api.device_get((*plugin)->instance(), i, &d)); !e.empty()) {
      return fail("device_get(" + std::to_string(i) + ") failed: " + e);
    }
    if (d == nullptr) return fail("device_get(" + std::to_string(i) + ") returned OK and NULL");
    if (!handles.insert(d).second) return fail("device_get returned the same handle for two indices");
    loom_device_info_t info{};
    info.struct_size = sizeof info;
    if (std::string e = take(api, api.device_info(d, &info)); !e.empty()) {
      return fail("device_info(" + std::to_string(i) + ") failed: " + e);
    }
    if (info.struct_size != sizeof info) return fail("device_info changed struct_size");
    if (info.uri == nullptr) return fail("device " + std::to_string(i) + " has no URI");
    const std::string uri = info.uri;
    if (uri.rfind(prefix, 0) != 0 || uri.size() == prefix.size()) {
      return fail("device URI '" + uri + "' does not start with '" + prefix + "' followed by a device name");
    }
    if (!uris.insert(uri).second) return fail("two devices share the URI '" + uri + "'");
    if (info.name == nullptr || info.name[0] == '\0') return fail("device '" + uri + "' has no name");
    if (info.kind > LOOM_DEVICE_KIND_VIRTUAL) return fail("device '" + uri + "' has an unknown kind");
    if (info.dtype_mask == 0) return fail("device '" + uri + "' supports no dtype (dtype_mask is 0)");
  }
  return pass(std::to_string(count) + " device(s)");
}

Verdict allocate_free(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const uint64_t sizes[] = {1, 3, 4096, 4099, 1 << 20};
  const uint64_t alignments[] = {0, 16, 64, 256};
  for (uint64_t size : sizes) {
    for (uint64_t alignment : alignments) {
      ctx.note("buffer_allocate(" + std::to_string(size) + ", alignment " + std::to_string(alignment) + ")");
      loom_buffer_t* b = nullptr;
      if (std::string e = allocate(t, size, alignment, 0, &b); !e.empty()) {
        return fail("buffer_allocate of " + std::to_string(size) + " bytes, alignment " +
                    std::to_string(alignment) + " failed: " + e);
      }
      t.api->buffer_free(b);
    }
  }
  // Larger alignments may be refused, but with an error, not a crash.
  ctx.note("buffer_allocate(4096, alignment 65536)");
  loom_buffer_t* big = nullptr;
  std::string note = allocate(t, 4096, 65536, 0, &big);
  if (big != nullptr) t.api->buffer_free(big);
  return pass(note.empty() ? "alignment up to 65536 taken" : "alignment 65536 refused: " + note);
}

// Patterns written at odd offsets and sizes read back the same, and what
// was not written is untouched.
Verdict copy_roundtrip(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  constexpr uint64_t kSize = 4099;
  loom_buffer_t* raw = nullptr;
  if (std::string e = allocate(t, kSize, 0, 0, &raw); !e.empty()) return fail("buffer_allocate failed: " + e);
  BufferGuard b{t.api, raw};
  std::vector<unsigned char> shadow(kSize, 0);
  std::vector<unsigned char> zeros(kSize, 0);
  if (std::string e = copy(t, true, raw, 0, zeros.data(), kSize); !e.empty()) return fail("copy_from_host failed: " + e);
  struct Piece {
    uint64_t offset, size;
  };
  const Piece pieces[] = {{1, 3}, {17, 4000}, {4098, 1}, {0, 5}, {1000, 999}, {0, kSize}};
  unsigned seed = 1;
  for (const Piece& p : pieces) {
    std::vector<unsigned char> data(p.size);
    for (auto& c : data) c = static_cast<unsigned char>((seed = seed * 1103515245u + 12345u) >> 16);
    ctx.note("copy_from_host(offset " + std::to_string(p.offset) + ", " + std::to_string(p.size) + " bytes)");
    if (std::string e = copy(t, true, raw, p.offset, data.data(), p.size); !e.empty()) {
      return fail("copy_from_host(offset " + std::to_string(p.offset) + ", size " + std::to_string(p.size) + ") failed: " + e);
    }
    std::memcpy(shadow.data() + p.offset, data.data(), p.size);
    std::vector<unsigned char> back(kSize, 0xEE);
    ctx.note("copy_to_host of the whole buffer");
    if (std::string e = copy(t, false, raw, 0, back.data(), kSize); !e.empty()) return fail("copy_to_host failed: " + e);
    for (uint64_t i = 0; i < kSize; ++i) {
      if (back[i] != shadow[i]) {
        return fail("after copy_from_host(offset " + std::to_string(p.offset) + ", size " +
                    std::to_string(p.size) + "), byte " + std::to_string(i) + " reads " +
                    std::to_string(back[i]) + ", expected " + std::to_string(shadow[i]));
      }
    }
    std::vector<unsigned char> part(p.size + 2, 0xEE);
    if (std::string e = copy(t, false, raw, p.offset, part.data() + 1, p.size); !e.empty()) {
      return fail("copy_to_host(offset " + std::to_string(p.offset) + ") failed: " + e);
    }
    if (part[0] != 0xEE || part[p.size + 1] != 0xEE) return fail("copy_to_host wrote outside the host range");
    if (std::memcmp(part.data() + 1, shadow.data() + p.offset, p.size) != 0) {
      return fail("copy_to_host(offset " + std::to_string(p.offset) + ", size " + std::to_string(p.size) + ") read wrong bytes");
    }
  }
  return pass();
}

Verdict copy_out_of_range(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  loom_buffer_t* raw = nullptr;
  if (std::string e = allocate(t, 100, 0, 0, &raw); !e.empty()) return fail("buffer_allocate failed: " + e);
  BufferGuard b{t.api, raw};
  std::vector<unsigned char> host(256, 1);
  struct Case {
    const char* what;
    uint64_t offset, size;
    void* pointer;
  };
  const Case cases[] = {
      {"offset 90, size 20 on a 100-byte buffer", 90, 20, host.data()},
      {"offset 101, size 0", 101, 0, host.data()},
      {"offset 2^64-8, size 16 (the sum wraps)", UINT64_MAX - 7, 16, host.data()},
      {"size 2^64-1", 0, UINT64_MAX, host.data()},
      {"a NULL host pointer", 0, 10, nullptr},
  };
  for (bool to_device : {true, false}) {
    for (const Case& c : cases) {
      const std::string what = std::string(to_device ? "copy_from_host" : "copy_to_host") + " with " + c.what;
      ctx.note(what);
      if (copy(t, to_device, raw, c.offset, c.pointer, c.size).empty()) {
        return fail(what + " returned OK; it must be refused");
      }
    }
  }
  return pass();
}

Verdict map(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  if ((t.info.capabilities & LOOM_DEVICE_CAP_HOST_VISIBLE_MEMORY) == 0) {
    return skip("the device does not claim host-visible memory");
  }
  loom_buffer_t* raw = nullptr;
  if (std::string e = allocate(t, 1000, 0, LOOM_BUFFER_HOST_VISIBLE, &raw); !e.empty()) {
    return fail("the device claims host-visible memory but a LOOM_BUFFER_HOST_VISIBLE buffer failed: " + e);
  }
  BufferGuard b{t.api, raw};
  void* p = nullptr;
  ctx.note("buffer_map");
  if (std::string e = take(*t.api, t.api->buffer_map(raw, &p)); !e.empty()) {
    return fail("buffer_map of a host-visible buffer failed: " + e);
  }
  if (p == nullptr) return fail("buffer_map returned OK and a NULL pointer");
  for (int i = 0; i < 1000; ++i) static_cast<unsigned char*>(p)[i] = static_cast<unsigned char>(i * 7);
  t.api->buffer_unmap(raw);
  std::vector<unsigned char> back(1000);
  if (std::string e = copy(t, false, raw, 0, back.data(), 1000); !e.empty()) return fail("copy_to_host failed: " + e);
  for (int i = 0; i < 1000; ++i) {
    if (back[i] != static_cast<unsigned char>(i * 7)) {
      return fail("bytes written through buffer_map are not what copy_to_host reads (byte " + std::to_string(i) + ")");
    }
  }
  return pass();
}

Verdict import_host(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  if ((t.info.capabilities & LOOM_DEVICE_CAP_HOST_POINTER_IMPORT) == 0) {
    return skip("the device does not claim host-pointer import");
  }
  if (t.api->buffer_import_host == nullptr) {
    return fail("the device claims LOOM_DEVICE_CAP_HOST_POINTER_IMPORT but buffer_import_host is NULL");
  }
  constexpr size_t kSize = 64 * 1024;
  void* memory = nullptr;
  if (::posix_memalign(&memory, 4096, kSize) != 0) return fail("cannot allocate host memory");
  std::unique_ptr<void, decltype(&std::free)> owner(memory, &std::free);
  for (size_t i = 0; i < kSize; ++i) static_cast<unsigned char*>(memory)[i] = static_cast<unsigned char>(i % 251);
  loom_buffer_import_args_t a{};
  a.struct_size = sizeof a;
  a.device = t.device;
  a.host_pointer = memory;
  a.size = kSize;
  ctx.note("buffer_import_host");
  if (std::string e = take(*t.api, t.api->buffer_import_host(&a)); !e.empty()) {
    return fail("buffer_import_host of 64 KiB at a 4096-aligned address failed: " + e);
  }
  BufferGuard b{t.api, a.out_buffer};
  std::vector<unsigned char> back(kSize);
  if (std::string e = copy(t, false, a.out_buffer, 0, back.data(), kSize); !e.empty()) return fail("copy_to_host failed: " + e);
  if (std::memcmp(back.data(), memory, kSize) != 0) return fail("an imported buffer does not read the host memory");
  return pass();
}

Verdict host_signal(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const loom_plugin_api_t& api = *t.api;
  FenceGuard f{&api, nullptr};
  ctx.note("fence_create");
  if (std::string e = take(api, api.fence_create(t.device, &f.fence)); !e.empty()) return fail("fence_create failed: " + e);
  if (f.fence == nullptr) return fail("fence_create returned OK and NULL");
  bool signaled = true;
  if (std::string e = take(api, api.fence_query(f.fence, &signaled)); !e.empty()) return fail("fence_query failed: " + e);
  if (signaled) return fail("a new fence reports signaled");
  ctx.note("fence_wait with a 20 ms timeout on an unsignaled fence");
  const auto start = std::chrono::steady_clock::now();
  loom_status_t* st = api.fence_wait(f.fence, 20'000'000);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (st == nullptr) return fail("fence_wait on an unsignaled fence returned OK");
  const loom_status_code_t code = api.status_code(st);
  api.status_destroy(st);
  if (code != LOOM_STATUS_DEADLINE_EXCEEDED) {
    return fail("fence_wait timing out returned " + std::string(code_name(code)) + ", expected DEADLINE_EXCEEDED");
  }
  // Returning at all is what counts; the bound only catches a wait that
  // ignores its timeout, with room for a slow machine.
  const double bound = static_cast<double>(scaled(std::chrono::milliseconds(2000)).count());
  if (ms > bound) {
    return fail("fence_wait with a 20 ms timeout took " + std::to_string(static_cast<int>(ms)) +
                " ms (more than " + std::to_string(static_cast<int>(bound)) + ")");
  }
  ctx.note("fence_signal");
  if (std::string e = take(api, api.fence_signal(f.fence)); !e.empty()) return fail("fence_signal failed: " + e);
  if (std::string e = take(api, api.fence_query(f.fence, &signaled)); !e.empty()) return fail("fence_query failed: " + e);
  if (!signaled) return fail("a signaled fence reports unsignaled");
  if (std::string e = take(api, api.fence_wait(f.fence, 0)); !e.empty()) return fail("fence_wait on a signaled fence failed: " + e);
  // A waiter on another thread is released by the signal.
  FenceGuard g{&api, nullptr};
  if (std::string e = take(api, api.fence_create(t.device, &g.fence)); !e.empty()) return fail("fence_create failed: " + e);
  std::string waited;
  std::thread waiter([&] { waited = take(api, api.fence_wait(g.fence, 5'000'000'000ull)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::string signal_error = take(api, api.fence_signal(g.fence));
  waiter.join();
  if (!signal_error.empty()) return fail("fence_signal failed: " + signal_error);
  if (!waited.empty()) return fail("a thread waiting on a fence was not released by fence_signal: " + waited);
  return pass();
}

const CheckDef kDeviceChecks[] = {
    {"devices.list",
     "devices are listed with unique '<plugin>://' URIs, names, known kinds and dtypes", list},
    {"memory.allocate_free", "buffers of odd sizes and alignments allocate and free", allocate_free},
    {"memory.copy_roundtrip", "copies both ways at odd offsets and sizes read back exactly",
     copy_roundtrip},
    {"memory.copy_out_of_range", "copies past the end, wrapping ranges and NULL pointers are refused",
     copy_out_of_range},
    {"memory.map", "a device claiming host-visible memory maps buffers that copies agree with", map},
    {"memory.import_host", "a device claiming host import wraps host memory", import_host},
    {"fences.host_signal",
     "fences start unsignaled, time out with DEADLINE_EXCEEDED, and a signal releases waiters",
     host_signal},
};

}  // namespace

std::span<const CheckDef> device_checks() { return kDeviceChecks; }

}  // namespace loom::conformance::detail
