// The device-model cache reader of the SDK (loom/sdk/device_model.hpp), which
// cpu-simd and vulkan-compute run on a file in the user's cache folder before
// their first estimate: any bytes are refused or read into finite values
// > 0, never a crash; what it accepts, written back, reads the same.
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_support.hpp"
#include "loom/sdk/device_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("loom_device_model_fuzz_" + std::to_string(::getpid()) + ".txt"))
                               .string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  loom::sdk::DeviceModelValues values;
  if (loom::sdk::read_device_model(path, "cpu X threads 2 plugin 1.0", &values)) {
    for (const auto& [name, value] : values) {
      if (!std::isfinite(value) || value <= 0) loom::fuzz::fail("a value that is not finite and > 0: " + name);
    }
    if (!loom::sdk::write_device_model(path, "cpu X threads 2 plugin 1.0", values)) {
      loom::fuzz::fail("an accepted model cannot be written back");
    }
    loom::sdk::DeviceModelValues again;
    if (!loom::sdk::read_device_model(path, "cpu X threads 2 plugin 1.0", &again) ||
        again.size() != values.size()) {
      loom::fuzz::fail("an accepted model, written back, does not read the same");
    }
  }
  std::remove(path.c_str());
  return 0;
}
