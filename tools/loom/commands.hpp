// The subcommands of the `loom` program. Each returns the process exit code
// and prints a one-line error to stderr on failure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loom/status.hpp"

namespace loom::cli {

struct DevicesArgs {
  bool json = false;
};

struct InspectArgs {
  std::string file;
  bool json = false;
};

struct RunArgs {
  std::string file;
  std::string function;
  std::string device;
  std::vector<std::string> inputs;   // NAME=PATH.npy | NAME=random
  std::vector<std::string> outputs;  // NAME=PATH.npy
  std::vector<std::string> params;   // SCOPE=PATH.irpa
  uint32_t repeat = 1;
  uint32_t threads = 0;
};

struct DemoArgs {
  std::string save_dir;
  uint32_t threads = 0;
  bool external_params = false;
};

int run_devices(const DevicesArgs& args);
int run_inspect(const InspectArgs& args);
int run_run(const RunArgs& args);
int run_demo(const DemoArgs& args);

// Prints "loom: error: <status message>" to stderr and returns 1.
int fail(const Status& status);

}  // namespace loom::cli
