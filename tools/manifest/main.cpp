// loom-manifest: writes the JSON manifest that sits beside a plugin library.
// Run by loom_add_plugin() after every link, so the recorded content hash
// always matches the library that was just built.
#include <cstdio>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/hash.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Write a Loom plugin manifest"};
  std::string library, name, version, abi_min = "1.0", abi_max = "1.0", output;
  std::vector<std::string> keys;
  app.add_option("--library", library, "the plugin library")->required()->check(CLI::ExistingFile);
  app.add_option("--name", name, "plugin name, e.g. cpu-simd")->required();
  app.add_option("--version", version, "plugin version")->required();
  app.add_option("--abi-min", abi_min, "lowest ABI version spoken, major.minor");
  app.add_option("--abi-max", abi_max, "highest ABI version spoken, major.minor");
  app.add_option("--loader-key", keys, "a loader key the plugin serves")->required();
  app.add_option("--output", output, "manifest file to write")->required();
  CLI11_PARSE(app, argc, argv);

  const std::regex version_re("^[0-9]+\\.[0-9]+$");
  for (const auto* v : {&abi_min, &abi_max}) {
    if (!std::regex_match(*v, version_re)) {
      std::fprintf(stderr, "loom-manifest: ABI version '%s' is not major.minor\n", v->c_str());
      return 1;
    }
  }
  auto hash = loom::hash_file_xxh3_128(library);
  if (!hash.ok()) {
    std::fprintf(stderr, "loom-manifest: %s\n", hash.status().to_string().c_str());
    return 1;
  }
  nlohmann::json manifest = {
      {"manifest_version", 1},
      {"name", name},
      {"version", version},
      {"abi", {{"min", abi_min}, {"max", abi_max}}},
      {"loader_keys", keys},
      {"library", std::filesystem::path(library).filename().string()},
      {"library_hash", *hash},
  };
  std::ofstream out(output, std::ios::trunc);
  out << manifest.dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "loom-manifest: cannot write %s\n", output.c_str());
    return 1;
  }
  return 0;
}
