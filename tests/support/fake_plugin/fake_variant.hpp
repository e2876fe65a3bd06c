// The fake plugin's identity: its name, which variant (Variant) and which
// defect (Defect) this build is. The plugin.hpp half of the fake
// (fake_plugin.cpp and the files beside it) is compiled once for every
// build and asks through the functions below; the raw-ABI half
// (fake_abi_variants.cpp), compiled per build from FAKE_NAME, FAKE_VARIANT
// and FAKE_DEFECT (see CMakeLists.txt), answers them.
#pragma once

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
// This build's variant, defect and plugin name (fake_abi_variants.cpp).
// Each build serves a loader key equal to its name.
Variant variant();
Defect defect();
const char* name();

}  // namespace fake
