#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernel_test_util.hpp"

namespace loom::kernels {
namespace {

using testing::buf;
using testing::Buf;
using testing::float_attr;
using testing::infer;
using testing::int_attr;
using testing::run;
using testing::zeros;

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want,
                     float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "element " << i;
  }
}

std::vector<float> iota(size_t n, float start = 1.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// ---------------------------------------------------------------- registry

TEST(KernelRegistry, ReferenceListsEveryOperatorSorted) {
  auto r = KernelRegistry::reference();
  // Every family adds operators; these are the ones this suite exercises.
  std::vector<std::string_view> want = {"Add", "Gemm", "MatMul", "Relu", "Softmax"};
  std::vector<std::string_view> ops = r.ops();
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
  EXPECT_EQ(std::adjacent_find(ops.begin(), ops.end()), ops.end());
  for (auto op : want) EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << op;
  for (auto op : want) {
    const KernelInfo* k = r.find(op);
    ASSERT_NE(k, nullptr) << op;
    EXPECT_NE(k->run, nullptr);
    EXPECT_NE(k->infer, nullptr);
  }
  EXPECT_EQ(r.find("NoSuchOperator"), nullptr);
}

TEST(KernelRegistry, AddReplacesAnExistingOperator) {
  auto r = KernelRegistry::reference();
  const size_t before = r.ops().size();
  r.add({"Relu", nullptr, nullptr});
  EXPECT_EQ(r.ops().size(), before);
  EXPECT_EQ(r.find("Relu")->run, nullptr);
}

TEST(Attributes, ReadsValuesAndFallsBackOnMissingOrWrongKind) {
  std::vector<AttributeDef> defs = {int_attr("axis", 2), float_attr("alpha", 0.5f)};
  AttributeDef s;
  s.name = "mode";
  s.kind = AttributeKind::kString;
  s.s = "fast";
  defs.push_back(s);
  AttributeDef ints;
  ints.name = "perm";
  ints.kind = AttributeKind::kInts;
  ints.ints = {1, 0};
  defs.push_back(ints);
  Attributes a(defs);
  EXPECT_EQ(a.get_int("axis", -1), 2);
  EXPECT_EQ(a.get_int("missing", -1), -1);
  EXPECT_EQ(a.get_int("alpha", 7), 7);
  EXPECT_FLOAT_EQ(a.get_float("alpha", 1.0f), 0.5f);
  EXPECT_FLOAT_EQ(a.get_float("axis", 1.0f), 2.0f);
  EXPECT_EQ(a.get_string("mode", "x"), "fast");
  EXPECT_EQ(a.get_string("axis", "x"), "x");
  EXPECT_EQ(a.get_ints("perm"), (std::vector<int64_t>{1, 0}));
  EXPECT_TRUE(a.get_ints("axis").empty());
  EXPECT_EQ(a.find("nope"), nullptr);
}

// ---------------------------------------------------------------- MatMul

TEST(MatMul, TwoByThreeTimesThreeByTwo) {
  Buf a = buf({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf b = buf({3, 2}, {7, 8, 9, 10, 11, 12});
  Buf y = zeros({2, 2});
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, {58, 64, 139, 154});
}

TEST(MatMul, VectorTimesMatrixDropsTheRowDimension) {
  Buf a = buf({3}, {1, 2, 3});
  Buf b = buf({3, 2}, {7, 8, 9, 10, 11, 12});
  auto t = infer("MatMul", {{DType::kF32, {3}}, {DType::kF32, {3, 2}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].shape, (Shape{2}));
  Buf y = zeros({2});
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, {58, 64});
}

TEST(MatMul, MatrixTimesVectorDropsTheColumnDimension) {
  Buf a = buf({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf b = buf({3}, {1, 0, -1});
  Buf y = zeros({2});
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, {-2, -2});
}

TEST(MatMul, VectorTimesVectorIsAScalar) {
  auto t = infer("MatMul", {{DType::kF32, {3}}, {DType::kF32, {3}}});
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE((*t)[0].shape.empty());
  Buf a = buf({3}, {1, 2, 3});
  Buf b = buf({3}, {4, 5, 6});
  Buf y = zeros({});
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, {32});
}

TEST(MatMul, BatchedWithBroadcastBatchDims) {
  // A [2, 1, 2, 3] x B [3, 3, 2] -> [2, 3, 2, 2]; checked against a naive loop.
  Buf a = buf({2, 1, 2, 3}, iota(12));
  Buf b = buf({3, 3, 2}, iota(18, -5.0f));
  Buf y = zeros({2, 3, 2, 2});
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  std::vector<float> want;
  for (int i0 = 0; i0 < 2; ++i0)
    for (int i1 = 0; i1 < 3; ++i1)
      for (int m = 0; m < 2; ++m)
        for (int n = 0; n < 2; ++n) {
          float s = 0;
          for (int k = 0; k < 3; ++k) s += a.data[i0 * 6 + m * 3 + k] * b.data[i1 * 6 + k * 2 + n];
          want.push_back(s);
        }
  expect_near_all(y.data, want);
}

TEST(MatMul, BatchedMatrixTimesPlainMatrix) {
  Buf a = buf({2, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  Buf b = buf({2, 2}, {1, 2, 3, 4});
  Buf y = zeros({2, 2, 2});
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, {1, 2, 3, 4, 2, 4, 6, 8});
}

TEST(MatMul, InnerDimensionMismatchNamesBothShapes) {
  Buf a = zeros({2, 3});
  Buf b = zeros({4, 5});
  Buf y = zeros({2, 5});
  Status s = run("MatMul", {&a, &b}, {&y});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "MatMul: inner dimensions differ: A is [2, 3], B is [4, 5]");
  auto t = infer("MatMul", {{DType::kF32, {2, 3}}, {DType::kF32, {4, 5}}});
  EXPECT_EQ(t.status().message(), s.message());
}

TEST(MatMul, BatchMismatchIsRejected) {
  auto t = infer("MatMul", {{DType::kF32, {2, 2, 3}}, {DType::kF32, {3, 3, 2}}});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("batch dimensions do not broadcast"), std::string::npos);
}

TEST(MatMul, ScalarOperandIsRejected) {
  auto t = infer("MatMul", {{DType::kF32, {}}, {DType::kF32, {3}}});
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("rank >= 1"), std::string::npos);
}

TEST(MatMul, WrongOutputShapeIsRejected) {
  Buf a = zeros({2, 3});
  Buf b = zeros({3, 4});
  Buf y = zeros({4, 2});
  Status s = run("MatMul", {&a, &b}, {&y});
  EXPECT_EQ(s.message(), "MatMul: output Y is [4, 2], expected [2, 4]");
}

TEST(MatMul, NonFloatDtypeNamesOpAndDtype) {
  Buf a = zeros({2, 2});
  a.dtype = DType::kBool;
  Buf b = zeros({2, 2});
  Buf y = zeros({2, 2});
  Status s = run("MatMul", {&a, &b}, {&y});
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(s.message(),
            "MatMul: A has dtype i1, supported: f32, f64, f16, bf16, i32, i64, u32, u64");
  auto t = infer("MatMul", {{DType::kF32, {2}}, {DType::kF64, {2}}});
  EXPECT_EQ(t.status().message(), "MatMul: B has dtype f64, supported: f32");
}

TEST(MatMul, WrongArityIsRejected) {
  Buf a = zeros({2, 2});
  Buf y = zeros({2, 2});
  EXPECT_EQ(run("MatMul", {&a}, {&y}).message(), "MatMul: takes 2 inputs, got 1");
  EXPECT_EQ(run("MatMul", {&a, &a}, {}).message(), "MatMul: produces 1 outputs, got 0");
}

TEST(MatMul, ByteSizeThatDisagreesWithShapeIsRejected) {
  Buf a = zeros({2, 2});
  a.data.pop_back();
  Buf b = zeros({2, 2});
  Buf y = zeros({2, 2});
  Status s = run("MatMul", {&a, &b}, {&y});
  EXPECT_EQ(s.message(), "MatMul: A of shape [2, 2] needs 16 bytes, has 12");
}

TEST(MatMul, NullDataIsRejected) {
  Buf b = zeros({2, 2});
  Buf y = zeros({2, 2});
  Shape shape{2, 2};
  TensorRef a{DType::kF32, shape, nullptr, 16};
  const KernelRegistry registry = KernelRegistry::reference();
  const KernelInfo* k = registry.find("MatMul");
  std::vector<TensorRef> in = {a, b.ref()}, out = {y.ref()};
  Status s = k->run(in, out, Attributes());
  EXPECT_EQ(s.message(), "MatMul: A has no data");
}

TEST(MatMul, ZeroInnerDimensionGivesZeros) {
  Buf a = zeros({2, 0});
  Buf b = zeros({0, 3});
  Buf y = buf({2, 3}, std::vector<float>(6, 9.0f));
  ASSERT_TRUE(run("MatMul", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, std::vector<float>(6, 0.0f));
}

// ---------------------------------------------------------------- Gemm

TEST(Gemm, PlainProductWithoutC) {
  Buf a = buf({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf b = buf({3, 2}, {7, 8, 9, 10, 11, 12});
  Buf y = zeros({2, 2});
  ASSERT_TRUE(run("Gemm", {&a, &b}, {&y}).ok());
  expect_near_all(y.data, {58, 64, 139, 154});
}

TEST(Gemm, TransposesAlphaBetaAndRowVectorC) {
  // A is stored as [K, M] and B as [N, K].
  Buf a = buf({3, 2}, {1, 4, 2, 5, 3, 6});
  Buf b = buf({2, 3}, {7, 9, 11, 8, 10, 12});
  Buf c = buf({2}, {1, -1});
  Buf y = zeros({2, 2});
  ASSERT_TRUE(run("Gemm", {&a, &b, &c}, {&y},
                  {int_attr("transA", 1), int_attr("transB", 1), float_attr("alpha", 0.5f),
                   float_attr("beta", 2.0f)})
                  .ok());
  expect_near_all(y.data, {29 + 2, 32 - 2, 69.5f + 2, 77 - 2});
}

TEST(Gemm, ScalarAndColumnAndFullC) {
  Buf a = buf({2, 2}, {1, 0, 0, 1});
  Buf b = buf({2, 2}, {1, 2, 3, 4});
  Buf y = zeros({2, 2});
  Buf scalar = buf({}, {10});
  ASSERT_TRUE(run("Gemm", {&a, &b, &scalar}, {&y}).ok());
  expect_near_all(y.data, {11, 12, 13, 14});
  Buf column = buf({2, 1}, {100, 200});
  ASSERT_TRUE(run("Gemm", {&a, &b, &column}, {&y}).ok());
  expect_near_all(y.data, {101, 102, 203, 204});
  Buf full = buf({2, 2}, {1, 1, 1, 1});
  ASSERT_TRUE(run("Gemm", {&a, &b, &full}, {&y}, {float_attr("beta", 0.0f)}).ok());
  expect_near_all(y.data, {1, 2, 3, 4});
}

TEST(Gemm, CThatDoesNotBroadcastToTheResultIsRejected) {
  auto t = infer("Gemm", {{DType::kF32, {2, 3}}, {DType::kF32, {3, 4}}, {DType::kF32, {3}}});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "Gemm: C is [3], does not broadcast to [2, 4]");
  // C may not grow the result either.
  auto u = infer("Gemm", {{DType::kF32, {2, 3}}, {DType::kF32, {3, 4}}, {DType::kF32, {3, 2, 4}}});
  ASSERT_FALSE(u.ok());
}

TEST(Gemm, InnerMismatchMentionsTransposition) {
  auto t = infer("Gemm", {{DType::kF32, {2, 3}}, {DType::kF32, {2, 3}}}, {int_attr("transB", 0)});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "Gemm: inner dimensions differ: A is [2, 3], B is [2, 3]");
  auto u = infer("Gemm", {{DType::kF32, {2, 3}}, {DType::kF32, {2, 3}}}, {int_attr("transB", 1)});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[0].shape, (Shape{2, 2}));
}

TEST(Gemm, NonMatrixOperandsAndBadTransAreRejected) {
  auto t = infer("Gemm", {{DType::kF32, {2, 3, 1}}, {DType::kF32, {3, 4}}});
  EXPECT_EQ(t.status().message(), "Gemm: A and B must be 2-D: A is [2, 3, 1], B is [3, 4]");
  auto u = infer("Gemm", {{DType::kF32, {2, 3}}, {DType::kF32, {3, 4}}}, {int_attr("transA", 2)});
  EXPECT_EQ(u.status().message(), "Gemm: transA and transB must be 0 or 1, got transA=2, transB=0");
  auto v = infer("Gemm", {{DType::kF32, {2, 3}}});
  EXPECT_EQ(v.status().message(), "Gemm: takes 2 to 3 inputs, got 1");
}

// ---------------------------------------------------------------- Add

TEST(Add, SameShape) {
  Buf a = buf({2, 2}, {1, 2, 3, 4});
  Buf b = buf({2, 2}, {10, 20, 30, 40});
  Buf c = zeros({2, 2});
  ASSERT_TRUE(run("Add", {&a, &b}, {&c}).ok());
  expect_near_all(c.data, {11, 22, 33, 44});
}

TEST(Add, RowVectorBroadcastsOverRows) {
  Buf a = buf({2, 3}, {1, 2, 3, 4, 5, 6});
  Buf b = buf({3}, {10, 20, 30});
  Buf c = zeros({2, 3});
  ASSERT_TRUE(run("Add", {&a, &b}, {&c}).ok());
  expect_near_all(c.data, {11, 22, 33, 14, 25, 36});
}

TEST(Add, BothOperandsBroadcast) {
  Buf a = buf({2, 1}, {1, 2});
  Buf b = buf({1, 3}, {10, 20, 30});
  Buf c = zeros({2, 3});
  ASSERT_TRUE(run("Add", {&a, &b}, {&c}).ok());
  expect_near_all(c.data, {11, 21, 31, 12, 22, 32});
  auto t = infer("Add", {{DType::kF32, {2, 1}}, {DType::kF32, {1, 3}}});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].shape, (Shape{2, 3}));
}

TEST(Add, ScalarPlusTensor) {
  Buf a = buf({}, {0.5f});
  Buf b = buf({3}, {1, 2, 3});
  Buf c = zeros({3});
  ASSERT_TRUE(run("Add", {&a, &b}, {&c}).ok());
  expect_near_all(c.data, {1.5f, 2.5f, 3.5f});
}

TEST(Add, IncompatibleShapesAreRejected) {
  Buf a = zeros({2, 3});
  Buf b = zeros({2});
  Buf c = zeros({2, 3});
  Status s = run("Add", {&a, &b}, {&c});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "Add: shapes do not broadcast (axis 1: 3 vs 2): A is [2, 3], B is [2]");
}

TEST(Add, OutputOfTheWrongShapeIsRejected) {
  Buf a = zeros({2, 3});
  Buf b = zeros({3});
  Buf c = zeros({3, 2});
  EXPECT_EQ(run("Add", {&a, &b}, {&c}).message(), "Add: output C is [3, 2], expected [2, 3]");
}

TEST(Add, NonFloatOutputIsRejected) {
  Buf a = zeros({2});
  Buf b = zeros({2});
  Buf c = zeros({2});
  c.dtype = DType::kI64;
  EXPECT_EQ(run("Add", {&a, &b}, {&c}).message(), "Add: C has dtype i64, expected f32");
}

// ---------------------------------------------------------------- Relu

TEST(Relu, ClampsNegativesAndKeepsNaN) {
  Buf x = buf({5}, {-2, -0.0f, 0, 3, std::nanf("")});
  Buf y = zeros({5});
  ASSERT_TRUE(run("Relu", {&x}, {&y}).ok());
  EXPECT_EQ(y.data[0], 0.0f);
  EXPECT_EQ(y.data[2], 0.0f);
  EXPECT_EQ(y.data[3], 3.0f);
  EXPECT_TRUE(std::isnan(y.data[4]));
}

TEST(Relu, ShapeMismatchAndArityAreRejected) {
  Buf x = zeros({2, 3});
  Buf y = zeros({6});
  EXPECT_EQ(run("Relu", {&x}, {&y}).message(), "Relu: output Y is [6], expected [2, 3]");
  EXPECT_EQ(run("Relu", {&x, &x}, {&y}).message(), "Relu: takes 1 inputs, got 2");
  auto t = infer("Relu", {{DType::kU8, {2}}});
  EXPECT_EQ(t.status().message(), "Relu: X has unsupported dtype u8");
  auto u = infer("Relu", {{DType::kF32, {2, -1}}});
  ASSERT_FALSE(u.ok());
  EXPECT_NE(u.status().message().find("Relu: X"), std::string::npos);
}

// ---------------------------------------------------------------- Softmax

TEST(Softmax, DefaultAxisIsTheLast) {
  Buf x = buf({2, 3}, {1, 2, 3, 0, 0, 0});
  Buf y = zeros({2, 3});
  ASSERT_TRUE(run("Softmax", {&x}, {&y}).ok());
  float e1 = std::exp(1.0f), e2 = std::exp(2.0f), e3 = std::exp(3.0f), s = e1 + e2 + e3;
  expect_near_all(y.data, {e1 / s, e2 / s, e3 / s, 1.0f / 3, 1.0f / 3, 1.0f / 3});
}

TEST(Softmax, AxisZeroNormalizesColumns) {
  Buf x = buf({2, 2}, {0, 1, 0, 1});
  Buf y = zeros({2, 2});
  ASSERT_TRUE(run("Softmax", {&x}, {&y}, {int_attr("axis", 0)}).ok());
  expect_near_all(y.data, {0.5f, 0.5f, 0.5f, 0.5f});
}

TEST(Softmax, NegativeAxisIsNormalized) {
  Buf x = buf({2, 2, 2}, iota(8));
  Buf a = zeros({2, 2, 2});
  Buf b = zeros({2, 2, 2});
  ASSERT_TRUE(run("Softmax", {&x}, {&a}, {int_attr("axis", -2)}).ok());
  ASSERT_TRUE(run("Softmax", {&x}, {&b}, {int_attr("axis", 1)}).ok());
  expect_near_all(a.data, b.data);
  // Along axis 1 every slice is (v, v + 2), so each pair is the same.
  float lo = 1.0f / (1.0f + std::exp(2.0f));
  expect_near_all(a.data, {lo, lo, 1 - lo, 1 - lo, lo, lo, 1 - lo, 1 - lo});
}

TEST(Softmax, LargeInputsStayFinite) {
  Buf x = buf({3}, {1000, 1001, 1002});
  Buf y = zeros({3});
  ASSERT_TRUE(run("Softmax", {&x}, {&y}).ok());
  float s = 0;
  for (float v : y.data) {
    EXPECT_TRUE(std::isfinite(v));
    s += v;
  }
  EXPECT_NEAR(s, 1.0f, 1e-6f);
  EXPECT_NEAR(y.data[2], 1.0f / (1.0f + std::exp(-1.0f) + std::exp(-2.0f)), 1e-6f);
}

TEST(Softmax, AxisOutOfRangeIsRejected) {
  Buf x = zeros({2, 3});
  Buf y = zeros({2, 3});
  EXPECT_EQ(run("Softmax", {&x}, {&y}, {int_attr("axis", 2)}).message(),
            "Softmax: axis 2 is out of range for input of shape [2, 3] (rank 2)");
  auto t = infer("Softmax", {{DType::kF32, {2, 3}}}, {int_attr("axis", -3)});
  EXPECT_EQ(t.status().message(),
            "Softmax: axis -3 is out of range for input of shape [2, 3] (rank 2)");
  auto u = infer("Softmax", {{DType::kF32, {}}});
  EXPECT_FALSE(u.ok());
}

TEST(Softmax, OutputShapeMismatchIsRejected) {
  Buf x = zeros({2, 3});
  Buf y = zeros({3, 2});
  EXPECT_EQ(run("Softmax", {&x}, {&y}).message(),
            "Softmax: output output is [3, 2], expected [2, 3]");
}

// ---------------------------------------------------------------- infer vs run

struct InferCase {
  std::string op;
  std::vector<Shape> inputs;
  std::vector<AttributeDef> attrs;
};

TEST(InferAgreesWithRun, OutputsSizedByInferRunCleanly) {
  std::vector<InferCase> cases = {
      {"MatMul", {{4, 3}, {3, 5}}, {}},
      {"MatMul", {{2, 1, 4, 3}, {5, 3, 2}}, {}},
      {"MatMul", {{3}, {2, 3, 4}}, {}},
      {"MatMul", {{2, 4, 3}, {3}}, {}},
      {"Gemm", {{3, 4}, {5, 4}, {5}}, {int_attr("transB", 1)}},
      {"Gemm", {{4, 3}, {4, 5}}, {int_attr("transA", 1)}},
      {"Add", {{3, 1, 2}, {4, 1}}, {}},
      {"Relu", {{2, 3, 4}}, {}},
      {"Softmax", {{2, 3, 4}}, {int_attr("axis", 1)}},
  };
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const InferCase& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<TensorType> types;
    std::vector<Buf> ins;
    for (const Shape& s : c.inputs) {
      types.push_back({DType::kF32, s});
      Buf b = zeros(s);
      for (float& v : b.data) v = dist(rng);
      ins.push_back(std::move(b));
    }
    auto t = infer(c.op, types, c.attrs);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    ASSERT_EQ(t->size(), 1u);
    Buf out = zeros((*t)[0].shape);
    std::vector<const Buf*> in_ptrs;
    for (const Buf& b : ins) in_ptrs.push_back(&b);
    Status s = run(c.op, in_ptrs, {&out}, c.attrs);
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
}

}  // namespace
}  // namespace loom::kernels
