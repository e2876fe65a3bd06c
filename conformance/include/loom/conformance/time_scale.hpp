// Time limits that stretch with the build: a check's verdict must never
// depend on how fast the machine is. Under AddressSanitizer a run is two to
// four times slower, and a CI machine may be twice as slow again and share
// its cores with a second test; the sanitizer test presets set
// LOOM_TIME_SCALE so that every default limit of the conformance suite and
// of `loom test-onnx` grows with them. A limit given explicitly (--timeout)
// is taken as given.
//
// Header-only (target loom_time_scale), so that tests which link nothing of
// the suite stretch their limits the same way.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>

namespace loom::conformance {

// $LOOM_TIME_SCALE when it is a number from 1 to 100, else 1 (unset,
// malformed or out of range: a misspelt value never shortens a limit).
// Reads the environment when called.
inline double time_scale() {
  const char* text = std::getenv("LOOM_TIME_SCALE");
  if (text == nullptr || text[0] == '\0') return 1.0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value) || value < 1.0 || value > 100.0) {
    return 1.0;
  }
  return value;
}

// `limit` times time_scale(), rounded up to whole milliseconds.
inline std::chrono::milliseconds scaled(std::chrono::milliseconds limit) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(static_cast<double>(limit.count()) * time_scale())));
}

}  // namespace loom::conformance
