// What the fake-plugin tests share. The program they load: main(a, b) = delegate "sum"(a, b)
// on f32[2, 3], with the delegate's variants given as (loader key, blob)
// pairs, preferred first. The fake plugins compute "fake:add" as a + b.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "program_builder/program_builder.hpp"
#include "loom/runtime.hpp"

namespace loom::testing {

inline std::vector<std::byte> sum_program(
    const std::vector<std::pair<std::string, std::string>>& variants) {
  tools::ProgramBuilder b("fake_sum_program");
  std::vector<uint32_t> arts;
  for (const auto& [key, blob] : variants) {
    arts.push_back(b.add_artifact(
        key, 1, "sum." + key,
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(blob.data()), blob.size())));
  }
  uint32_t d = b.add_delegate("sum", arts);
  tools::FunctionBuilder f = b.add_function("main");
  uint32_t a = f.input("a", DType::kF32, {2, 3});
  uint32_t x = f.input("b", DType::kF32, {2, 3});
  uint32_t y = f.value("y", DType::kF32, {2, 3});
  f.delegate_call(d, {a, x}, {y});
  f.output(y);
  auto writer = b.finish();
  EXPECT_TRUE(writer.ok()) << writer.status().to_string();
  return writer.ok() ? writer->write_buffer().value() : std::vector<std::byte>();
}

// A runtime that finds only the fake plugins named in `plugins` (folders of
// LOOM_TEST_PLUGIN_DIR), each created with `options`.
inline std::unique_ptr<Runtime> fake_plugins_runtime(
    std::vector<std::pair<std::string, std::string>> options,
    const std::vector<std::string>& plugins = {"fake"}) {
  RuntimeOptions o;
  for (const std::string& p : plugins) {
    o.plugin_paths.push_back(std::filesystem::path(LOOM_TEST_PLUGIN_DIR) / p);
  }
  o.use_environment = false;
  o.use_default_folder = false;
  o.use_user_folder = false;
  o.plugin_options = std::move(options);
  auto runtime = Runtime::create(o);
  EXPECT_TRUE(runtime.ok()) << runtime.status().to_string();
  return runtime.ok() ? std::move(*runtime) : nullptr;
}

}  // namespace loom::testing
