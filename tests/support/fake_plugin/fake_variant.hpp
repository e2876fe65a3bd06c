// The fake plugin's build-time identity: its name, which variant (Variant)
// and which defect (Defect) this build is. Shared by both halves of the fake
// (fake_objects.hpp and fake_abi_variants.cpp); FAKE_NAME, FAKE_VARIANT and
// FAKE_DEFECT come from the build (see CMakeLists.txt).
#pragma once

#ifndef FAKE_NAME
#error "FAKE_NAME must name the plugin"
#endif
#ifndef FAKE_VARIANT
#define FAKE_VARIANT kNormal
#endif

namespace fake {

enum class Variant {
  kNormal,
  kAbi2,         // speaks only ABI 2.x (fake_abi_variants.cpp)
  kNoEntry,      // does not export loom_plugin_query
  kSmall,        // function table smaller than ABI 1.0 (fake_abi_variants.cpp)
  kLarge,        // every struct it fills is larger than ABI 1.0 (fake_abi_variants.cpp)
  kRefuses,      // query refuses with a reason (fake_abi_variants.cpp)
  kUnavailable,  // plugin_check_available refuses
  kNullEntry,    // a required entry (fence_wait) is NULL (fake_abi_variants.cpp)
  kBadUri,       // device URIs of another plugin
  kBadVersion,   // answers an ABI version outside the host's range (fake_abi_variants.cpp)
  kNullApi,      // answers OK without a function table (fake_abi_variants.cpp)
};
constexpr Variant kVariant = Variant::FAKE_VARIANT;

// The deliberately broken builds the conformance suite must catch, one
// defect each (FAKE_DEFECT; they are otherwise the normal build).
enum class Defect {
  kNone,
  kStructSize,     // refuses structs larger than its own (fake_abi_variants.cpp)
  kExecuteCrash,   // execute dereferences NULL
  kLeak,           // plugin_create leaks 256 KiB
  kCorruptBlobs,   // loads any blob it does not know as a copy
  kWrongResults,   // Add subtracts
  kRace,           // execute computes in a scratch area shared by all calls
  kFenceNeverSignals,  // async devices whose executions never signal
};
#ifndef FAKE_DEFECT
#define FAKE_DEFECT kNone
#endif
constexpr Defect kDefect = Defect::FAKE_DEFECT;
constexpr const char* kName = FAKE_NAME;
// Each build serves a loader key equal to its name.
constexpr const char* kLoaderKey = FAKE_NAME;

}  // namespace fake
