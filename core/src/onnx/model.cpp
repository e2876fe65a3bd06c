#include <climits>
#include <exception>
#include <fstream>
#include <system_error>

#include "onnx/onnx_model.hpp"
#include "onnx/onnx_pb.h"

namespace loom::onnx_io {

namespace fs = std::filesystem;

namespace {

// protobuf reads at most INT_MAX bytes in one message.
constexpr uint64_t kProtobufCeiling = static_cast<uint64_t>(INT_MAX);

Status check_size(uint64_t size, const LoadOptions& options) {
  uint64_t limit = std::min(options.max_model_bytes, kProtobufCeiling);
  if (size > limit) {
    return resource_exhausted("model is " + std::to_string(size) + " bytes, more than the " +
                              std::to_string(limit) + "-byte limit (store large weights as "
                              "external data)");
  }
  if (size == 0) return invalid_argument("not an ONNX model: the file is empty");
  return Status();
}

Status parse_into(::onnx::ModelProto& proto, std::span<const std::byte> bytes) {
  bool parsed = false;
  try {
    parsed = proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
  } catch (const std::exception& e) {
    return invalid_argument(std::string("not an ONNX model: protobuf failed: ") + e.what());
  }
  if (!parsed) {
    return invalid_argument("not an ONNX model: the bytes are not a valid ModelProto "
                            "(truncated, corrupt, or another format)");
  }
  // An arbitrary byte string can be a valid (empty or unknown-field-only)
  // message; a real model always names its IR version and has a graph.
  if (proto.ir_version() <= 0) {
    return invalid_argument("not an ONNX model: ir_version is missing or " +
                            std::to_string(proto.ir_version()));
  }
  if (!proto.has_graph()) return invalid_argument("not an ONNX model: it has no graph");
  return Status();
}

}  // namespace

Model::Model() : proto_(std::make_unique<::onnx::ModelProto>()) {}
Model::~Model() = default;

const ::onnx::ModelProto& Model::proto() const { return *proto_; }

Result<std::unique_ptr<Model>> Model::parse(std::span<const std::byte> bytes,
                                            std::filesystem::path base_dir,
                                            std::string_view what, const LoadOptions& options) {
  auto context = [&](const Status& s) { return s.with_context(what); };
  Status st = check_size(bytes.size(), options);
  if (!st.ok()) return context(st);
  std::unique_ptr<Model> model(new Model());
  st = parse_into(*model->proto_, bytes);
  if (!st.ok()) return context(st);
  model->base_dir_ = std::move(base_dir);
  model->source_ = std::string(what);
  return model;
}

Result<std::unique_ptr<Model>> Model::load_file(const fs::path& path,
                                                const LoadOptions& options) {
  const std::string what = path.string();
  auto context = [&](const Status& s) { return s.with_context(what); };
  std::error_code ec;
  fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return context(not_found("cannot open: " + (ec ? ec.message() : std::string("no such file"))));
  }
  if (!fs::is_regular_file(status)) return context(invalid_argument("not a regular file"));
  uint64_t size = fs::file_size(path, ec);
  if (ec) return context(unavailable("cannot get the file size: " + ec.message()));
  Status st = check_size(size, options);
  if (!st.ok()) return context(st);

  std::ifstream in(path, std::ios::binary);
  if (!in) return context(unavailable("cannot open for reading"));
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) {
    return context(data_loss("read " + std::to_string(in.gcount()) + " of " +
                             std::to_string(size) + " bytes (did the file change?)"));
  }
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  return parse(bytes, folder, what, options);
}

}  // namespace loom::onnx_io
