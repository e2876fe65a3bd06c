// ONNX Runtime's quantized contrib operators (com.microsoft QLinearAdd,
// QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearGlobalAveragePool,
// QLinearAveragePool, QLinearConcat) read as DequantizeLinear -> f32
// operator -> QuantizeLinear (compiler/import_contrib.cpp): run on the
// reference kernels, each within 1 unit of ONNX Runtime's own float formula
// (computed here from its definition), and malformed nodes refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "import_test_util.hpp"

namespace loom::compiler::testing {
namespace {

namespace fx = loom::testing::onnx_fixtures;

void init_u8(::onnx::ModelProto& m, const std::string& name, int32_t type, int v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  t->add_int32_data(v);
}

void init_scale(::onnx::ModelProto& m, const std::string& name, float v) { init_f32(m, name, {}, {v}); }

::onnx::NodeProto& contrib(::onnx::ModelProto& m, const std::string& op, std::vector<std::string> in,
                           const std::string& out) {
  auto& n = add_node(m, op, std::move(in), {out}, op + "_" + out);
  n.set_domain("com.microsoft");
  return n;
}

::onnx::ModelProto contrib_model() {
  auto m = fx::empty_model();
  set_opset(m, 13);
  auto* ms = m.add_opset_import();
  ms->set_domain("com.microsoft");
  ms->set_version(1);
  return m;
}

// ONNX's QuantizeLinear / ONNX Runtime's final rounding: half to even,
// saturated to u8.
int q8(double v) { return static_cast<int>(std::clamp(std::nearbyint(v), 0.0, 255.0)); }

constexpr float kSx = 0.05f, kSy = 0.03f;
constexpr int kZx = 128, kZy = 100;

// x, y f32 [1, 2, 4, 4] -> QuantizeLinear (u8) -> each contrib operator on
// the bytes -> DequantizeLinear to a graph output (so that the bytes can be
// read back: q = round(v / s) + z).
TEST(ImportContribTest, QuantizedContribOperatorsRunWithinOneUnitOfOnnxRuntimesFormulas) {
  auto m = contrib_model();
  add_input(m, "x", TP::FLOAT, {1, 2, 4, 4});
  add_input(m, "y", TP::FLOAT, {1, 2, 4, 4});
  init_scale(m, "sx", kSx);
  init_scale(m, "sy", kSy);
  init_u8(m, "zx", TP::UINT8, kZx);
  init_u8(m, "zy", TP::UINT8, kZy);
  add_node(m, "QuantizeLinear", {"x", "sx", "zx"}, {"qx"});
  add_node(m, "QuantizeLinear", {"y", "sy", "zy"}, {"qy"});
  // Output scales and zero points, one per operator.
  struct Out {
    std::string name;
    float scale;
    int zero;
    std::vector<int64_t> shape;
  };
  const std::vector<Out> outs = {{"add", 0.07f, 120, {1, 2, 4, 4}}, {"mul", 0.04f, 0, {1, 2, 4, 4}},
                                 {"sig", 1.0f / 256, 0, {1, 2, 4, 4}}, {"lrelu", 0.02f, 60, {1, 2, 4, 4}},
                                 {"gap", 0.01f, 130, {1, 2, 1, 1}}, {"avg", 0.045f, 125, {1, 2, 2, 2}},
                                 {"cat", 0.06f, 110, {1, 4, 4, 4}}};
  for (const Out& o : outs) {
    init_scale(m, "s_" + o.name, o.scale);
    init_u8(m, "z_" + o.name, TP::UINT8, o.zero);
  }
  contrib(m, "QLinearAdd", {"qx", "sx", "zx", "qy", "sy", "zy", "s_add", "z_add"}, "add");
  // No output zero point: 0 of the inputs' type.
  contrib(m, "QLinearMul", {"qx", "sx", "zx", "qy", "sy", "zy", "s_mul"}, "mul");
  contrib(m, "QLinearSigmoid", {"qx", "sx", "zx", "s_sig", "z_sig"}, "sig");
  attr_float(contrib(m, "QLinearLeakyRelu", {"qx", "sx", "zx", "s_lrelu", "z_lrelu"}, "lrelu"), "alpha", 0.2f);
  contrib(m, "QLinearGlobalAveragePool", {"qx", "sx", "zx", "s_gap", "z_gap"}, "gap");
  auto& avg = contrib(m, "QLinearAveragePool", {"qx", "sx", "zx", "s_avg", "z_avg"}, "avg");
  attr_ints(avg, "kernel_shape", {2, 2});
  attr_ints(avg, "strides", {2, 2});
  attr_int(contrib(m, "QLinearConcat", {"s_cat", "z_cat", "qx", "sx", "zx", "qy", "sy", "zy"}, "cat"), "axis", 1);
  for (const Out& o : outs) {
    add_node(m, "DequantizeLinear", {o.name, "s_" + o.name, "z_" + o.name}, {o.name + "_f"});
    add_output(m, o.name + "_f", TP::FLOAT, o.shape);
  }
  const auto registry = test_registry();
  auto r = import(m, {}, registry);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (const graph::Node& n : r->graph.nodes) {
    EXPECT_TRUE(n.domain.empty()) << n.name << " stayed in domain " << n.domain;
  }
  // QLinearAdd became DequantizeLinear x2, Add, QuantizeLinear.
  std::vector<std::string> add_ops;
  for (const graph::Node& n : r->graph.nodes) {
    if (n.name.rfind("QLinearAdd_add/", 0) == 0) add_ops.push_back(n.op_type);
  }
  EXPECT_EQ(add_ops, (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "Add", "QuantizeLinear"}));

  std::vector<float> x(32), y(32);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::sin(0.7f * static_cast<float>(i)) * 6.0f;
    y[i] = std::cos(0.3f * static_cast<float>(i)) * 3.5f + 0.5f;
  }
  auto got = run_graph(r->graph, registry, {{"x", x}, {"y", y}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), outs.size());
  std::vector<int> qx(32), qy(32);
  for (size_t i = 0; i < 32; ++i) {
    qx[i] = q8(static_cast<double>(x[i] / kSx) + kZx);
    qy[i] = q8(static_cast<double>(y[i] / kSy) + kZy);
  }
  const double ax = kSx, ay = kSy;
  for (size_t o = 0; o < outs.size(); ++o) {
    const Out& out = outs[o];
    SCOPED_TRACE(out.name);
    const double sc = out.scale;
    std::vector<int> want;
    if (out.name == "add") {  // MLAS: a * (sa / sc) + b * (sb / sc) + zc
      for (size_t i = 0; i < 32; ++i) {
        want.push_back(q8((qx[i] - kZx) * (ax / sc) + (qy[i] - kZy) * (ay / sc) + out.zero));
      }
    } else if (out.name == "mul") {  // (a - za)(b - zb) * (sa sb / sc) + zc
      for (size_t i = 0; i < 32; ++i) want.push_back(q8((qx[i] - kZx) * (qy[i] - kZy) * (ax * ay / sc) + out.zero));
    } else if (out.name == "sig" || out.name == "lrelu") {  // a table of quantize(f(dequantize(v)))
      for (size_t i = 0; i < 32; ++i) {
        const double v = (qx[i] - kZx) * ax;
        const double f = out.name == "sig" ? 1.0 / (1.0 + std::exp(-v)) : (v < 0 ? 0.2 * v : v);
        want.push_back(q8(f / sc + out.zero));
      }
    } else if (out.name == "gap" || out.name == "avg") {  // integer sums, then one scale
      const bool gap = out.name == "gap";
      for (int c = 0; c < 2; ++c) {
        for (int wy = 0; wy < (gap ? 1 : 2); ++wy) {
          for (int wx = 0; wx < (gap ? 1 : 2); ++wx) {
            int64_t sum = 0, n = 0;
            for (int h = 0; h < 4; ++h) {
              for (int w = 0; w < 4; ++w) {
                if (!gap && (h / 2 != wy || w / 2 != wx)) continue;
                sum += qx[static_cast<size_t>(c * 16 + h * 4 + w)] - kZx;
                ++n;
              }
            }
            want.push_back(q8(static_cast<double>(sum) * (ax / (sc * static_cast<double>(n))) + out.zero));
          }
        }
      }
    } else {  // cat: each input requantized to the output's parameters
      for (size_t i = 0; i < 32; ++i) want.push_back(q8((qx[i] - kZx) * ax / sc + out.zero));
      for (size_t i = 0; i < 32; ++i) want.push_back(q8((qy[i] - kZy) * ay / sc + out.zero));
    }
    const std::vector<float>& v = (*got)[o];
    ASSERT_EQ(v.size(), want.size());
    int worst = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const int q = static_cast<int>(std::nearbyint(v[i] / out.scale)) + out.zero;
      worst = std::max(worst, std::abs(q - want[i]));
    }
    EXPECT_LE(worst, 1);
  }
}

// QLinearAdd of i8 data without C_zero_point: the output is i8, zero 0.
TEST(ImportContribTest, AnInt8OutputWithoutAZeroPointGetsAZeroOfItsType) {
  auto m = contrib_model();
  add_input(m, "x", TP::FLOAT, {4});
  init_scale(m, "s", 0.1f);
  init_u8(m, "z", TP::INT8, -3);
  init_scale(m, "sc", 0.2f);
  add_node(m, "QuantizeLinear", {"x", "s", "z"}, {"qx"});
  contrib(m, "QLinearAdd", {"qx", "s", "z", "qx", "s", "z", "sc"}, "c");
  add_node(m, "Cast", {"c"}, {"cf"}).add_attribute()->CopyFrom([] {
    ::onnx::AttributeProto a;
    a.set_name("to");
    a.set_type(::onnx::AttributeProto::INT);
    a.set_i(TP::FLOAT);
    return a;
  }());
  add_output(m, "cf", TP::FLOAT, {4});
  const auto registry = test_registry();
  auto r = import(m, {}, registry);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->graph.tensors[static_cast<size_t>(find_tensor(r->graph, "c"))].dtype, DType::kI8);
  auto got = run_graph(r->graph, registry, {{"x", {-20.0f, -1.0f, 0.3f, 9.0f}}});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  // qx = x / 0.1 - 3 (saturated to -128..127); c = 2 (qx + 3) * 0.1 / 0.2.
  EXPECT_EQ((*got)[0], (std::vector<float>{-125.0f, -10.0f, 3.0f, 90.0f}));
}

// Malformed nodes: one line naming the node and what was wrong.
TEST(ImportContribTest, MalformedContribNodesAreRefusedByName) {
  struct Case {
    std::function<void(::onnx::ModelProto&)> build;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {[](::onnx::ModelProto& m) { contrib(m, "QLinearAdd", {"q", "s", "z", "q", "s", "z"}, "y"); },
       "node 'QLinearAdd_y' (com.microsoft.QLinearAdd, opset 1) has 6 inputs, expected 7 to 8"},
      {[](::onnx::ModelProto& m) { contrib(m, "QLinearAdd", {"q", "s", "z", "", "s", "z", "s"}, "y"); },
       "QLinearAdd, opset 1): input 3 is required"},
      {[](::onnx::ModelProto& m) { attr_int(contrib(m, "QLinearSigmoid", {"q", "s", "z", "s", "z"}, "y"), "axis", 1); },
       "QLinearSigmoid, opset 1): attribute 'axis' is not supported"},
      {[](::onnx::ModelProto& m) {
         attr_int(contrib(m, "QLinearGlobalAveragePool", {"q", "s", "z", "s", "z"}, "y"), "channels_last", 1);
       },
       "QLinearGlobalAveragePool, opset 1): channels_last 1 (NHWC data) is not supported"},
      {[](::onnx::ModelProto& m) { contrib(m, "QLinearConcat", {"s", "z", "q", "s", "z"}, "y"); },
       "QLinearConcat, opset 1): attribute 'axis' (an int) is required"},
      {[](::onnx::ModelProto& m) { attr_int(contrib(m, "QLinearConcat", {"s", "z", "q", "s"}, "y"), "axis", 0); },
       "has 4 inputs, expected Y_scale, Y_zero_point and three per input"},
      {[](::onnx::ModelProto& m) {
         add_node(m, "Relu", {"xf"}, {"r"});
         add_node(m, "QuantizeLinear", {"r", "s"}, {"qr"});
         contrib(m, "QLinearSigmoid", {"qr", "s", "", "s"}, "y");
       },
       "QLinearSigmoid, opset 1): the output zero point is left out and the type of the quantized inputs is not known"},
  };
  for (const Case& c : cases) {
    auto m = contrib_model();
    add_input(m, "xf", TP::FLOAT, {4});
    add_input(m, "q", TP::UINT8, {4});
    init_scale(m, "s", 0.1f);
    init_u8(m, "z", TP::UINT8, 3);
    c.build(m);
    add_output(m, "y", TP::UINT8, {4});
    auto r = import(m, {}, test_registry());
    ASSERT_FALSE(r.ok()) << c.fragment;
    EXPECT_NE(r.status().message().find(c.fragment), std::string::npos) << r.status().message();
  }
  // A model of default opset 9 has no QuantizeLinear to read them as.
  auto m = contrib_model();
  set_opset(m, 9);
  add_input(m, "q", TP::UINT8, {4});
  init_scale(m, "s", 0.1f);
  init_u8(m, "z", TP::UINT8, 3);
  contrib(m, "QLinearSigmoid", {"q", "s", "z", "s", "z"}, "y");
  add_output(m, "y", TP::UINT8, {4});
  auto r = import(m, {}, test_registry());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs opset 10 or later"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace loom::compiler::testing
