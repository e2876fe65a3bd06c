// abi.*: the entry point, version negotiation, the function table, plugin
// information, struct sizes, NULL-tolerant destroys and error statuses.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "check_context.hpp"

namespace loom::conformance::detail {

namespace {

// The library opened the way the host opens it, and its entry point.
struct Library {
  void* handle = nullptr;
  loom_plugin_query_fn_t query = nullptr;
  std::string error;
  ~Library() {
    // Left loaded: the check's process ends right after, and unloading
    // would run the plugin's destructors, which are not under test here.
  }
};

Library open_library(const CheckContext& ctx) {
  Library lib;
  ctx.note("dlopen " + ctx.manifest().library.string());
  lib.handle = ::dlopen(ctx.manifest().library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) {
    const char* e = ::dlerror();
    lib.error = std::string("dlopen failed: ") + (e ? e : "unknown error");
    return lib;
  }
  ::dlerror();
  void* sym = ::dlsym(lib.handle, LOOM_PLUGIN_ENTRY_POINT_NAME);
  if (sym == nullptr) {
    lib.error = std::string("the library does not export ") + LOOM_PLUGIN_ENTRY_POINT_NAME;
    return lib;
  }
  lib.query = reinterpret_cast<loom_plugin_query_fn_t>(sym);
  return lib;
}

// Host services that accept everything and drop logs.
void* svc_allocate(void*, size_t size, size_t alignment) {
  void* p = nullptr;
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  return ::posix_memalign(&p, alignment, size == 0 ? 1 : size) == 0 ? p : nullptr;
}
void svc_free(void*, void* p) { std::free(p); }
void svc_log(void*, loom_log_level_t, const char*) {}
void svc_trace(void*, const loom_trace_event_t*) {}
const loom_host_services_t kServices{sizeof(loom_host_services_t), nullptr, svc_allocate,
                                     svc_free, svc_log, svc_trace};

constexpr size_t kReasonCapacity = 256;
constexpr size_t kReasonGuard = 64;

struct QueryResult {
  loom_status_code_t code = LOOM_STATUS_INTERNAL;
  loom_plugin_query_t query{};
  std::string reason;
  bool reason_overrun = false;
  bool reason_unterminated = false;
};

// Calls the query with the host range [min, max] and a struct of
// `struct_size` bytes (larger than today's: a newer host).
QueryResult run_query(const Library& lib, uint32_t min, uint32_t max, size_t struct_size) {
  QueryResult r;
  std::vector<unsigned char> storage(std::max(struct_size, sizeof(loom_plugin_query_t)) + 64, 0);
  std::vector<char> reason(kReasonCapacity + kReasonGuard, '\x7f');
  auto* q = reinterpret_cast<loom_plugin_query_t*>(storage.data());
  q->struct_size = struct_size;
  q->host_abi_min = min;
  q->host_abi_max = max;
  q->host = &kServices;
  q->reason = reason.data();
  q->reason_capacity = kReasonCapacity;
  r.code = lib.query(q);
  r.query = *q;
  for (size_t i = kReasonCapacity; i < reason.size(); ++i) r.reason_overrun |= reason[i] != '\x7f';
  const char* end = static_cast<const char*>(std::memchr(reason.data(), '\0', kReasonCapacity));
  r.reason_unterminated = end == nullptr;
  if (end != nullptr) r.reason.assign(reason.data(), static_cast<size_t>(end - reason.data()));
  return r;
}

std::string version_text(uint32_t v) {
  return std::to_string(LOOM_ABI_VERSION_MAJOR_OF(v)) + "." + std::to_string(LOOM_ABI_VERSION_MINOR_OF(v));
}

Verdict entry_point(CheckContext& ctx) {
  Library lib = open_library(ctx);
  if (!lib.error.empty()) return fail(lib.error);
  return pass();
}

// The answer to this host's range, and the table's consistency with it.
Verdict negotiate(CheckContext& ctx) {
  Library lib = open_library(ctx);
  if (!lib.error.empty()) return fail(lib.error);
  const uint32_t lo = LOOM_ABI_VERSION(1, 0), hi = LOOM_ABI_CURRENT;
  ctx.note("loom_plugin_query");
  QueryResult r = run_query(lib, lo, hi, sizeof(loom_plugin_query_t));
  if (r.code != LOOM_STATUS_OK) {
    return fail("expected the query to accept host ABI " + version_text(lo) + "-" + version_text(hi) +
                ", got " + std::string(code_name(r.code)) + ": " + r.reason);
  }
  const uint32_t v = r.query.out_abi_version;
  if (v < lo || v > hi) return fail("chose ABI " + version_text(v) + ", outside the host's range");
  if (r.query.out_api == nullptr) return fail("answered OK with out_api NULL");
  const loom_plugin_api_t& api = *r.query.out_api;
  if (api.abi_version != v) {
    return fail("the table says abi_version " + version_text(api.abi_version) +
                " but the query chose " + version_text(v));
  }
  const size_t need = v >= LOOM_ABI_VERSION(1, 1) ? LOOM_PLUGIN_API_V1_1_SIZE : LOOM_PLUGIN_API_V1_0_SIZE;
  if (api.struct_size < need) {
    return fail("the table's struct_size is " + std::to_string(api.struct_size) + ", smaller than " +
                std::to_string(need) + " that ABI " + version_text(v) + " needs");
  }
  uint32_t man_lo = ctx.manifest().abi_min, man_hi = ctx.manifest().abi_max;
  if (v < man_lo || v > man_hi) {
    return fail("chose ABI " + version_text(v) + ", outside the manifest's range " +
                version_text(man_lo) + "-" + version_text(man_hi));
  }
  // Every entry up to the chosen version's size, except the optional ones.
  struct Entry {
    const char* name;
    const void* fn;
  };
  const Entry required[] = {
      {"status_code", reinterpret_cast<const void*>(api.status_code)},
      {"status_message", reinterpret_cast<const void*>(api.status_message)},
      {"status_destroy", reinterpret_cast<const void*>(api.status_destroy)},
      {"plugin_info", reinterpret_cast<const void*>(api.plugin_info)},
      {"plugin_create", reinterpret_cast<const void*>(api.plugin_create)},
      {"plugin_destroy", reinterpret_cast<const void*>(api.plugin_destroy)},
      {"plugin_check_available", reinterpret_cast<const void*>(api.plugin_check_available)},
      {"device_count", reinterpret_cast<const void*>(api.device_count)},
      {"device_get", reinterpret_cast<const void*>(api.device_get)},
      {"device_info", reinterpret_cast<const void*>(api.device_info)},
      {"executable_check", reinterpret_cast<const void*>(api.executable_check)},
      {"executable_load", reinterpret_cast<const void*>(api.executable_load)},
      {"executable_destroy", reinterpret_cast<const void*>(api.executable_destroy)},
      {"execute", reinterpret_cast<const void*>(api.execute)},
      {"buffer_allocate", reinterpret_cast<const void*>(api.buffer_allocate)},
      {"buffer_free", reinterpret_cast<const void*>(api.buffer_free)},
      {"buffer_map", reinterpret_cast<const void*>(api.buffer_map)},
      {"buffer_unmap", reinterpret_cast<const void*>(api.buffer_unmap)},
      {"buffer_copy_from_host", reinterpret_cast<const void*>(api.buffer_copy_from_host)},
      {"buffer_copy_to_host", reinterpret_cast<const void*>(api.buffer_copy_to_host)},
      {"fence_create", reinterpret_cast<const void*>(api.fence_create)},
      {"fence_destroy", reinterpret_cast<const void*>(api.fence_destroy)},
      {"fence_signal", reinterpret_cast<const void*>(api.fence_signal)},
      {"fence_wait", reinterpret_cast<const void*>(api.fence_wait)},
      {"fence_query", reinterpret_cast<const void*>(api.fence_query)},
  };
  std::string missing;
  for (const Entry& e : required) {
    if (e.fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(e.name);
  }
  if (!missing.empty()) return fail("required table entries are NULL: " + missing);
  if ((api.compile_supported == nullptr) != (api.compile == nullptr)) {
    return fail("compile_supported and compile must both be set or both be NULL");
  }
  return pass("ABI " + version_text(v) + ", table of " + std::to_string(api.struct_size) + " bytes");
}

Verdict refuse_unknown_major(CheckContext& ctx) {
  Library lib = open_library(ctx);
  if (!lib.error.empty()) return fail(lib.error);
  ctx.note("loom_plugin_query with host ABI 99.0-99.5");
  QueryResult r = run_query(lib, LOOM_ABI_VERSION(99, 0), LOOM_ABI_VERSION(99, 5), sizeof(loom_plugin_query_t));
  if (r.reason_overrun) return fail("wrote past reason_capacity (" + std::to_string(kReasonCapacity) + " bytes)");
  if (r.code == LOOM_STATUS_OK) return fail("accepted a host that speaks only ABI 99.x");
  if (r.reason_unterminated) return fail("refused, but left the reason without a NUL within its capacity");
  if (r.reason.empty()) return fail("refused with " + std::string(code_name(r.code)) + " but gave no reason");
  return pass("refused: " + r.reason);
}

Verdict query_newer_host(CheckContext& ctx) {
  Library lib = open_library(ctx);
  if (!lib.error.empty()) return fail(lib.error);
  ctx.note("loom_plugin_query with a struct 64 bytes larger");
  QueryResult r = run_query(lib, LOOM_ABI_VERSION(1, 0), LOOM_ABI_CURRENT, sizeof(loom_plugin_query_t) + 64);
  if (r.code != LOOM_STATUS_OK) {
    return fail("a query struct larger than this header's (a newer host) was refused: " +
                std::string(code_name(r.code)) + ": " + r.reason + " (accept any struct_size >= the 1.0 size)");
  }
  return pass();
}

Verdict info(CheckContext& ctx) {
  auto plugin = ctx.load();
  if (!plugin.ok()) return fail(plugin.status().message());
  const loom_plugin_info_t* i = (*plugin)->api().plugin_info();
  if (i == nullptr) return fail("plugin_info returned NULL");
  if (i->struct_size < LOOM_PLUGIN_INFO_V1_0_SIZE) return fail("plugin_info's struct_size is too small");
  if (i->name == nullptr || ctx.manifest().name != i->name) {
    return fail("plugin_info names '" + std::string(i->name ? i->name : "(NULL)") +
                "', the manifest '" + ctx.manifest().name + "'");
  }
  if (i->version == nullptr || i->version[0] == '\0') return fail("plugin_info has no version");
  std::set<std::string> own;
  for (size_t k = 0; k < i->loader_key_count; ++k) {
    const loom_loader_key_t* key = i->loader_keys[k];
    if (key == nullptr || key->key == nullptr) return fail("loader_keys[" + std::to_string(k) + "] is NULL");
    if (key->format_version_min > key->format_version_max) {
      return fail("loader key '" + std::string(key->key) + "' has format versions min > max");
    }
    own.insert(key->key);
  }
  std::set<std::string> declared(ctx.manifest().loader_keys.begin(), ctx.manifest().loader_keys.end());
  if (own != declared) {
    auto join = [](const std::set<std::string>& s) {
      std::string t;
      for (const auto& k : s) t += (t.empty() ? "" : ", ") + k;
      return t.empty() ? std::string("none") : t;
    };
    return fail("the manifest's loader keys (" + join(declared) + ") differ from plugin_info's (" +
                join(own) + "): programs would be routed by the manifest to keys the plugin does not serve");
  }
  return pass();
}

Verdict null_destroys(CheckContext& ctx) {
  auto plugin = ctx.load();
  if (!plugin.ok()) return fail(plugin.status().message());
  const loom_plugin_api_t& api = (*plugin)->api();
  ctx.note("status_destroy(NULL)");
  api.status_destroy(nullptr);
  ctx.note("executable_destroy(NULL)");
  api.executable_destroy(nullptr);
  ctx.note("buffer_free(NULL)");
  api.buffer_free(nullptr);
  ctx.note("fence_destroy(NULL)");
  api.fence_destroy(nullptr);
  ctx.note("plugin_destroy(NULL)");
  api.plugin_destroy(nullptr);
  return pass();
}

// Calls that must fail, each with a status object that has a message.
Verdict errors_have_messages(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const auto& plugin = t.plugin;
  const loom_plugin_api_t& api = *t.api;
  loom_device_t* device = t.device;
  std::vector<std::string> problems;
  auto expect_error = [&](const char* what, loom_status_t* st) {
    if (st == nullptr) {
      problems.push_back(std::string(what) + " returned OK");
      return;
    }
    const char* msg = api.status_message(st);
    if (api.status_code(st) == LOOM_STATUS_OK) problems.push_back(std::string(what) + " returned a status with code OK");
    if (msg == nullptr || msg[0] == '\0') problems.push_back(std::string(what) + " returned an error without a message");
    api.status_destroy(st);
  };
  size_t count = 0;
  api.status_destroy(api.device_count(plugin->instance(), &count));
  loom_device_t* out = nullptr;
  ctx.note("device_get out of range");
  expect_error("device_get(index = device_count + 7)", api.device_get(plugin->instance(), count + 7, &out));
  ctx.note("plugin_create(NULL)");
  expect_error("plugin_create(NULL)", api.plugin_create(nullptr));
  ctx.note("buffer_allocate with struct_size 0");
  loom_buffer_allocate_args_t a{};
  a.struct_size = 0;
  a.device = device;
  a.size = 64;
  expect_error("buffer_allocate(struct_size = 0)", api.buffer_allocate(&a));
  if (a.out_buffer != nullptr) api.buffer_free(a.out_buffer);
  ctx.note("executable_load with a NULL blob");
  loom_executable_load_args_t l{};
  l.struct_size = sizeof l;
  l.device = device;
  l.loader_key = ctx.manifest().loader_keys.empty() ? "none" : ctx.manifest().loader_keys[0].c_str();
  l.blob = nullptr;
  l.blob_size = 16;
  expect_error("executable_load(blob = NULL, blob_size = 16)", api.executable_load(&l));
  ctx.note("executable_check with an unknown loader key");
  loom_executable_check_args_t c{};
  c.struct_size = sizeof c;
  c.device = device;
  c.loader_key = "loom.conformance.no-such-key";
  c.blob = "x";
  c.blob_size = 1;
  expect_error("executable_check(loader_key = 'loom.conformance.no-such-key')", api.executable_check(&c));
  ctx.note("execute with NULL args");
  expect_error("execute(NULL)", api.execute(nullptr));
  ctx.note("fence_wait on NULL");
  expect_error("fence_wait(NULL)", api.fence_wait(nullptr, 0));
  if (!problems.empty()) {
    std::string text = problems[0];
    for (size_t i = 1; i < problems.size(); ++i) text += "; " + problems[i];
    return fail(text);
  }
  return pass();
}

// Structs larger than this header's (from a newer host, zero-filled past
// the known fields) are accepted; ones smaller than the 1.0 size refused.
Verdict struct_sizes(CheckContext& ctx) {
  DeviceUnderTest t = open_device(ctx);
  if (!t.error.empty()) return fail(t.error);
  const loom_plugin_api_t& api = *t.api;
  loom_device_t* device = t.device;
  constexpr size_t kExtra = 64;

  ctx.note("device_info with a larger struct");
  struct {
    loom_device_info_t info;
    unsigned char extra[kExtra];
  } big{};
  std::memset(big.extra, 0xA5, kExtra);
  big.info.struct_size = sizeof big;
  if (std::string e = take(api, api.device_info(device, &big.info)); !e.empty()) {
    return fail("device_info refused a struct of " + std::to_string(sizeof big) +
                " bytes (a newer host): " + e + "; accept any struct_size >= the 1.0 size");
  }
  for (unsigned char b : big.extra) {
    if (b != 0xA5) return fail("device_info wrote past the fields it knows into a newer host's struct");
  }
  if (big.info.struct_size != sizeof big) return fail("device_info changed struct_size");

  ctx.note("buffer_allocate with a larger struct");
  struct {
    loom_buffer_allocate_args_t args;
    unsigned char extra[kExtra];
  } alloc{};
  alloc.args.struct_size = sizeof alloc;
  alloc.args.device = device;
  alloc.args.size = 256;
  if (std::string e = take(api, api.buffer_allocate(&alloc.args)); !e.empty()) {
    return fail("buffer_allocate refused an args struct of " + std::to_string(sizeof alloc) +
                " bytes (a newer host): " + e + "; accept any struct_size >= the 1.0 size");
  }
  BufferGuard buffer{&api, alloc.args.out_buffer};
  ctx.note("buffer_copy_from_host with a larger struct");
  struct {
    loom_buffer_copy_args_t args;
    unsigned char extra[kExtra];
  } copy{};
  std::vector<unsigned char> data(256, 7);
  copy.args.struct_size = sizeof copy;
  copy.args.buffer = buffer.buffer;
  copy.args.host_pointer = data.data();
  copy.args.size = data.size();
  if (std::string e = take(api, api.buffer_copy_from_host(&copy.args)); !e.empty()) {
    return fail("buffer_copy_from_host refused an args struct of " + std::to_string(sizeof copy) +
                " bytes (a newer host): " + e);
  }
  ctx.note("buffer_allocate with a struct smaller than 1.0's");
  loom_buffer_allocate_args_t small{};
  small.struct_size = offsetof(loom_buffer_allocate_args_t, size);
  small.device = device;
  loom_status_t* st = api.buffer_allocate(&small);
  if (st == nullptr) {
    return fail("buffer_allocate accepted struct_size " + std::to_string(small.struct_size) +
                ", smaller than the 1.0 size " + std::to_string(LOOM_BUFFER_ALLOCATE_ARGS_STRUCT_SIZE));
  }
  api.status_destroy(st);
  return pass();
}

const CheckDef kAbiChecks[] = {
    {"abi.entry_point", "the library loads and exports loom_plugin_query", entry_point},
    {"abi.negotiate",
     "the query accepts this host's range, chooses a version in it and in the manifest's, and "
     "hands out a table of that version's size with every required entry",
     negotiate},
    {"abi.refuse_unknown_major",
     "a host of an unknown major version is refused with a reason that fits its buffer",
     refuse_unknown_major},
    {"abi.query_newer_host", "a query struct larger than this header's is accepted", query_newer_host},
    {"abi.info", "plugin_info names the manifest's plugin and exactly its loader keys", info},
    {"abi.null_destroys", "every destroy entry accepts NULL", null_destroys},
    {"abi.errors_have_messages", "calls that must fail return an error status with a message",
     errors_have_messages},
    {"abi.struct_sizes",
     "structs larger than this header's are accepted without writes past known fields; structs "
     "smaller than the 1.0 size are refused",
     struct_sizes},
};

}  // namespace

std::span<const CheckDef> abi_checks() { return kAbiChecks; }

}  // namespace loom::conformance::detail
