// TopK, CumSum, Einsum, Softmax, LogSoftmax and Hardmax: hand-computed
// values, the opset forms, and the error paths.
#include <gtest/gtest.h>

#include <cmath>

#include "reduce_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace reduce_testing;

// ---------------------------------------------------------------- TopK

TEST(TopK, LargestAlongLastAxisWithKInput) {
  Tens x = f32({2, 4}, {1, 4, 2, 3, 8, 5, 7, 6});
  Call r = call("TopK", {x, i64({1}, {2})}, {}, 11);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  ASSERT_EQ(r.out.size(), 2u);
  EXPECT_EQ(r.out[0].shape, (Shape{2, 2}));
  expect_near_all(r.out[0].values<float>(), {4, 3, 8, 7});
  EXPECT_EQ(r.out[1].values<int64_t>(), (std::vector<int64_t>{1, 3, 0, 2}));
}

TEST(TopK, SmallestAndTiesKeepTheLowerIndex) {
  Tens x = f32({5}, {3, 1, 2, 1, 3});
  Call s = call("TopK", {x, i64({1}, {3})}, {iattr("largest", 0)}, 11);
  ASSERT_TRUE(s.status.ok());
  expect_near_all(s.out[0].values<float>(), {1, 1, 2});
  EXPECT_EQ(s.out[1].values<int64_t>(), (std::vector<int64_t>{1, 3, 2}));
  Call l = call("TopK", {x, i64({1}, {2})}, {}, 11);
  ASSERT_TRUE(l.status.ok());
  EXPECT_EQ(l.out[1].values<int64_t>(), (std::vector<int64_t>{0, 4}));
}

TEST(TopK, KAttributeBeforeOpset10AndAxis) {
  Tens x = f32({3, 2}, {1, 6, 5, 2, 3, 4});
  Call r = call("TopK", {x}, {iattr("k", 1), iattr("axis", 0)}, 9);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{1, 2}));
  expect_near_all(r.out[0].values<float>(), {5, 6});
  EXPECT_EQ(r.out[1].values<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(TopK, IntegerInput) {
  Call r = call("TopK", {make<int32_t>({3}, {5, -1, 9}), i64({1}, {1})}, {}, 11);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.out[0].values<int32_t>(), (std::vector<int32_t>{9}));
}

TEST(TopK, Errors) {
  Tens x = f32({3}, {1, 2, 3});
  EXPECT_EQ(call("TopK", {x, i64({1}, {4})}, {}, 11).status.message(),
            "TopK: k 4 must be in [0, 3] for input of shape [3] along axis -1");
  EXPECT_TRUE(contains(call("TopK", {x, i64({2}, {1, 1})}, {}, 11).status,
                       "input 'K' must hold exactly one value"));
  EXPECT_TRUE(contains(call("TopK", {x}, {}, 11).status, "TopK: takes 2 inputs, got 1"));
  EXPECT_EQ(call("TopK", {x}, {}, 9).status.message(), "TopK: attribute 'k' is missing");
  EXPECT_TRUE(contains(call("TopK", {x}, {iattr("k", 1), iattr("axis", 1)}, 9).status,
                       "'axis' 1 is out of range"));
  auto t = infer_types("TopK", {{DType::kF32, {3}}, {DType::kI64, {1}}}, {}, 11);
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  Tens v = empty_like(DType::kF32, {2});
  Tens i = empty_like(DType::kI32, {2});
  EXPECT_TRUE(contains(run_with("TopK", {x, i64({1}, {2})}, {v, i}, {}, 11),
                       "operand 'Indices' has dtype i32, expected i64"));
  Tens i2 = empty_like(DType::kI64, {3});
  EXPECT_EQ(run_with("TopK", {x, i64({1}, {2})}, {v, i2}, {}, 11).message(),
            "TopK: output Indices is [3], expected [2]");
}

// ---------------------------------------------------------------- CumSum

TEST(CumSum, ForwardExclusiveReverse) {
  Tens x = f32({4}, {1, 2, 3, 4});
  Tens axis = make<int32_t>({}, {0});
  Call a = call("CumSum", {x, axis});
  ASSERT_TRUE(a.status.ok()) << a.status.message();
  expect_near_all(a.out[0].values<float>(), {1, 3, 6, 10});
  Call e = call("CumSum", {x, axis}, {iattr("exclusive", 1)});
  expect_near_all(e.out[0].values<float>(), {0, 1, 3, 6});
  Call r = call("CumSum", {x, axis}, {iattr("reverse", 1)});
  expect_near_all(r.out[0].values<float>(), {10, 9, 7, 4});
  Call re = call("CumSum", {x, axis}, {iattr("reverse", 1), iattr("exclusive", 1)});
  expect_near_all(re.out[0].values<float>(), {9, 7, 4, 0});
}

TEST(CumSum, InnerAxisAndIntegers) {
  Tens x = make<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Call r = call("CumSum", {x, i64({1}, {-1})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].values<int64_t>(), (std::vector<int64_t>{1, 3, 6, 4, 9, 15}));
  Call c = call("CumSum", {x, i64({}, {0})});
  EXPECT_EQ(c.out[0].values<int64_t>(), (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));
}

TEST(CumSum, Errors) {
  Tens x = f32({2}, {1, 2});
  EXPECT_EQ(call("CumSum", {x, i64({}, {1})}).status.message(),
            "CumSum: 'axis' 1 is out of range for input of shape [2]");
  EXPECT_TRUE(contains(call("CumSum", {x, i64({2}, {0, 0})}).status, "must be a scalar"));
  EXPECT_TRUE(contains(call("CumSum", {x, f32({}, {0})}).status, "must be i32 or i64"));
  EXPECT_TRUE(contains(call("CumSum", {x}).status, "takes 2 inputs, got 1"));
  EXPECT_TRUE(contains(call("CumSum", {f32({}, {1}), i64({}, {0})}).status, "not be a scalar"));
}

// ---------------------------------------------------------------- Einsum

Call einsum(const std::string& eq, const std::vector<Tens>& in) {
  return call("Einsum", in, {str_attr("equation", eq)}, 12);
}

TEST(Einsum, MatMulAndTranspose) {
  Tens a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tens b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  Call m = einsum("ij,jk->ik", {a, b});
  ASSERT_TRUE(m.status.ok()) << m.status.message();
  EXPECT_EQ(m.out[0].shape, (Shape{2, 2}));
  expect_near_all(m.out[0].values<float>(), {4, 5, 10, 11});
  Call t = einsum("ij->ji", {a});
  EXPECT_EQ(t.out[0].shape, (Shape{3, 2}));
  expect_near_all(t.out[0].values<float>(), {1, 4, 2, 5, 3, 6});
  // Implicit output: the letters seen once, in order: "ji" gives "ij" (a copy).
  Call i = einsum("ji", {a});
  EXPECT_EQ(i.out[0].shape, (Shape{3, 2}));
  expect_near_all(i.out[0].values<float>(), {1, 4, 2, 5, 3, 6});
}

TEST(Einsum, TraceDiagonalSumAndInnerProduct) {
  Tens sq = f32({2, 2}, {1, 2, 3, 4});
  Call tr = einsum("ii", {sq});
  ASSERT_TRUE(tr.status.ok()) << tr.status.message();
  EXPECT_EQ(tr.out[0].shape, (Shape{}));
  expect_near_all(tr.out[0].values<float>(), {5});
  Call dg = einsum("ii->i", {sq});
  expect_near_all(dg.out[0].values<float>(), {1, 4});
  Call s = einsum("ij->", {sq});
  expect_near_all(s.out[0].values<float>(), {10});
  Tens v = f32({3}, {1, 2, 3});
  Call ip = einsum("i,i", {v, v});
  expect_near_all(ip.out[0].values<float>(), {14});
  Call outer = einsum("i,j->ij", {v, f32({2}, {1, 10})});
  expect_near_all(outer.out[0].values<float>(), {1, 10, 2, 20, 3, 30});
}

TEST(Einsum, EllipsisBroadcastsBatchDimensions) {
  Tens a = f32({2, 1, 2}, {1, 2, 3, 4});   // two [1, 2] matrices
  Tens b = f32({2, 1}, {1, 1});            // one [2, 1] matrix, broadcast
  Call r = einsum("...ij,...jk->...ik", {a, b});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{2, 1, 1}));
  expect_near_all(r.out[0].values<float>(), {3, 7});
  // Batch diagonal, implicit output with an ellipsis first.
  Tens c = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Call d = einsum("...ii->...i", {c});
  expect_near_all(d.out[0].values<float>(), {1, 4, 5, 8});
  Call imp = einsum("...ii", {c});
  ASSERT_TRUE(imp.status.ok());
  expect_near_all(imp.out[0].values<float>(), {5, 13});
}

TEST(Einsum, IntegersAndDouble) {
  Call i = einsum("i,i->", {make<int32_t>({2}, {3, 4}), make<int32_t>({2}, {5, 6})});
  ASSERT_TRUE(i.status.ok());
  EXPECT_EQ(i.out[0].values<int32_t>(), (std::vector<int32_t>{39}));
  Call d = einsum("i->", {make<double>({2}, {0.5, 0.25})});
  EXPECT_EQ(d.out[0].values<double>(), (std::vector<double>{0.75}));
}

TEST(Einsum, Errors) {
  Tens a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(contains(einsum("ij,jk->ik", {a}).status, "has 2 operand terms but the node has 1"));
  EXPECT_TRUE(contains(einsum("ijk->i", {a}).status, "term 0 has 3 subscripts"));
  EXPECT_TRUE(contains(einsum("ij,ij->i", {a, f32({3, 2}, {0, 0, 0, 0, 0, 0})}).status,
                       "a subscript has size"));
  EXPECT_TRUE(contains(einsum("ij->k", {a}).status, "occurs in no input"));
  EXPECT_TRUE(contains(einsum("ij->ii", {a}).status, "occurs twice"));
  EXPECT_TRUE(contains(einsum("i.j->", {a}).status, "'...'"));
  EXPECT_TRUE(contains(einsum("i1->", {a}).status, "unexpected character '1'"));
  EXPECT_TRUE(contains(einsum("...j->j", {a}).status, "the output has no '...'"));
  // An ellipsis that covers no dimension needs none in the output.
  EXPECT_TRUE(einsum("...ij->ij", {a}).status.ok());
  EXPECT_TRUE(contains(call("Einsum", {a}, {}, 12).status, "attribute 'equation' is missing"));
  EXPECT_TRUE(contains(einsum("ij,ij->", {a, make<int32_t>({2, 3}, {0, 0, 0, 0, 0, 0})}).status,
                       "has dtype i32, input 0 has f32"));
  Tens y = empty_like(DType::kF32, {2});
  EXPECT_EQ(run_with("Einsum", {a}, {y}, {str_attr("equation", "ij->j")}, 12).message(),
            "Einsum: output Output is [2], expected [3]");
}

// ---------------------------------------------------------------- Softmax family

TEST(Softmax, Opset13WorksAlongOneAxis) {
  Tens x = f32({2, 2}, {0, 1, 0, 1});
  Call r = call("Softmax", {x}, {iattr("axis", 0)}, 13);
  ASSERT_TRUE(r.status.ok());
  expect_near_all(r.out[0].values<float>(), {0.5f, 0.5f, 0.5f, 0.5f});
}

TEST(Softmax, BeforeOpset13CoercesTo2D) {
  // [1, 2, 2] with the default axis 1: one row of four values.
  Tens x = f32({1, 2, 2}, {0, 0, 0, 0});
  Call r = call("Softmax", {x}, {}, 11);
  ASSERT_TRUE(r.status.ok());
  expect_near_all(r.out[0].values<float>(), {0.25f, 0.25f, 0.25f, 0.25f});
  // The same input at opset 13 normalizes along the last axis only.
  Call n = call("Softmax", {x}, {}, 13);
  expect_near_all(n.out[0].values<float>(), {0.5f, 0.5f, 0.5f, 0.5f});
}

TEST(LogSoftmax, ValuesAndStability) {
  Call r = call("LogSoftmax", {f32({2}, {1000, 1000})}, {}, 13);
  ASSERT_TRUE(r.status.ok());
  expect_near_all(r.out[0].values<float>(), {-std::log(2.0f), -std::log(2.0f)});
  Call o = call("LogSoftmax", {f32({2, 2}, {0, 0, 0, 0})}, {iattr("axis", 0)}, 11);
  expect_near_all(o.out[0].values<float>(), {-std::log(4.0f), -std::log(4.0f), -std::log(4.0f),
                                             -std::log(4.0f)});
}

TEST(Hardmax, FirstMaximumWins) {
  Tens x = f32({2, 3}, {1, 3, 3, 5, 2, 0});
  Call r = call("Hardmax", {x}, {}, 13);
  ASSERT_TRUE(r.status.ok());
  expect_near_all(r.out[0].values<float>(), {0, 1, 0, 1, 0, 0});
  Call old = call("Hardmax", {x}, {iattr("axis", 0)}, 11);
  expect_near_all(old.out[0].values<float>(), {0, 0, 0, 1, 0, 0});
}

TEST(Softmax, DoubleInput) {
  Call r = call("Softmax", {make<double>({2}, {0.0, 0.0})}, {}, 13);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.out[0].values<double>(), (std::vector<double>{0.5, 0.5}));
}

TEST(Softmax, HalfInput) {
  Call r = call("Softmax", {make<Half>({2}, {to_half(1.0f), to_half(1.0f)})}, {}, 13);
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(to_float(r.out[0].values<Half>()[1]), 0.5f);
}

TEST(Softmax, Errors) {
  EXPECT_EQ(call("LogSoftmax", {f32({2}, {1, 2})}, {iattr("axis", 1)}, 13).status.message(),
            "LogSoftmax: axis 1 is out of range for input of shape [2] (rank 1)");
  // The old default axis 1 is out of range for a vector.
  EXPECT_FALSE(call("Softmax", {f32({2}, {1, 2})}, {}, 11).status.ok());
  Call i = call("Hardmax", {make<int32_t>({2}, {1, 2})}, {}, 13);
  EXPECT_EQ(i.status.code(), StatusCode::kUnimplemented);
  Tens y = empty_like(DType::kF64, {2});
  EXPECT_TRUE(contains(run_with("Softmax", {f32({2}, {1, 2})}, {y}, {}, 13),
                       "operand 'output' has dtype f64, expected f32"));
}

}  // namespace
}  // namespace loom::kernels
