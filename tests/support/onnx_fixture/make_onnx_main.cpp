// loom-test-make-onnx DIR: writes the sample model of onnx_fixtures.hpp as
// DIR/model.onnx (+ DIR/model.weights), each initializer's expected value as
// DIR/expected_<i>.npy, and prints "<i> <name>" per initializer; also writes
// DIR/escape.onnx, whose external data names '../outside.bin', and
// DIR/mlp.onnx for `loom compile`: x [N,4] (N dynamic) -> MatMul W [4,512]
// -> Add b [512] -> Relu -> Softmax -> Reshape to [N, -1] through an
// exporter-style Shape/Gather/Unsqueeze/Concat chain -> y, and DIR/mlp_bad_op.onnx, the same
// with an op no kernel implements (its output y stated as [2,512]).
#include <cstdio>
#include <filesystem>

#include "loom/npy.hpp"
#include "onnx_fixtures.hpp"

namespace fx = loom::testing::onnx_fixtures;

namespace {

void add_value_info(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::string>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (const std::string& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (!d.empty() && d[0] >= '0' && d[0] <= '9') {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

void add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::string out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + out);
  for (const std::string& i : in) n->add_input(i);
  n->add_output(out);
}

onnx::ModelProto mlp_model(const std::string& last_op) {
  auto model = fx::empty_model();
  std::vector<float> w(4 * 512), b(512);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.01f - 0.03f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 3) * 0.1f;
  fx::set_raw(fx::add_initializer(model, "W", onnx::TensorProto::FLOAT, {4, 512}), fx::bytes_of(w));
  fx::set_raw(fx::add_initializer(model, "b", onnx::TensorProto::FLOAT, {512}), fx::bytes_of(b));
  auto* g = model.mutable_graph();
  add_value_info(g->add_input(), "x", {"N", "4"});
  add_node(g, "MatMul", {"x", "W"}, "h");
  add_node(g, "Add", {"h", "b"}, "a");
  add_node(g, "Relu", {"a"}, "r");
  if (last_op != "Softmax") {
    add_node(g, last_op, {"r"}, "y");
  } else {
    // What exporters emit around a dynamic batch: a Constant/Shape/Gather/
    // Unsqueeze/Concat chain that computes Reshape's target [N, -1]; the
    // importer folds it once N is bound.
    add_node(g, "Softmax", {"r"}, "sm");
    auto constant = [&](const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
      auto* n = g->add_node();
      n->set_op_type("Constant");
      n->set_name("Constant_" + name);
      n->add_output(name);
      auto* attr = n->add_attribute();
      attr->set_name("value");
      attr->set_type(onnx::AttributeProto::TENSOR);
      auto* t = attr->mutable_t();
      t->set_data_type(onnx::TensorProto::INT64);
      for (int64_t d : dims) t->add_dims(d);
      for (int64_t x : v) t->add_int64_data(x);
    };
    add_node(g, "Shape", {"sm"}, "sm_shape");
    constant("zero", {}, {0});
    auto* gather = g->add_node();
    gather->set_op_type("Gather");
    gather->set_name("Gather_batch");
    gather->add_input("sm_shape");
    gather->add_input("zero");
    gather->add_output("batch");
    constant("axes0", {1}, {0});
    add_node(g, "Unsqueeze", {"batch", "axes0"}, "batch1");
    constant("minus_one", {1}, {-1});
    auto* concat = g->add_node();
    concat->set_op_type("Concat");
    concat->set_name("Concat_shape");
    concat->add_input("batch1");
    concat->add_input("minus_one");
    concat->add_output("target");
    auto* axis = concat->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(0);
    add_node(g, "Reshape", {"sm", "target"}, "y");
  }
  // The unknown op's output type must be stated for a plugin to take it.
  add_value_info(g->add_output(), "y", {last_op == "Softmax" ? "N" : "2", "512"});
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: loom-test-make-onnx DIR\n");
    return 2;
  }
  std::filesystem::path dir = argv[1];
  auto expected = fx::write_sample_model(dir);
  if (!expected.ok()) {
    std::fprintf(stderr, "%s\n", expected.status().to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < expected->size(); ++i) {
    const auto& [name, tensor] = (*expected)[i];
    auto path = dir / ("expected_" + std::to_string(i) + ".npy");
    loom::Status st = loom::io::write_npy(path, tensor);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
    std::printf("%zu %s\n", i, name.c_str());
  }
  auto escape = fx::empty_model();
  fx::set_external(fx::add_initializer(escape, "w", onnx::TensorProto::FLOAT, {2}),
                   "../outside.bin", "0", "8");
  loom::Status st = fx::write_model(escape, dir / "escape.onnx");
  if (st.ok()) st = fx::write_model(mlp_model("Softmax"), dir / "mlp.onnx");
  if (st.ok()) st = fx::write_model(mlp_model("NoSuchOp"), dir / "mlp_bad_op.onnx");
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
