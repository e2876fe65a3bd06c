// The operator sweep's table: per operator, the opset its cases import,
// the dtypes of their data inputs, the value range of those inputs, the
// input sets and the attribute sets. Every (input set, attribute set, dtype)
// is one case. Data, not code: adding a case is adding a string.
//
// An input set lists the node's inputs, separated by "; ":
//   2x3x5      a data input (graph input) of the case's dtype, seeded values
//              in the row's range; "0x4" is empty, "[]" a scalar
//   bool@2x3   a data input of bools
//   idx@2x3<5  an i64 initializer of that shape, seeded values in [0, 5)
//   i64:1,2    a 1-D initializer of that dtype and those values ("i64:" is
//              empty); T:... takes the case's dtype
//   f32=0.5    a scalar initializer (rank 0); T=0.5 the case's dtype
//   _          an omitted optional input
// An attribute set is "name=value ...": 'text' a string, [1,2] ints, [0.5]
// floats, 0.5 a float (a float is written with a '.'), 3 an int; "" keeps
// every default.
#include <algorithm>
#include <string>
#include <vector>

#include "loom/conformance/operator_sweep.hpp"
#include "sweep_table.hpp"

namespace loom::conformance::sweep {

// Shapes shared by the elementwise unary operators: odd sizes, a scalar, an
// empty tensor, one past a SIMD width. (#undef below: unity builds.)
#define LOOM_SWEEP_UNARY_SHAPES "1", "7", "3x5", "2x3x17", "[]", "0x4", "33"

const std::vector<SweepRow>& table() {
  static const std::vector<SweepRow> rows = {
      // Unary elementwise.
      {"Abs", 13, "f32 i32 i64", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Neg", 13, "f32 i32 i64", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Relu", 14, "f32 f16", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Sigmoid", 13, "f32 f16", -6, 6, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Tanh", 13, "f32", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Exp", 13, "f32", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Log", 13, "f32", 0.05, 8, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Sqrt", 13, "f32", 0, 9, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Reciprocal", 13, "f32", 0.25, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Erf", 13, "f32", -3, 3, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Floor", 13, "f32", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Ceil", 13, "f32", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Softplus", 1, "f32", -6, 6, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"Identity", 16, "f32 i64", -4, 4, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      {"HardSwish", 14, "f32", -5, 5, 1, {LOOM_SWEEP_UNARY_SHAPES}, {""}},
      // Unary with attributes: a default and non-default values of each.
      {"HardSigmoid", 6, "f32", -4, 4, 1, {"7", "3x5", "2x3x17", "0x4"},
       {"", "alpha=0.2", "alpha=0.5", "alpha=0.1 beta=0.6", "beta=0.25"}},
      {"LeakyRelu", 16, "f32", -4, 4, 1, {"7", "3x5", "2x3x17", "0x4"}, {"", "alpha=0.3", "alpha=1.5"}},
      {"Elu", 6, "f32", -4, 4, 1, {"7", "3x5", "2x3x17", "0x4"}, {"", "alpha=0.5", "alpha=2.0"}},
      {"Selu", 6, "f32", -4, 4, 1, {"7", "3x5", "2x3x17"},
       {"", "alpha=1.5", "gamma=2.0", "alpha=1.2 gamma=0.9"}},
      {"Clip", 13, "f32", -4, 4, 1, {"7; T=-1.0; T=1.5", "2x3x17; T=0.5; _", "3x5; _; T=-0.5", "3x5", "0x4; T=0.0; T=1.0"},
       {""}},
      {"Cast", 13, "f32", -100, 100, 1, {"7", "3x5", "0x4"}, {"to=1", "to=6", "to=7", "to=10"}},
      {"Dropout", 13, "f32", -4, 4, 1, {"7", "3x5", "2x3x17"}, {""}},
      // Binary elementwise with broadcasting.
      {"Add", 14, "f32 i32 i64 f16", -4, 4, 1,
       {"7; 7", "3x5; 5", "3x5; 3x1", "2x3x17; 17", "2x1x5; 1x4x1", "[]; 3x5", "0x4; 4", "33; []"}, {""}},
      {"Sub", 14, "f32 i32 i64", -4, 4, 1, {"7; 7", "3x5; 5", "3x5; 3x1", "2x1x5; 1x4x1", "0x4; 4", "33; []"}, {""}},
      {"Mul", 14, "f32 i32 i64", -4, 4, 1, {"7; 7", "3x5; 5", "3x5; 3x1", "2x1x5; 1x4x1", "0x4; 4", "33; []"}, {""}},
      {"Div", 14, "f32", 0.25, 4, 1, {"7; 7", "3x5; 5", "3x5; 3x1", "2x1x5; 1x4x1", "0x4; 4", "33; []"}, {""}},
      {"Pow", 15, "f32", 0.25, 3, 1, {"7; 7", "3x5; 5", "2x1x5; 1x4x1", "33; []", "0x4; 4"}, {""}},
      {"Max", 13, "f32 i32", -4, 4, 1, {"7; 7", "3x5; 5", "2x1x5; 1x4x1", "3x5; 5; 3x1", "0x4; 4"}, {""}},
      {"Min", 13, "f32 i32", -4, 4, 1, {"7; 7", "3x5; 5", "2x1x5; 1x4x1", "3x5; 5; 3x1", "0x4; 4"}, {""}},
      {"PRelu", 16, "f32", -4, 4, 1, {"7; 7", "2x3x5; 3x1", "2x3x5; 5", "2x3x5; []"}, {""}},
      {"Equal", 13, "i32 i64", -2, 2, 1, {"7; 7", "3x5; 5", "2x1x5; 1x4x1", "0x4; 4"}, {""}},
      {"Where", 16, "f32 i64", -4, 4, 1,
       {"bool@7; 7; 7", "bool@3x5; 5; 3x1", "bool@2x1x5; 1x4x1; 5", "bool@0x4; 4; 4"}, {""}},
      // Matrix products.
      {"MatMul", 13, "f32", -2, 2, 1,
       {"3x5; 5x7", "1x17; 17x9", "2x3x5; 5x4", "2x3x5; 2x5x4", "7; 7x3", "3x7; 7", "2x1x3x5; 3x5x2", "0x5; 5x3"},
       {""}},
      {"Gemm", 13, "f32", -2, 2, 1, {"3x5; 5x7", "3x5; 5x7; 7", "3x5; 5x7; 3x7", "1x17; 17x9; 1x9"},
       {"", "alpha=0.5 beta=2.0"}},
      {"Gemm", 13, "f32", -2, 2, 1, {"5x3; 5x7", "5x3; 5x7; 7"}, {"transA=1"}},
      {"Gemm", 13, "f32", -2, 2, 1, {"3x5; 7x5", "3x5; 7x5; 3x7"}, {"transB=1", "transB=1 alpha=2.0"}},
      {"Gemm", 13, "f32", -2, 2, 1, {"5x3; 7x5; 1x7"}, {"transA=1 transB=1"}},
      // Normalization and softmax.
      {"Softmax", 13, "f32", -4, 4, 1, {"7", "3x5", "2x3x17"}, {"", "axis=0", "axis=-1"}},
      {"Softmax", 13, "f32", -4, 4, 1, {"3x5", "2x3x17"}, {"axis=-2"}},
      {"LogSoftmax", 13, "f32", -4, 4, 1, {"7", "3x5", "2x3x17"}, {"", "axis=0", "axis=-1"}},
      {"LogSoftmax", 13, "f32", -4, 4, 1, {"3x5", "2x3x17"}, {"axis=-2"}},
      {"LayerNormalization", 17, "f32", -3, 3, 1, {"3x5; 5; 5", "2x3x17; 17; 17", "3x5; 5"},
       {"", "epsilon=0.001"}},
      {"LayerNormalization", 17, "f32", -3, 3, 1, {"2x3x4; 3x4; 3x4", "2x3x4; 3x4"}, {"axis=1", "axis=-2"}},
      {"BatchNormalization", 15, "f32", -3, 3, 1,
       {"2x3x5x5; f32:1.0,0.5,2.0; f32:0.1,0.0,-0.2; f32:0.3,-0.1,0.0; f32:1.0,2.0,0.5", "1x3x7; f32:1.0,0.5,2.0; f32:0.1,0.0,-0.2; f32:0.3,-0.1,0.0; f32:1.0,2.0,0.5"},
       {"", "epsilon=0.01"}},
      // Convolutions and pooling.
      {"Conv", 11, "f32", -1, 1, 1,
       {"1x3x7x7; 4x3x3x3", "1x3x7x7; 4x3x3x3; 4", "2x2x9x5; 3x2x1x1"},
       {"", "pads=[1,1,1,1]", "strides=[2,2]", "auto_pad='SAME_UPPER'", "dilations=[2,2]"}},
      {"Conv", 11, "f32", -1, 1, 1, {"1x4x6x6; 4x1x3x3; 4", "1x4x7x7; 8x1x3x3"},
       {"group=4", "group=4 pads=[1,1,1,1]", "group=4 strides=[2,2]"}},
      {"Conv", 11, "f32", -1, 1, 1, {"1x3x11; 2x3x3", "2x3x11; 2x3x3; 2"}, {"", "pads=[1,1]", "strides=[2]", "dilations=[2]"}},
      {"ConvTranspose", 11, "f32", -1, 1, 1, {"1x3x5x5; 3x2x3x3", "1x3x5x5; 3x2x3x3; 2"},
       {"", "strides=[2,2]", "pads=[1,1,1,1]", "strides=[2,2] output_padding=[1,1]"}},
      {"MaxPool", 12, "f32", -4, 4, 1, {"1x3x7x7", "2x2x9x5", "1x1x5x5"},
       {"kernel_shape=[2,2]", "kernel_shape=[3,3] strides=[2,2]", "kernel_shape=[3,3] pads=[1,1,1,1]",
        "kernel_shape=[3,3] strides=[2,2] ceil_mode=1", "kernel_shape=[2,2] auto_pad='SAME_UPPER'"}},
      {"AveragePool", 11, "f32", -4, 4, 1, {"1x3x7x7", "2x2x9x5", "1x1x5x5"},
       {"kernel_shape=[2,2]", "kernel_shape=[3,3] strides=[2,2]", "kernel_shape=[3,3] pads=[1,1,1,1]",
        "kernel_shape=[3,3] pads=[1,1,1,1] count_include_pad=1", "kernel_shape=[3,3] strides=[2,2] ceil_mode=1"}},
      {"GlobalAveragePool", 1, "f32", -4, 4, 1, {"1x3x7x7", "2x5x3x1", "1x17x4x4", "2x3x5"}, {""}},
      // Reductions.
      {"ReduceSum", 13, "f32", -4, 4, 1, {"3x5; i64:1", "2x3x17; i64:0,2", "2x3x17; i64:-1", "3x5; i64:", "7; i64:0"},
       {"", "keepdims=0"}},
      {"ReduceMean", 13, "f32", -4, 4, 1, {"3x5", "2x3x17"}, {"", "axes=[1]", "axes=[-1] keepdims=0"}},
      {"ReduceMean", 13, "f32", -4, 4, 1, {"2x3x17", "0x3x4"}, {"axes=[0,2] keepdims=0", "axes=[2]"}},
      {"ReduceMean", 13, "f32", -4, 4, 1, {"7", "33"}, {"", "axes=[0] keepdims=0"}},
      {"ReduceMax", 13, "f32", -4, 4, 1, {"3x5", "2x3x17"}, {"", "axes=[1]", "axes=[-1] keepdims=0"}},
      {"ReduceMax", 13, "f32", -4, 4, 1, {"2x3x17", "0x3x4"}, {"axes=[0,2] keepdims=0", "axes=[2]"}},
      {"ReduceMax", 13, "f32", -4, 4, 1, {"7", "33"}, {"", "axes=[0] keepdims=0"}},
      {"ReduceMin", 13, "f32", -4, 4, 1, {"3x5", "2x3x17"}, {"", "axes=[1]", "axes=[-1] keepdims=0"}},
      {"ReduceMin", 13, "f32", -4, 4, 1, {"2x3x17", "0x3x4"}, {"axes=[0,2] keepdims=0", "axes=[2]"}},
      {"ReduceMin", 13, "f32", -4, 4, 1, {"7", "33"}, {"", "axes=[0] keepdims=0"}},
      // Data movement.
      {"Transpose", 13, "f32 i64", -4, 4, 1, {"3x5", "2x3x17", "2x3x4x5"}, {""}},
      {"Transpose", 13, "f32", -4, 4, 1, {"2x3x17"}, {"perm=[0,2,1]", "perm=[2,0,1]", "perm=[1,0,2]"}},
      {"Reshape", 14, "f32 i64", -4, 4, 1, {"2x3x4; i64:6,4", "2x3x4; i64:-1", "2x3x4; i64:0,-1", "0x4; i64:0,2,2"}, {""}},
      {"Flatten", 13, "f32", -4, 4, 1, {"2x3x4", "2x3x4x5"}, {"", "axis=0", "axis=2", "axis=-1"}},
      {"Flatten", 13, "f32", -4, 4, 1, {"7"}, {"", "axis=0"}},
      {"Squeeze", 13, "f32", -4, 4, 1, {"1x3x1x5; i64:0", "1x3x1x5; i64:0,2", "1x3x1x5; i64:-2", "1x3x1x5"}, {""}},
      {"Unsqueeze", 13, "f32", -4, 4, 1, {"3x5; i64:0", "3x5; i64:1,3", "3x5; i64:-1", "7; i64:0"}, {""}},
      {"Concat", 13, "f32 i64", -4, 4, 1, {"3x5; 3x2", "3x5; 3x5; 3x1", "2x3x17; 2x1x17", "3x0; 3x4"}, {"axis=1"}},
      {"Concat", 13, "f32 i64", -4, 4, 1, {"3x5; 3x2", "2x3x17; 2x3x1", "3x0; 3x4"}, {"axis=-1"}},
      {"Concat", 13, "f32", -4, 4, 1, {"3x5; 2x5", "1x7; 4x7"}, {"axis=0"}},
      {"Split", 13, "f32", -4, 4, 2, {"5x7; i64:2,3", "2x6x3"}, {""}},
      {"Split", 13, "f32", -4, 4, 2, {"3x7; i64:3,4", "4x6"}, {"axis=1"}},
      {"Slice", 13, "f32 i64", -4, 4, 1,
       {"5x7; i64:1; i64:4", "5x7; i64:0,1; i64:5,7; i64:0,1; i64:2,3", "5x7; i64:-3; i64:100; i64:1",
        "5x7; i64:4; i64:0; i64:0; i64:-1", "2x3x17; i64:2; i64:15; i64:2"},
       {""}},
      {"Gather", 13, "f32 i64", -4, 4, 1, {"5x7; idx@3<5", "5x7; idx@2x2<5", "5x7; i64=2"}, {"", "axis=0"}},
      {"Gather", 13, "f32", -4, 4, 1, {"5x7; idx@4<7", "2x3x17; idx@5<17"}, {"axis=-1"}},
      {"Pad", 13, "f32", -4, 4, 1,
       {"3x5; i64:1,2,0,1", "1x3x4x4; i64:0,0,1,1,0,0,1,1", "3x5; i64:1,1,1,1; T=2.5", "7; i64:0,3"},
       {"", "mode='reflect'", "mode='edge'"}},
      {"Resize", 13, "f32", -4, 4, 1,
       {"1x2x3x4; _; f32:1.0,1.0,2.0,2.0", "1x1x5x5; _; f32:1.0,1.0,0.6,0.6", "1x2x3x4; _; _; i64:1,2,5,7"},
       {"", "mode='linear'", "mode='nearest' nearest_mode='floor'",
        "mode='linear' coordinate_transformation_mode='align_corners'"}},
      // Quantization.
      {"QuantizeLinear", 13, "f32", -20, 20, 1, {"7; f32=0.2; u8=128", "3x5; f32=0.1; i8=-3", "2x3x17; f32=0.25"},
       {""}},
      {"MatMulInteger", 10, "u8", 0, 255, 1, {"3x5; 5x7", "3x5; 5x7; u8=128; u8=3", "2x3x17; 17x9; u8=100", "1x33; 33x5; _; u8=7"},
       {""}},
      {"ConvInteger", 10, "u8", 0, 255, 1, {"1x3x7x7; 4x3x3x3", "1x3x7x7; 4x3x3x3; u8=128; u8=120", "1x2x5x9; 3x2x1x1; u8=3"},
       {"", "pads=[1,1,1,1]", "strides=[2,2]"}},
      {"QLinearMatMul", 10, "u8", 0, 255, 1,
       {"3x5; f32=0.05; u8=128; 5x7; f32=0.02; u8=120; f32=0.1; u8=128",
        "2x3x17; f32=0.01; u8=100; 17x9; f32=0.03; u8=130; f32=0.25; u8=10"},
       {""}},
      {"QLinearConv", 10, "u8", 0, 255, 1,
       {"1x3x7x7; f32=0.05; u8=128; 4x3x3x3; f32=0.02; u8=120; f32=0.1; u8=128",
        "1x3x7x7; f32=0.05; u8=128; 4x3x3x3; f32=0.02; u8=120; f32=0.1; u8=128; i32:10,-20,30,0"},
       {"", "pads=[1,1,1,1]", "strides=[2,2]"}},
      {"DequantizeLinear", 13, "u8", 0, 255, 1, {"7; f32=0.2; u8=128", "3x5; f32=0.05; u8=10", "2x3x17; f32=0.25"},
       {""}},
  };
  return rows;
}
#undef LOOM_SWEEP_UNARY_SHAPES

std::vector<std::string> operator_names() {
  std::vector<std::string> names;
  for (const SweepRow& r : table()) names.emplace_back(r.op);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

}  // namespace loom::conformance::sweep
