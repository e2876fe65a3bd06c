// Shared by the ONNX reader tests: a scratch folder per test and matchers
// for statuses.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "onnx/onnx_model.hpp"
#include "onnx_fixtures.hpp"

namespace loom {
// Lets gtest print a Status as its text instead of its bytes.
inline void PrintTo(const Status& status, std::ostream* os) { *os << status.to_string(); }
}  // namespace loom

namespace loom::onnx_io::testing {

namespace fx = loom::testing::onnx_fixtures;
using TP = ::onnx::TensorProto;

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            ("loom_onnx_" + std::to_string(::getpid()) + "_" + info->test_suite_name() + "_" +
             info->name());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Parses `model` from memory with `base_dir` for external data.
inline std::unique_ptr<Model> parse_or_die(const ::onnx::ModelProto& model,
                                           std::filesystem::path base_dir = {}) {
  auto bytes = fx::serialize(model);
  auto parsed = Model::parse(bytes, std::move(base_dir), "test model");
  EXPECT_TRUE(parsed.ok()) << parsed.status().to_string();
  return parsed.ok() ? std::move(parsed).value() : nullptr;
}

// The error reading the model's only initializer (empty when it succeeded).
inline Status first_initializer_error(const ::onnx::ModelProto& model,
                                      std::filesystem::path base_dir = {}) {
  auto parsed = parse_or_die(model, std::move(base_dir));
  if (!parsed) return internal_error("model did not parse");
  auto data = read_initializers(*parsed);
  return data.ok() ? Status() : data.status();
}

MATCHER_P2(IsError, code, substring, "") {
  const Status& s = arg;
  if (s.ok()) {
    *result_listener << "is OK";
    return false;
  }
  *result_listener << "is " << s.to_string();
  return s.code() == code && s.message().find(substring) != std::string::npos;
}

}  // namespace loom::onnx_io::testing
