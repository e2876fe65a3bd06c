// The fake plugin's raw-ABI half, in C style: everything loom/plugin.hpp
// cannot express on purpose, because the helper validates or builds exactly
// what these builds must get wrong (see fake_raw.h for the seam):
//  - the exported loom_plugin_query, which first obeys $LOOM_FAKE_MISBEHAVE
//    (query_segv, query_hang, query_exit0, and reason_overflow: writes 64 KiB
//    past the reason buffer), and answers for the ABI-level variants: kAbi2
//    (speaks only 2.0), kNoEntry (exported under another name), kSmall (a
//    table shorter than ABI 1.0), kLarge (every struct larger than 1.0),
//    kRefuses, kNullEntry (fence_wait NULL), kBadVersion (answers 1.7),
//    kNullApi (OK without a table);
//  - the library constructor that obeys constructor_abort;
//  - plugin_info, whose large variant appends fields a future minor version
//    might add;
//  - Defect::kStructSize: device_info refusing any struct_size but its own
//    (the helper writes whatever fits, so it never refuses);
//  - fake.compile_fault=null_blob|bad_key|bad_version|new_blob: the helper
//    checks the blob's loader key and version against plugin_info and always
//    copies it into the host's memory, so these break its result afterwards,
//    for the host's checks to catch (fail is plain behaviour, in
//    fake_plugin.cpp).
// The table itself comes from plugin.hpp (fake_sdk_api) and is copied and
// patched here per variant.
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "fake_raw.h"
#include "fake_variant.hpp"

#ifndef FAKE_NAME
#error "FAKE_NAME must name the plugin"
#endif
#ifndef FAKE_VARIANT
#define FAKE_VARIANT kNormal
#endif
#ifndef FAKE_DEFECT
#define FAKE_DEFECT kNone
#endif

namespace fake {

Variant variant() { return Variant::FAKE_VARIANT; }
Defect defect() { return Defect::FAKE_DEFECT; }
const char* name() { return FAKE_NAME; }

}  // namespace fake

namespace {

using fake::Defect;
using fake::Variant;
constexpr Variant kVariant = Variant::FAKE_VARIANT;
constexpr Defect kDefect = Defect::FAKE_DEFECT;
constexpr const char* kName = FAKE_NAME;
constexpr const char* kLoaderKey = FAKE_NAME;

const char* misbehave_from_environment() {
  const char* env = std::getenv("LOOM_FAKE_MISBEHAVE");
  return env != nullptr ? env : "";
}

// A deliberately misbehaving constructor, for the host's probe tests.
__attribute__((constructor)) void fake_library_constructor() {
  fake_misbehave(misbehave_from_environment(), "constructor");
}

// ---- plugin_info ---------------------------------------------------------

// The large variant appends fields a future minor version might add; the
// host must accept the structs and ignore them.
struct LargeLoaderKey {
  loom_loader_key_t key;
  uint64_t future_field;
};
struct LargeInfo {
  loom_plugin_info_t info;
  uint64_t future_field;
};
struct LargeApi {
  loom_plugin_api_t api;
  void* future_entries[4];
};

// ---- wrappers around the helper's entries ----------------------------------

// Defect::kStructSize: refuses a host's struct of any other size, newer ones
// included.
loom_status_t* strict_device_info(loom_device_t* device, loom_device_info_t* info) {
  if (info != nullptr && info->struct_size != sizeof(loom_device_info_t)) {
    const std::string message = std::string(kName) + ": device_info: struct_size must be " +
                                std::to_string(sizeof(loom_device_info_t));
    return fake_make_status(LOOM_STATUS_INVALID_ARGUMENT, message.c_str());
  }
  return fake_sdk_api(LOOM_ABI_VERSION(1, 0))->device_info(device, info);
}

// The helper's compile, then fake.compile_fault breaks its result.
loom_status_t* faulty_compile(loom_compile_args_t* args) {
  loom_status_t* status = fake_sdk_api(LOOM_ABI_VERSION(1, 0))->compile(args);
  if (status != nullptr || args == nullptr || args->plugin == nullptr) return status;
  const char* fault = fake_compile_fault(args->plugin);
  const loom_host_services_t* host = fake_host(args->plugin);
  if (std::strcmp(fault, "null_blob") == 0) {
    host->free(host->user_data, args->out_blob);
    args->out_blob = nullptr;
  } else if (std::strcmp(fault, "bad_key") == 0) {
    args->out_loader_key = "not-a-key";
  } else if (std::strcmp(fault, "bad_version") == 0) {
    args->out_format_version = 9;
  } else if (std::strcmp(fault, "new_blob") == 0) {
    // The blob in memory the host did not allocate; the plugin frees it at
    // plugin_destroy, since the host must not.
    void* own = fake_keep_blob_copy(args->plugin, args->out_blob, args->out_blob_size);
    host->free(host->user_data, args->out_blob);
    args->out_blob = own;
  }
  return nullptr;
}

// ---- the table -------------------------------------------------------------

// The normal build speaks 1.0 and 1.1 (with executable_estimate); the others
// stand for 1.0 plugins (or misbehave).
constexpr bool kSpeaks11 = kVariant == Variant::kNormal;

template <uint32_t kVersion>
const LargeApi& api_table() {
  static const LargeApi table = [] {
    LargeApi t{};
    loom_plugin_api_t& a = t.api;
    const loom_plugin_api_t* sdk = fake_sdk_api(kVersion);
    std::memcpy(&a, sdk, sdk->struct_size);
    a.struct_size = kVariant == Variant::kLarge ? sizeof(LargeApi)
                    : kVariant == Variant::kSmall ? offsetof(loom_plugin_api_t, compile)
                                                  : sdk->struct_size;
    a.abi_version = kVariant == Variant::kAbi2 ? LOOM_ABI_VERSION(2, 0)
                    : kVariant == Variant::kBadVersion ? LOOM_ABI_VERSION(1, 7)
                                                       : kVersion;
    a.plugin_info = fake_plugin_info;
    if (kDefect == Defect::kStructSize) a.device_info = strict_device_info;
    if (kVariant == Variant::kNullEntry) a.fence_wait = nullptr;
    // Only the normal build imports host memory and compiles; the others
    // stand for run-only plugins.
    if (kVariant != Variant::kNormal) {
      a.buffer_import_host = nullptr;
      a.compile_supported = nullptr;
      a.compile = nullptr;
    } else {
      a.compile = faulty_compile;
    }
    return t;
  }();
  return table;
}

loom_status_code_t refuse(loom_plugin_query_t* query, const std::string& reason) {
  if (query->reason != nullptr && query->reason_capacity > 0) {
    const size_t n = reason.size() < query->reason_capacity - 1 ? reason.size()
                                                                  : query->reason_capacity - 1;
    std::memcpy(query->reason, reason.data(), n);
    query->reason[n] = '\0';
  }
  return LOOM_STATUS_INCOMPATIBLE;
}

}  // namespace

extern "C" void fake_misbehave(const char* what, const char* stage) {
  const size_t stage_length = std::strlen(stage);
  if (std::strncmp(what, stage, stage_length) != 0 || what[stage_length] != '_') return;
  const char* deed = what + stage_length + 1;
  if (std::strcmp(deed, "segv") == 0) {
    // The default action, even under a sanitizer's handler.
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  } else if (std::strcmp(deed, "abort") == 0) {
    std::abort();
  } else if (std::strcmp(deed, "exit0") == 0) {
    std::exit(0);
  } else if (std::strcmp(deed, "hang") == 0) {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

extern "C" const loom_plugin_info_t* fake_plugin_info(void) {
  constexpr bool large = kVariant == Variant::kLarge;
  static const LargeLoaderKey key{
      {large ? sizeof(LargeLoaderKey) : LOOM_LOADER_KEY_STRUCT_SIZE, kLoaderKey, 0, 1}, 0};
  static const loom_loader_key_t* const keys[] = {&key.key};
  static const LargeInfo info{
      {large ? sizeof(LargeInfo) : LOOM_PLUGIN_INFO_STRUCT_SIZE, kName, "Loom tests", "1.0.0", 1, keys, 0},
      0};
  return &info.info;
}

// The no-entry variant exports its query under another name, so the library
// is well-formed but lacks LOOM_PLUGIN_ENTRY_POINT_NAME.
#if defined(FAKE_NO_ENTRY)
#define FAKE_ENTRY_NAME fake_query_under_another_name
#else
#define FAKE_ENTRY_NAME loom_plugin_query
#endif

extern "C" LOOM_PLUGIN_EXPORT loom_status_code_t FAKE_ENTRY_NAME(loom_plugin_query_t* query) {
  if (query == nullptr || query->struct_size < LOOM_PLUGIN_QUERY_STRUCT_SIZE) return LOOM_STATUS_INVALID_ARGUMENT;
  const char* fault = misbehave_from_environment();
  fake_misbehave(fault, "query");
  if (std::strcmp(fault, "reason_overflow") == 0 && query->reason != nullptr) {
    std::memset(query->reason, 'x', query->reason_capacity + 65536);
    return LOOM_STATUS_INCOMPATIBLE;
  }
  if (kVariant == Variant::kRefuses) return refuse(query, std::string(kName) + " refuses every host (test variant)");
  const bool answer11 = kSpeaks11 && query->host_abi_max >= LOOM_ABI_VERSION(1, 1) &&
                        query->host_abi_min <= LOOM_ABI_VERSION(1, 1);
  const LargeApi& table = answer11 ? api_table<LOOM_ABI_VERSION(1, 1)>()
                                   : api_table<LOOM_ABI_VERSION(1, 0)>();
  const uint32_t version = table.api.abi_version;
  if (kVariant != Variant::kBadVersion && (version < query->host_abi_min || version > query->host_abi_max)) {
    return refuse(query, std::string(kName) + " speaks only ABI " +
                             std::to_string(LOOM_ABI_VERSION_MAJOR_OF(version)) + "." +
                             std::to_string(LOOM_ABI_VERSION_MINOR_OF(version)));
  }
  query->out_abi_version = version;
  query->out_api = kVariant == Variant::kNullApi ? nullptr : &table.api;
  return LOOM_STATUS_OK;
}
