// Shared by the libFuzzer harnesses of tests/fuzz: what every harness checks
// of a refusal, and a way to stop on a broken invariant that libFuzzer
// reports as a crash (with the input that caused it). Header-only and free of
// the core, so the plugin blob harnesses (which link no core library, as
// plugins do not) use it too.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string_view>

namespace loom::fuzz {

// Stops the run with `what`: libFuzzer records the input as a crash.
[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "fuzz invariant broken: %.*s\n", static_cast<int>(what.size()), what.data());
  std::abort();
}

// A refusal must say what is wrong: never an empty message, never ok.
// `StatusT` is loom::Status or loom::sdk::Status.
template <typename StatusT>
void check_refusal(const StatusT& status) {
  if (status.ok()) fail("an error status with code ok");
  if (status.message().empty()) fail("an error status without a message");
}

inline std::span<const std::byte> bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const std::byte*>(data), size};
}

}  // namespace loom::fuzz
