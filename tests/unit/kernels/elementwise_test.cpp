// Unit tests of the elementwise family (hand-computed cases, opset variants,
// error paths). The ONNX backend node tests are the wider oracle
// (loom-node-check).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "kernels/util.hpp"

namespace loom::kernels {
namespace {

// A host tensor of any dtype for the tests.
struct T {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::byte> bytes;

  TensorRef ref() const {
    return TensorRef{dtype, shape, const_cast<std::byte*>(bytes.data()), bytes.size()};
  }
  template <typename V>
  std::vector<V> as() const {
    std::vector<V> v(bytes.size() / sizeof(V));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
};

template <typename V>
T make(DType dtype, Shape shape, std::vector<V> values) {
  T t{dtype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(V))};
  if (!values.empty()) std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}
T f32(Shape s, std::vector<float> v) { return make(DType::kF32, std::move(s), std::move(v)); }
T out(DType dtype, Shape shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return T{dtype, std::move(shape), std::vector<std::byte>(n * dtype_size(dtype))};
}
T none() { return T{DType::kInvalid, {}, {}}; }

AttributeDef iattr(std::string name, int64_t v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kInt;
  a.i = v;
  return a;
}
AttributeDef fattr(std::string name, float v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kFloat;
  a.f = v;
  return a;
}
AttributeDef sattr(std::string name, std::string v) {
  AttributeDef a;
  a.name = std::move(name);
  a.kind = AttributeKind::kString;
  a.s = std::move(v);
  return a;
}

const KernelRegistry& registry() {
  static const KernelRegistry r = KernelRegistry::reference();
  return r;
}

Status run(std::string_view op, const std::vector<const T*>& in, const std::vector<T*>& outs,
           const std::vector<AttributeDef>& attrs = {}, int32_t opset = 0) {
  const KernelInfo* k = registry().find(op);
  if (k == nullptr) return not_found(std::string(op));
  std::vector<TensorRef> i, o;
  for (const T* t : in) i.push_back(t->ref());
  for (T* t : outs) o.push_back(t->ref());
  return k->run(i, o, Attributes(attrs, opset));
}

Result<std::vector<TensorType>> infer(std::string_view op, const std::vector<TensorType>& in,
                                      const std::vector<AttributeDef>& attrs = {},
                                      int32_t opset = 0) {
  const KernelInfo* k = registry().find(op);
  if (k == nullptr) return not_found(std::string(op));
  return k->infer(in, Attributes(attrs, opset));
}

void expect_floats(const T& t, const std::vector<float>& want, float tol = 1e-5f) {
  auto got = t.as<float>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
    }
  }
}

// Runs a unary f32 op on `x` and compares with `want`.
void unary(std::string_view op, std::vector<float> x, std::vector<float> want,
           std::vector<AttributeDef> attrs = {}) {
  T in = f32({static_cast<int64_t>(x.size())}, x);
  T y = out(DType::kF32, in.shape);
  ASSERT_TRUE(run(op, {&in}, {&y}, attrs).ok()) << op;
  SCOPED_TRACE(std::string(op));
  expect_floats(y, want);
}

// ---------------------------------------------------------------- unary

TEST(ElementwiseUnary, Activations) {
  unary("Relu", {-1, 0, 2}, {0, 0, 2});
  unary("LeakyRelu", {-2, 3}, {-0.02f, 3});
  unary("LeakyRelu", {-2, 3}, {-1, 3}, {fattr("alpha", 0.5f)});
  unary("Elu", {-1, 2}, {std::exp(-1.0f) - 1, 2});
  unary("Selu", {-1, 2}, {1.0507010f * 1.6732632f * (std::exp(-1.0f) - 1), 1.0507010f * 2});
  unary("Celu", {-1, 2}, {2 * (std::exp(-0.5f) - 1), 2}, {fattr("alpha", 2)});
  unary("ThresholdedRelu", {0.5f, 1, 1.5f}, {0, 0, 1.5f});
  unary("Sigmoid", {0, -100, 100}, {0.5f, 0, 1});
  unary("HardSigmoid", {0, 10, -10}, {0.5f, 1, 0});
  unary("HardSwish", {-4, 0, 1, 4}, {0, 0, 1.0f * (1.0f / 6 + 0.5f), 4});
  unary("Softplus", {0, 100, -100}, {std::log(2.0f), 100, 0});
  unary("Softsign", {1, -3}, {0.5f, -0.75f});
  unary("Shrink", {-2, 0.2f, 2}, {-1.5f, 0, 1.5f}, {fattr("bias", 0.5f), fattr("lambd", 1)});
}

TEST(ElementwiseUnary, MathAndRounding) {
  unary("Exp", {0, 1}, {1, std::exp(1.0f)});
  unary("Log", {1, 0, -1}, {0, -INFINITY, NAN});
  unary("Sqrt", {4, 9}, {2, 3});
  unary("Reciprocal", {4, -0.5f}, {0.25f, -2});
  unary("Neg", {1, -2}, {-1, 2});
  unary("Abs", {-1.5f, 2}, {1.5f, 2});
  unary("Floor", {-1.5f, 1.5f}, {-2, 1});
  unary("Ceil", {-1.5f, 1.5f}, {-1, 2});
  unary("Round", {0.5f, 1.5f, 2.5f, -0.5f, -1.6f}, {0, 2, 2, -0.0f, -2});
  unary("Sign", {-3, 0, 2, NAN}, {-1, 0, 1, NAN});
  unary("Erf", {0, 1}, {0, 0.8427008f});
  unary("Tanh", {0, 1}, {0, std::tanh(1.0f)});
  unary("Sin", {0}, {0});
  unary("Cos", {0}, {1});
  unary("Tan", {0}, {0});
  unary("Asin", {1}, {1.5707964f});
  unary("Acos", {1}, {0});
  unary("Atan", {1}, {0.7853982f});
  unary("Sinh", {0}, {0});
  unary("Cosh", {0}, {1});
  unary("Asinh", {0}, {0});
  unary("Acosh", {1}, {0});
  unary("Atanh", {0}, {0});
}

TEST(ElementwiseUnary, IntegerForms) {
  T x = make<int32_t>(DType::kI32, {4}, {-5, 0, 7, std::numeric_limits<int32_t>::min()});
  T y = out(DType::kI32, {4});
  ASSERT_TRUE(run("Abs", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<int32_t>(), (std::vector<int32_t>{5, 0, 7, std::numeric_limits<int32_t>::min()}));
  ASSERT_TRUE(run("Neg", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<int32_t>()[0], 5);
  ASSERT_TRUE(run("Sign", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<int32_t>(), (std::vector<int32_t>{-1, 0, 1, -1}));
  ASSERT_TRUE(run("Relu", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<int32_t>(), (std::vector<int32_t>{0, 0, 7, 0}));
  Status s = run("Exp", {&x}, {&y});
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(), "Exp: X has unsupported dtype i32");
  T u = make<uint8_t>(DType::kU8, {1}, {3});
  T v = out(DType::kU8, {1});
  EXPECT_EQ(run("Neg", {&u}, {&v}).code(), StatusCode::kUnimplemented);
}

TEST(ElementwiseUnary, HalfAndDoubleComputeLikeFloat) {
  T h = make<Half>(DType::kF16, {2}, {to_half(-2.0f), to_half(0.5f)});
  T hy = out(DType::kF16, {2});
  ASSERT_TRUE(run("Relu", {&h}, {&hy}).ok());
  EXPECT_EQ(to_float(hy.as<Half>()[0]), 0.0f);
  EXPECT_EQ(to_float(hy.as<Half>()[1]), 0.5f);
  T d = make<double>(DType::kF64, {1}, {4.0});
  T dy = out(DType::kF64, {1});
  ASSERT_TRUE(run("Sqrt", {&d}, {&dy}).ok());
  EXPECT_EQ(dy.as<double>()[0], 2.0);
}

TEST(ElementwiseUnary, IsNaNIsInfAndNot) {
  T x = f32({4}, {NAN, INFINITY, -INFINITY, 1});
  T y = out(DType::kBool, {4});
  ASSERT_TRUE(run("IsNaN", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<uint8_t>(), (std::vector<uint8_t>{1, 0, 0, 0}));
  ASSERT_TRUE(run("IsInf", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<uint8_t>(), (std::vector<uint8_t>{0, 1, 1, 0}));
  ASSERT_TRUE(run("IsInf", {&x}, {&y}, {iattr("detect_negative", 0)}).ok());
  EXPECT_EQ(y.as<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 0}));
  T b = make<uint8_t>(DType::kBool, {2}, {1, 0});
  T nb = out(DType::kBool, {2});
  ASSERT_TRUE(run("Not", {&b}, {&nb}).ok());
  EXPECT_EQ(nb.as<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  T wrong = out(DType::kF32, {4});
  EXPECT_EQ(run("IsNaN", {&x}, {&wrong}).message(), "IsNaN: Y has dtype f32, expected i1");
  auto t = infer("IsInf", {{DType::kF16, {3}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].dtype, DType::kBool);
}

TEST(ElementwiseUnary, ErrorsNameTheOpAndOperand) {
  T x = f32({2, 3}, std::vector<float>(6));
  T y = out(DType::kF32, {6});
  EXPECT_EQ(run("Sigmoid", {&x}, {&y}).message(), "Sigmoid: output Y is [6], expected [2, 3]");
  EXPECT_EQ(run("Sigmoid", {&x, &x}, {&y}).message(), "Sigmoid: takes 1 inputs, got 2");
  T short_x = x;
  short_x.bytes.resize(8);
  EXPECT_NE(run("Tanh", {&short_x}, {&y}).message().find("Tanh: X of shape [2, 3]"),
            std::string::npos);
  EXPECT_EQ(run("Celu", {&x}, {&x}, {fattr("alpha", 0)}).message(),
            "Celu: attribute 'alpha' must not be 0");
  auto t = infer("Exp", {{DType::kI64, {2}}});
  EXPECT_EQ(t.status().code(), StatusCode::kUnimplemented);
  auto u = infer("Relu", {{DType::kF32, {2, -1}}});
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("Relu: X"), std::string::npos);
  auto v = infer("Relu", {{DType::kBF16, {2, 3}}});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[0].dtype, DType::kBF16);
}

// ---------------------------------------------------------------- binary

TEST(ElementwiseBinary, ArithmeticBroadcasts) {
  T a = f32({2, 1}, {1, 2});
  T b = f32({3}, {10, 20, 30});
  T c = out(DType::kF32, {2, 3});
  ASSERT_TRUE(run("Sub", {&a, &b}, {&c}).ok());
  expect_floats(c, {-9, -19, -29, -8, -18, -28});
  ASSERT_TRUE(run("Mul", {&a, &b}, {&c}).ok());
  expect_floats(c, {10, 20, 30, 20, 40, 60});
  ASSERT_TRUE(run("Div", {&b, &a}, {&c}).ok());
  expect_floats(c, {10, 20, 30, 5, 10, 15});
  auto t = infer("Add", {{DType::kF32, {2, 1}}, {DType::kF32, {3}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].shape, (Shape{2, 3}));
}

TEST(ElementwiseBinary, IntegerDivisionTruncatesAndModFollowsTheDivisor) {
  T a = make<int32_t>(DType::kI32, {4}, {7, -7, 7, -7});
  T b = make<int32_t>(DType::kI32, {4}, {2, 2, -2, -2});
  T c = out(DType::kI32, {4});
  ASSERT_TRUE(run("Div", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<int32_t>(), (std::vector<int32_t>{3, -3, -3, 3}));
  ASSERT_TRUE(run("Mod", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<int32_t>(), (std::vector<int32_t>{1, 1, -1, -1}));
  ASSERT_TRUE(run("Mod", {&a, &b}, {&c}, {iattr("fmod", 1)}).ok());
  EXPECT_EQ(c.as<int32_t>(), (std::vector<int32_t>{1, -1, 1, -1}));
  T zero = make<int32_t>(DType::kI32, {1}, {0});
  EXPECT_EQ(run("Div", {&a, &zero}, {&c}).message(), "Div: integer division by zero");
  T fa = f32({1}, {1});
  T fc = out(DType::kF32, {1});
  EXPECT_EQ(run("Mod", {&fa, &fa}, {&fc}).message(),
            "Mod: attribute 'fmod' must be 1 for floating-point inputs");
  EXPECT_EQ(run("Mod", {&a, &b}, {&c}, {iattr("fmod", 3)}).message(),
            "Mod: attribute 'fmod' must be 0 or 1, got 3");
}

TEST(ElementwiseBinary, SignedOverflowWraps) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  T a = make<int64_t>(DType::kI64, {2}, {big, std::numeric_limits<int64_t>::min()});
  T b = make<int64_t>(DType::kI64, {2}, {1, -1});
  T c = out(DType::kI64, {2});
  ASSERT_TRUE(run("Add", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<int64_t>()[0], std::numeric_limits<int64_t>::min());
  ASSERT_TRUE(run("Div", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<int64_t>()[1], std::numeric_limits<int64_t>::min());
}

TEST(ElementwiseBinary, ComparisonsAndLogicGiveBool) {
  T a = f32({3}, {1, 2, 3});
  T b = f32({}, {2});
  T c = out(DType::kBool, {3});
  ASSERT_TRUE(run("Less", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<uint8_t>(), (std::vector<uint8_t>{1, 0, 0}));
  ASSERT_TRUE(run("GreaterOrEqual", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  ASSERT_TRUE(run("Equal", {&a, &b}, {&c}).ok());
  EXPECT_EQ(c.as<uint8_t>(), (std::vector<uint8_t>{0, 1, 0}));
  T p = make<uint8_t>(DType::kBool, {2}, {1, 0});
  T q = make<uint8_t>(DType::kBool, {2}, {1, 1});
  T r = out(DType::kBool, {2});
  ASSERT_TRUE(run("And", {&p, &q}, {&r}).ok());
  EXPECT_EQ(r.as<uint8_t>(), (std::vector<uint8_t>{1, 0}));
  ASSERT_TRUE(run("Xor", {&p, &q}, {&r}).ok());
  EXPECT_EQ(r.as<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(run("And", {&a, &a}, {&c}).code(), StatusCode::kUnimplemented);
  T f = out(DType::kF32, {3});
  EXPECT_EQ(run("Less", {&a, &b}, {&f}).message(), "Less: C has dtype f32, expected i1");
}

TEST(ElementwiseBinary, BitShift) {
  T w = make<uint16_t>(DType::kU16, {1}, {65535});
  T ws = make<uint16_t>(DType::kU16, {1}, {15});
  T wo = out(DType::kU16, {1});
  ASSERT_TRUE(run("BitShift", {&w, &ws}, {&wo}, {sattr("direction", "LEFT")}).ok());
  EXPECT_EQ(wo.as<uint16_t>()[0], 32768);
  T a = make<uint8_t>(DType::kU8, {3}, {1, 16, 255});
  T b = make<uint8_t>(DType::kU8, {3}, {2, 3, 9});
  T c = out(DType::kU8, {3});
  ASSERT_TRUE(run("BitShift", {&a, &b}, {&c}, {sattr("direction", "LEFT")}).ok());
  EXPECT_EQ(c.as<uint8_t>(), (std::vector<uint8_t>{4, 128, 0}));
  ASSERT_TRUE(run("BitShift", {&a, &b}, {&c}, {sattr("direction", "RIGHT")}).ok());
  EXPECT_EQ(c.as<uint8_t>(), (std::vector<uint8_t>{0, 2, 0}));
  EXPECT_EQ(run("BitShift", {&a, &b}, {&c}).message(),
            "BitShift: attribute 'direction' must be LEFT or RIGHT, got ''");
}

TEST(ElementwiseBinary, PReluSlopeBroadcastsToXOnly) {
  T x = f32({2, 2}, {-1, 2, -3, 4});
  T slope = f32({2}, {0.5f, 0.25f});
  T y = out(DType::kF32, {2, 2});
  ASSERT_TRUE(run("PRelu", {&x, &slope}, {&y}).ok());
  expect_floats(y, {-0.5f, 2, -1.5f, 4});
  T wide = f32({2, 2, 2}, std::vector<float>(8));
  T y2 = out(DType::kF32, {2, 2, 2});
  EXPECT_FALSE(run("PRelu", {&x, &wide}, {&y2}).ok());
  auto t = infer("PRelu", {{DType::kF32, {2, 2}}, {DType::kF32, {2, 2, 2}}});
  EXPECT_EQ(t.status().message(), "PRelu: slope [2, 2, 2] does not broadcast to X [2, 2]");
  // Opset 6 (old PyTorch exports): a 1-D slope runs along the channel axis.
  T x3 = f32({1, 2, 2}, {-1, -1, -1, -1});
  T ch = f32({2}, {1, 2});
  T y3 = out(DType::kF32, {1, 2, 2});
  ASSERT_TRUE(run("PRelu", {&x3, &ch}, {&y3}, {}, 6).ok());
  expect_floats(y3, {-1, -1, -2, -2});
}

TEST(ElementwiseBinary, VariadicMaxMinSumMean) {
  T a = f32({2}, {1, 5});
  T b = f32({2, 1}, {3, NAN});
  T c = f32({}, {2});
  T y = out(DType::kF32, {2, 2});
  ASSERT_TRUE(run("Max", {&a, &b, &c}, {&y}).ok());
  expect_floats(y, {3, 5, NAN, NAN});
  ASSERT_TRUE(run("Min", {&a, &b, &c}, {&y}).ok());
  expect_floats(y, {1, 2, NAN, NAN});
  ASSERT_TRUE(run("Sum", {&a, &b, &c}, {&y}).ok());
  expect_floats(y, {6, 10, NAN, NAN});
  ASSERT_TRUE(run("Mean", {&a, &b, &c}, {&y}).ok());
  expect_floats(y, {2, 10.0f / 3, NAN, NAN});
  T single = out(DType::kF32, {2});
  ASSERT_TRUE(run("Sum", {&a}, {&single}).ok());
  expect_floats(single, {1, 5});
  EXPECT_EQ(run("Max", {}, {&single}).message(), "Max: takes at least 1 input, got 0");
  T y3 = out(DType::kF32, {2});
  EXPECT_EQ(run("Sum", {&a, &a}, {&y3, &y3}).message(), "Sum: produces 1 outputs, got 2");
  EXPECT_EQ(run("Sum", {&a, &b}, {&single}).message(), "Sum: output output is [2], expected [2, 2]");
  auto t = infer("Sum", {{DType::kF32, {2}}, {DType::kF32, {3, 1}}, {DType::kF32, {1}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].shape, (Shape{3, 2}));
  auto u = infer("Max", {{DType::kF32, {2}}, {DType::kI32, {2}}});
  EXPECT_EQ(u.status().message(), "Max: input 1 has dtype i32, expected f32");
  EXPECT_EQ(infer("Mean", {{DType::kI32, {2}}}).status().code(), StatusCode::kUnimplemented);
}

TEST(ElementwiseBinary, PowMixesDtypes) {
  T x = f32({3}, {2, 3, 4});
  T e = make<int64_t>(DType::kI64, {3}, {3, 2, -1});
  T z = out(DType::kF32, {3});
  ASSERT_TRUE(run("Pow", {&x, &e}, {&z}).ok());
  expect_floats(z, {8, 9, 0.25f});
  T xi = make<int32_t>(DType::kI32, {2}, {2, 3});
  T ef = f32({2}, {2, 0.5f});
  T zi = out(DType::kI32, {2});
  ASSERT_TRUE(run("Pow", {&xi, &ef}, {&zi}).ok());
  EXPECT_EQ(zi.as<int32_t>(), (std::vector<int32_t>{4, 1}));
  auto t = infer("Pow", {{DType::kI32, {2}}, {DType::kF32, {1}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].dtype, DType::kI32);
  EXPECT_EQ(infer("Pow", {{DType::kBool, {2}}, {DType::kF32, {1}}}).status().code(),
            StatusCode::kUnimplemented);
}

TEST(ElementwiseBinary, WhereBroadcastsThreeOperands) {
  T cond = make<uint8_t>(DType::kBool, {2, 1}, {1, 0});
  T x = make<int64_t>(DType::kI64, {2}, {1, 2});
  T y = make<int64_t>(DType::kI64, {}, {9});
  T o = out(DType::kI64, {2, 2});
  ASSERT_TRUE(run("Where", {&cond, &x, &y}, {&o}).ok());
  EXPECT_EQ(o.as<int64_t>(), (std::vector<int64_t>{1, 2, 9, 9}));
  T bad = make<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  EXPECT_EQ(run("Where", {&bad, &x, &y}, {&o}).message(),
            "Where: shapes do not broadcast (axis 0: 3 vs 2): condition is [3], X is [2], Y is []");
  EXPECT_EQ(run("Where", {&x, &x, &y}, {&o}).message(),
            "Where: condition has dtype i64, expected i1");
  auto t = infer("Where", {{DType::kBool, {2, 1}}, {DType::kF16, {3}}, {DType::kF16, {}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].shape, (Shape{2, 3}));
  EXPECT_EQ((*t)[0].dtype, DType::kF16);
}

// ---------------------------------------------------------------- misc

TEST(ElementwiseCast, ConvertsBetweenDtypes) {
  T x = f32({5}, {1.7f, -1.7f, NAN, 1e10f, 0});
  T y = out(DType::kI32, {5});
  ASSERT_TRUE(run("Cast", {&x}, {&y}, {iattr("to", 6)}).ok());
  EXPECT_EQ(y.as<int32_t>(),
            (std::vector<int32_t>{1, -1, 0, std::numeric_limits<int32_t>::max(), 0}));
  T b = out(DType::kBool, {5});
  ASSERT_TRUE(run("Cast", {&x}, {&b}, {iattr("to", 9)}).ok());
  EXPECT_EQ(b.as<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 1, 0}));
  T h = out(DType::kF16, {5});
  ASSERT_TRUE(run("Cast", {&x}, {&h}, {iattr("to", 10)}).ok());
  EXPECT_EQ(to_float(h.as<Half>()[0]), to_float(to_half(1.7f)));
  T bf = out(DType::kBF16, {5});
  ASSERT_TRUE(run("Cast", {&h}, {&bf}, {iattr("to", 16)}).ok());
  EXPECT_NEAR(to_float(bf.as<BFloat16>()[0]), 1.7f, 0.01f);
  T d = out(DType::kF64, {5});
  ASSERT_TRUE(run("Cast", {&b}, {&d}, {iattr("to", 11)}).ok());
  EXPECT_EQ(d.as<double>()[0], 1.0);
  EXPECT_EQ(run("Cast", {&x}, {&y}, {iattr("to", 7)}).message(),
            "Cast: output has dtype i32, expected i64");
  EXPECT_EQ(infer("Cast", {{DType::kF32, {2}}}, {iattr("to", 8)}).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(infer("Cast", {{DType::kF32, {2}}}, {iattr("to", 99)}).status().message(),
            "Cast: attribute 'to' is 99, not an ONNX data type");
  EXPECT_EQ(infer("Cast", {{DType::kF32, {2}}}).status().message(),
            "Cast: attribute 'to' is required");
  auto t = infer("CastLike", {{DType::kF32, {2}}, {DType::kI8, {}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].dtype, DType::kI8);
}

TEST(ElementwiseClip, AttributeAndInputForms) {
  T x = f32({4}, {-2, 0, 2, NAN});
  T y = out(DType::kF32, {4});
  ASSERT_TRUE(run("Clip", {&x}, {&y}, {fattr("min", -1), fattr("max", 1)}, 6).ok());
  expect_floats(y, {-1, 0, 1, NAN});
  T lo = f32({}, {-1.5f});
  T absent = none();
  T hi = f32({}, {0.5f});
  ASSERT_TRUE(run("Clip", {&x, &lo}, {&y}, {}, 11).ok());
  expect_floats(y, {-1.5f, 0, 2, NAN});
  ASSERT_TRUE(run("Clip", {&x, &absent, &hi}, {&y}, {}, 13).ok());
  expect_floats(y, {-2, 0, 0.5f, NAN});
  ASSERT_TRUE(run("Clip", {&x}, {&y}, {}, 13).ok());
  expect_floats(y, {-2, 0, 2, NAN});
  T xi = make<int8_t>(DType::kI8, {3}, {-100, 5, 100});
  T loi = make<int8_t>(DType::kI8, {}, {-10});
  T hii = make<int8_t>(DType::kI8, {}, {10});
  T yi = out(DType::kI8, {3});
  ASSERT_TRUE(run("Clip", {&xi, &loi, &hii}, {&yi}, {}, 12).ok());
  EXPECT_EQ(yi.as<int8_t>(), (std::vector<int8_t>{-10, 5, 10}));
  EXPECT_EQ(run("Clip", {&xi, &loi, &hii}, {&yi}, {}, 11).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(run("Clip", {&x, &lo}, {&y}, {}, 7).message(), "Clip: takes 1 inputs, got 2");
  T vec = f32({2}, {0, 1});
  EXPECT_EQ(run("Clip", {&x, &vec}, {&y}, {}, 13).message(),
            "Clip: operand 'min' must be a scalar, got shape [2]");
}

TEST(ElementwiseMisc, IdentityAndDropout) {
  T x = make<int64_t>(DType::kI64, {2}, {3, 4});
  T y = out(DType::kI64, {2});
  ASSERT_TRUE(run("Identity", {&x}, {&y}).ok());
  EXPECT_EQ(y.as<int64_t>(), (std::vector<int64_t>{3, 4}));
  T f = f32({2}, {1, 2});
  T fo = out(DType::kF32, {2});
  T mask = out(DType::kBool, {2});
  ASSERT_TRUE(run("Dropout", {&f}, {&fo, &mask}, {fattr("ratio", 0.3f)}, 10).ok());
  expect_floats(fo, {1, 2});
  EXPECT_EQ(mask.as<uint8_t>(), (std::vector<uint8_t>{1, 1}));
  // Opset 7-9: the mask has the data's dtype.
  T old_mask = out(DType::kF32, {2});
  ASSERT_TRUE(run("Dropout", {&f}, {&fo, &old_mask}, {}, 7).ok());
  expect_floats(old_mask, {1, 1});
  EXPECT_EQ(run("Dropout", {&f}, {&fo, &mask}, {}, 7).message(),
            "Dropout: mask has dtype i1, expected f32");
  T ratio = f32({}, {0.5f});
  T train = make<uint8_t>(DType::kBool, {}, {1});
  T no_train = make<uint8_t>(DType::kBool, {}, {0});
  ASSERT_TRUE(run("Dropout", {&f, &ratio, &no_train}, {&fo, &mask}, {}, 13).ok());
  EXPECT_EQ(run("Dropout", {&f, &ratio, &train}, {&fo}, {}, 13).code(),
            StatusCode::kUnimplemented);
  T zero_ratio = f32({}, {0});
  ASSERT_TRUE(run("Dropout", {&f, &zero_ratio, &train}, {&fo}, {}, 13).ok());
  auto t = infer("Dropout", {{DType::kF32, {2}}}, {}, 13);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1].dtype, DType::kBool);
}

TEST(ElementwiseQuant, QuantizeRoundsHalfToEvenAndSaturates) {
  T x = f32({6}, {0, 1, 3, 5, 600, -600});
  T scale = f32({}, {2});
  T zp = make<uint8_t>(DType::kU8, {}, {128});
  T y = out(DType::kU8, {6});
  ASSERT_TRUE(run("QuantizeLinear", {&x, &scale, &zp}, {&y}).ok());
  EXPECT_EQ(y.as<uint8_t>(), (std::vector<uint8_t>{128, 128, 130, 130, 255, 0}));
  T y_default = out(DType::kU8, {6});
  ASSERT_TRUE(run("QuantizeLinear", {&x, &scale}, {&y_default}).ok());
  EXPECT_EQ(y_default.as<uint8_t>(), (std::vector<uint8_t>{0, 0, 2, 2, 255, 0}));
  T zp8 = make<int8_t>(DType::kI8, {}, {-1});
  T y8 = out(DType::kI8, {6});
  ASSERT_TRUE(run("QuantizeLinear", {&x, &scale, &zp8}, {&y8}).ok());
  EXPECT_EQ(y8.as<int8_t>(), (std::vector<int8_t>{-1, -1, 1, 1, 127, -128}));
}

TEST(ElementwiseQuant, PerAxisAndDequantize) {
  T x = f32({2, 2}, {1, 2, 3, 4});
  T scale = f32({2}, {1, 2});
  T zp = make<int8_t>(DType::kI8, {2}, {0, 10});
  T y = out(DType::kI8, {2, 2});
  ASSERT_TRUE(run("QuantizeLinear", {&x, &scale, &zp}, {&y}, {iattr("axis", 0)}).ok());
  EXPECT_EQ(y.as<int8_t>(), (std::vector<int8_t>{1, 2, 12, 12}));
  T back = out(DType::kF32, {2, 2});
  ASSERT_TRUE(run("DequantizeLinear", {&y, &scale, &zp}, {&back}, {iattr("axis", 0)}).ok());
  expect_floats(back, {1, 2, 4, 4});
  ASSERT_TRUE(run("QuantizeLinear", {&x, &scale, &zp}, {&y}).ok());  // default axis 1
  EXPECT_EQ(y.as<int8_t>(), (std::vector<int8_t>{1, 11, 3, 12}));
  EXPECT_EQ(run("QuantizeLinear", {&x, &scale, &zp}, {&y}, {}, 10).message(),
            "QuantizeLinear: scale must be a scalar, got shape [2]");
  T scale3 = f32({3}, {1, 1, 1});
  EXPECT_EQ(infer("DequantizeLinear", {{DType::kU8, {2, 2}}, {DType::kF32, {3}}}).status().message(),
            "DequantizeLinear: scale has 3 elements, but axis 1 of input [2, 2] has 2");
  EXPECT_EQ(infer("QuantizeLinear", {{DType::kF32, {2}}, {DType::kF32, {}}, {DType::kI32, {}}})
                .status()
                .code(),
            StatusCode::kUnimplemented);
  T xi = make<int32_t>(DType::kI32, {2}, {-4, 6});
  T s = f32({}, {0.5f});
  T fo = out(DType::kF32, {2});
  ASSERT_TRUE(run("DequantizeLinear", {&xi, &s}, {&fo}).ok());
  expect_floats(fo, {-2, 3});
  EXPECT_EQ(run("DequantizeLinear", {&xi, &s, &zp}, {&fo}).message(),
            "DequantizeLinear: zero_point has dtype i8, expected i32");
  (void)scale3;
}

TEST(ElementwiseQuant, DynamicQuantizeLinearPicksScaleFromTheRange) {
  T x = f32({4}, {0, 2, -1.02f, 1.53f});
  T y = out(DType::kU8, {4});
  T scale = out(DType::kF32, {});
  T zp = out(DType::kU8, {});
  ASSERT_TRUE(run("DynamicQuantizeLinear", {&x}, {&y, &scale, &zp}).ok());
  EXPECT_NEAR(scale.as<float>()[0], (2 + 1.02f) / 255, 1e-7f);  // range includes 0
  EXPECT_EQ(zp.as<uint8_t>()[0], 86);                             // round(1.02 / scale)
  EXPECT_EQ(y.as<uint8_t>(), (std::vector<uint8_t>{86, 255, 0, 215}));
  T zeros = f32({2}, {0, 0});
  T y2 = out(DType::kU8, {2});
  ASSERT_TRUE(run("DynamicQuantizeLinear", {&zeros}, {&y2, &scale, &zp}).ok());
  EXPECT_EQ(y2.as<uint8_t>(), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(zp.as<uint8_t>()[0], 0);
  EXPECT_EQ(run("DynamicQuantizeLinear", {&x}, {&y}).message(),
            "DynamicQuantizeLinear: produces 3 outputs, got 1");
  auto t = infer("DynamicQuantizeLinear", {{DType::kF32, {3, 2}}});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[2].dtype, DType::kU8);
}

}  // namespace
}  // namespace loom::kernels
