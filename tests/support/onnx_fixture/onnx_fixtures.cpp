#include "onnx_fixtures.hpp"

#include <cstring>
#include <fstream>

namespace loom::testing::onnx_fixtures {

namespace fs = std::filesystem;
using TP = ::onnx::TensorProto;

::onnx::ModelProto empty_model() {
  ::onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("loom-tests");
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  model.mutable_graph()->set_name("g");
  return model;
}

TP& add_initializer(::onnx::ModelProto& model, const std::string& name, int32_t data_type,
                    std::vector<int64_t> dims) {
  TP* t = model.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(data_type);
  for (int64_t d : dims) t->add_dims(d);
  return *t;
}

void set_raw(TP& t, std::span<const std::byte> bytes) {
  t.set_raw_data(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

void set_external(TP& t, const std::string& location, std::optional<std::string> offset,
                  std::optional<std::string> length) {
  t.set_data_location(TP::EXTERNAL);
  auto add = [&](const char* key, const std::string& value) {
    auto* kv = t.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  };
  add("location", location);
  if (offset) add("offset", *offset);
  if (length) add("length", *length);
}

std::vector<std::byte> serialize(const ::onnx::ModelProto& model) {
  std::string s = model.SerializeAsString();
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

Status write_bytes(const fs::path& path, std::span<const std::byte> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) return unavailable("cannot write " + path.string());
  return Status();
}

Status write_model(const ::onnx::ModelProto& model, const fs::path& path) {
  return write_bytes(path, serialize(model));
}

Result<std::vector<std::pair<std::string, Tensor>>> write_sample_model(const fs::path& dir,
                                                                      const std::string& stem) {
  ::onnx::ModelProto model = empty_model();
  std::vector<std::pair<std::string, Tensor>> expected;
  auto expect = [&](const std::string& name, DType dtype, Shape shape,
                    std::span<const std::byte> bytes) -> Status {
    LOOM_ASSIGN_OR_RETURN(Tensor t, Tensor::copy_of(dtype, std::move(shape), bytes));
    expected.emplace_back(name, std::move(t));
    return Status();
  };

  std::vector<float> w(6);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * static_cast<float>(i) - 1.0f;
  set_raw(add_initializer(model, "enc.layer0/w", TP::FLOAT, {2, 3}), bytes_of(w));
  LOOM_RETURN_IF_ERROR(expect("enc.layer0/w", DType::kF32, {2, 3}, bytes_of(w)));

  std::vector<float> b = {0.25f, -8.0f, 3.5f};
  TP& tb = add_initializer(model, "bias", TP::FLOAT, {3});
  for (float v : b) tb.add_float_data(v);
  LOOM_RETURN_IF_ERROR(expect("bias", DType::kF32, {3}, bytes_of(b)));

  std::vector<int64_t> idx = {0, -1, int64_t{1} << 40, 7};
  TP& ti = add_initializer(model, "indices", TP::INT64, {4});
  for (int64_t v : idx) ti.add_int64_data(v);
  LOOM_RETURN_IF_ERROR(expect("indices", DType::kI64, {4}, bytes_of(idx)));

  std::vector<uint16_t> half = {0x3c00, 0xc000};  // 1.0, -2.0
  TP& th = add_initializer(model, "half", TP::FLOAT16, {2});
  for (uint16_t v : half) th.add_int32_data(v);
  LOOM_RETURN_IF_ERROR(expect("half", DType::kF16, {2}, bytes_of(half)));

  std::vector<uint8_t> flags = {1, 0, 1};
  TP& tf = add_initializer(model, "flags", TP::BOOL, {3});
  for (uint8_t v : flags) tf.add_int32_data(v);
  LOOM_RETURN_IF_ERROR(expect("flags", DType::kBool, {3}, bytes_of(flags)));

  std::vector<double> scale = {0.125};
  add_initializer(model, "scale", TP::DOUBLE, {}).add_double_data(scale[0]);
  LOOM_RETURN_IF_ERROR(expect("scale", DType::kF64, {}, bytes_of(scale)));

  // External: 16 floats at offset 128 of the weights file, after junk.
  std::vector<float> ext(16);
  for (size_t i = 0; i < ext.size(); ++i) ext[i] = static_cast<float>(i * i) / 4.0f;
  std::vector<std::byte> weights(128, std::byte{0xee});
  auto eb = bytes_of(ext);
  weights.insert(weights.end(), eb.begin(), eb.end());
  const std::string weights_name = stem + ".weights";
  set_external(add_initializer(model, "proj", TP::FLOAT, {4, 4}), weights_name, "128", "64");
  LOOM_RETURN_IF_ERROR(expect("proj", DType::kF32, {4, 4}, eb));

  LOOM_RETURN_IF_ERROR(write_bytes(dir / weights_name, weights));
  LOOM_RETURN_IF_ERROR(write_model(model, dir / (stem + ".onnx")));
  return expected;
}

}  // namespace loom::testing::onnx_fixtures
