// The Reduce* operators and ArgMax/ArgMin: hand-computed values, the opset
// forms of axes, and every error path.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "reduce_test_util.hpp"

namespace loom::kernels {
namespace {

using namespace reduce_testing;

// x = [[1, 2, 3], [4, 5, 6]]
Tens x23() { return f32({2, 3}, {1, 2, 3, 4, 5, 6}); }

TEST(Reduce, EveryKindAlongTheLastAxis) {
  struct Case {
    const char* op;
    std::vector<float> want;
  };
  const double l2a = std::sqrt(14.0), l2b = std::sqrt(77.0);
  const double lse_a = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double lse_b = std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0));
  for (const Case& c : std::vector<Case>{
           {"ReduceSum", {6, 15}},
           {"ReduceMean", {2, 5}},
           {"ReduceMax", {3, 6}},
           {"ReduceMin", {1, 4}},
           {"ReduceProd", {6, 120}},
           {"ReduceL1", {6, 15}},
           {"ReduceL2", {static_cast<float>(l2a), static_cast<float>(l2b)}},
           {"ReduceLogSum", {std::log(6.0f), std::log(15.0f)}},
           {"ReduceLogSumExp", {static_cast<float>(lse_a), static_cast<float>(lse_b)}},
           {"ReduceSumSquare", {14, 77}},
       }) {
    // Opset 11: axes are an attribute for every operator.
    Call r = call(c.op, {x23()}, {ints_attr("axes", {1}), iattr("keepdims", 0)}, 11);
    ASSERT_TRUE(r.status.ok()) << c.op << ": " << r.status.message();
    EXPECT_EQ(r.out[0].shape, (Shape{2})) << c.op;
    expect_near_all(r.out[0].values<float>(), c.want);
  }
}

TEST(Reduce, KeepdimsAndDefaultAxesReduceEverything) {
  Call r = call("ReduceMean", {x23()}, {}, 13);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{1, 1}));
  expect_near_all(r.out[0].values<float>(), {3.5f});
  Call s = call("ReduceMax", {x23()}, {iattr("keepdims", 0)}, 13);
  ASSERT_TRUE(s.status.ok());
  EXPECT_EQ(s.out[0].shape, (Shape{}));
  expect_near_all(s.out[0].values<float>(), {6});
}

TEST(Reduce, NegativeAndMultipleAxes) {
  Tens x = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  Call r = call("ReduceSum", {x}, {ints_attr("axes", {0, -1})}, 11);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{1, 2, 1}));
  expect_near_all(r.out[0].values<float>(), {1 + 2 + 5 + 6, 3 + 4 + 7 + 8});
}

TEST(Reduce, SumTakesAxesAsAnInputFromOpset13) {
  Tens axes = i64({1}, {0});
  Call r = call("ReduceSum", {x23(), axes}, {iattr("keepdims", 0)}, 13);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  expect_near_all(r.out[0].values<float>(), {5, 7, 9});
  // Left out or empty: every axis.
  Call all = call("ReduceSum", {x23(), absent()}, {}, 13);
  ASSERT_TRUE(all.status.ok()) << all.status.message();
  expect_near_all(all.out[0].values<float>(), {21});
  Call e = call("ReduceSum", {x23(), i64({0}, {})}, {}, 13);
  ASSERT_TRUE(e.status.ok());
  expect_near_all(e.out[0].values<float>(), {21});
  // noop_with_empty_axes: the input unchanged.
  Call noop = call("ReduceSum", {x23(), i64({0}, {})}, {iattr("noop_with_empty_axes", 1)}, 13);
  ASSERT_TRUE(noop.status.ok());
  EXPECT_EQ(noop.out[0].shape, (Shape{2, 3}));
  expect_near_all(noop.out[0].values<float>(), {1, 2, 3, 4, 5, 6});
}

TEST(Reduce, AxesInputBeforeItsOpsetIsRejected) {
  Tens axes = i64({1}, {0});
  Call r = call("ReduceSum", {x23(), axes}, {}, 11);
  EXPECT_FALSE(r.status.ok());
  EXPECT_TRUE(contains(r.status, "ReduceSum: takes 1 inputs, got 2")) << r.status.message();
  Call m = call("ReduceMean", {x23(), axes}, {}, 13);
  EXPECT_FALSE(m.status.ok());
}

TEST(Reduce, EveryOperatorTakesAxesAsAnInputFromOpset18) {
  Call r = call("ReduceMean", {x23(), i64({1}, {1})}, {iattr("keepdims", 0)}, 18);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  expect_near_all(r.out[0].values<float>(), {2, 5});
  // Opset 0 means the newest form.
  Call n = call("ReduceMax", {x23(), i64({1}, {0})}, {iattr("keepdims", 0)});
  ASSERT_TRUE(n.status.ok()) << n.status.message();
  expect_near_all(n.out[0].values<float>(), {4, 5, 6});
}

TEST(Reduce, AxesInputMustBeConstantAtInfer) {
  auto t = infer_types("ReduceSum", {{DType::kF32, {2, 3}}, {DType::kI64, {1}}}, {}, 13);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(contains(t.status(), "'axes'")) << t.status().message();
}

TEST(Reduce, BadAxesAreRejected) {
  Call r = call("ReduceMax", {x23()}, {ints_attr("axes", {2})}, 11);
  EXPECT_EQ(r.status.message(),
            "ReduceMax: 'axes' value 2 is out of range for input of shape [2, 3]");
  Call d = call("ReduceMin", {x23()}, {ints_attr("axes", {1, -1})}, 11);
  EXPECT_EQ(d.status.message(), "ReduceMin: 'axes' names axis -1 twice");
}

TEST(Reduce, IntegerTypes) {
  Tens x = make<int32_t>({2, 2}, {1, -2, 3, 4});
  Call s = call("ReduceSum", {x}, {ints_attr("axes", {0}), iattr("keepdims", 0)}, 11);
  ASSERT_TRUE(s.status.ok()) << s.status.message();
  EXPECT_EQ(s.out[0].dtype, DType::kI32);
  EXPECT_EQ(s.out[0].values<int32_t>(), (std::vector<int32_t>{4, 2}));
  Call m = call("ReduceMin", {make<uint8_t>({3}, {7, 2, 9})}, {}, 11);
  ASSERT_TRUE(m.status.ok());
  EXPECT_EQ(m.out[0].values<uint8_t>(), (std::vector<uint8_t>{2}));
  Call p = call("ReduceProd", {make<int64_t>({3}, {-2, 3, 4})}, {}, 11);
  ASSERT_TRUE(p.status.ok());
  EXPECT_EQ(p.out[0].values<int64_t>(), (std::vector<int64_t>{-24}));
  Call l1 = call("ReduceL1", {make<int8_t>({3}, {-2, 3, -4})}, {}, 11);
  ASSERT_TRUE(l1.status.ok());
  EXPECT_EQ(l1.out[0].values<int8_t>(), (std::vector<int8_t>{9}));
  // Integer overflow wraps rather than being undefined.
  Call w = call("ReduceSum", {make<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 1})}, {}, 11);
  ASSERT_TRUE(w.status.ok());
  EXPECT_EQ(w.out[0].values<int32_t>(), (std::vector<int32_t>{std::numeric_limits<int32_t>::min()}));
}

TEST(Reduce, DoubleAndHalf) {
  Call d = call("ReduceMean", {make<double>({2}, {1.0, 2.0})}, {}, 11);
  ASSERT_TRUE(d.status.ok());
  EXPECT_EQ(d.out[0].values<double>(), (std::vector<double>{1.5}));
  Call h = call("ReduceSum", {make<Half>({2}, {to_half(1.5f), to_half(2.0f)})}, {}, 11);
  ASSERT_TRUE(h.status.ok());
  EXPECT_EQ(to_float(h.out[0].values<Half>()[0]), 3.5f);
}

TEST(Reduce, EmptyReductionGivesTheIdentity) {
  Tens x = f32({2, 0}, {});
  Call s = call("ReduceSum", {x}, {ints_attr("axes", {1})}, 11);
  ASSERT_TRUE(s.status.ok());
  expect_near_all(s.out[0].values<float>(), {0, 0});
  Call p = call("ReduceProd", {x}, {ints_attr("axes", {1})}, 11);
  ASSERT_TRUE(p.status.ok());
  expect_near_all(p.out[0].values<float>(), {1, 1});
}

// Found by tests/fuzz (onnx_import, constant folding): an empty input whose
// other dimensions multiply past 2^63 overflowed the kernel's stride
// products (UBSan: signed integer overflow: 294911 * 9223372036854775806).
TEST(Reduce, EmptyInputWithHugeDimensionsIsRefusedNotOverflowed) {
  const int64_t huge = int64_t{1} << 62;
  Tens x = f32({0, huge, 4}, {});
  Tens y = empty_like(DType::kF32, {0});
  const Status s = run_with("ReduceSum", {x}, {y}, {ints_attr("axes", {1, 2}), iattr("keepdims", 0)}, 11);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s, "ReduceSum: input 'data' of shape [0, 4611686018427387904, 4] has dimensions "
                          "that multiply past 2^63")) << s.message();
}

TEST(Reduce, LogSumExpIsStableForLargeInputs) {
  Call r = call("ReduceLogSumExp", {f32({2}, {1000, 1000})}, {}, 11);
  ASSERT_TRUE(r.status.ok());
  expect_near_all(r.out[0].values<float>(), {1000 + std::log(2.0f)}, 1e-3f);
}

TEST(Reduce, MaxPropagatesNaN) {
  Call r = call("ReduceMax", {f32({3}, {1, std::nanf(""), 2})}, {}, 11);
  ASSERT_TRUE(r.status.ok());
  EXPECT_TRUE(std::isnan(r.out[0].values<float>()[0]));
}

TEST(Reduce, RunChecksOperands) {
  Tens y = empty_like(DType::kF32, {2});
  EXPECT_EQ(run_with("ReduceSum", {x23()}, {y}, {ints_attr("axes", {1})}, 11).message(),
            "ReduceSum: output reduced is [2], expected [2, 1]");
  Tens yi = empty_like(DType::kI32, {2, 1});
  EXPECT_TRUE(contains(run_with("ReduceSum", {x23()}, {yi}, {ints_attr("axes", {1})}, 11),
                       "operand 'reduced' has dtype i32, expected f32"));
  Tens short_x = x23();
  short_x.bytes.resize(8);
  EXPECT_TRUE(contains(run_with("ReduceSum", {short_x}, {y}, {}, 11), "operand 'data'"));
  EXPECT_TRUE(contains(run_with("ReduceSum", {}, {y}, {}, 11), "takes 1 inputs, got 0"));
  EXPECT_TRUE(contains(run_with("ReduceSum", {x23()}, {}, {}, 11), "produces 1 outputs, got 0"));
}

TEST(Reduce, BoolIsUnimplemented) {
  Call r = call("ReduceMax", {bools({2}, {1, 0})}, {}, 11);
  EXPECT_EQ(r.status.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(r.status.message(), "ReduceMax: input 'data' has dtype i1, which is not supported");
}

// ---------------------------------------------------------------- ArgMax / ArgMin

TEST(ArgMax, DefaultAxisZeroKeepdims) {
  Call r = call("ArgMax", {f32({2, 2}, {1, 5, 3, 2})});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].dtype, DType::kI64);
  EXPECT_EQ(r.out[0].shape, (Shape{1, 2}));
  EXPECT_EQ(r.out[0].values<int64_t>(), (std::vector<int64_t>{1, 0}));
}

TEST(ArgMin, AxisNoKeepdims) {
  Call r = call("ArgMin", {f32({2, 3}, {3, 1, 2, 0, 9, -1})},
                {iattr("axis", -1), iattr("keepdims", 0)});
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.out[0].shape, (Shape{2}));
  EXPECT_EQ(r.out[0].values<int64_t>(), (std::vector<int64_t>{1, 2}));
}

TEST(ArgMax, TiesPickFirstOrLastIndex) {
  Tens x = make<int32_t>({4}, {2, 7, 7, 1});
  Call first = call("ArgMax", {x}, {iattr("keepdims", 0)});
  ASSERT_TRUE(first.status.ok());
  EXPECT_EQ(first.out[0].values<int64_t>(), (std::vector<int64_t>{1}));
  Call last = call("ArgMax", {x}, {iattr("keepdims", 0), iattr("select_last_index", 1)}, 12);
  ASSERT_TRUE(last.status.ok());
  EXPECT_EQ(last.out[0].values<int64_t>(), (std::vector<int64_t>{2}));
  Call min_last = call("ArgMin", {make<int32_t>({3}, {1, 5, 1})},
                       {iattr("select_last_index", 1)}, 12);
  ASSERT_TRUE(min_last.status.ok());
  EXPECT_EQ(min_last.out[0].values<int64_t>(), (std::vector<int64_t>{2}));
}

TEST(ArgMax, Errors) {
  EXPECT_EQ(call("ArgMax", {x23()}, {iattr("axis", 2)}).status.message(),
            "ArgMax: 'axis' 2 is out of range for input of shape [2, 3]");
  EXPECT_TRUE(contains(call("ArgMax", {f32({}, {1})}).status, "must not be a scalar"));
  EXPECT_TRUE(contains(call("ArgMin", {f32({0, 2}, {})}).status, "is empty along axis 0"));
  Tens y = empty_like(DType::kF32, {1, 3});
  EXPECT_TRUE(contains(run_with("ArgMax", {x23()}, {y}), "operand 'reduced' has dtype f32"));
  Tens y2 = empty_like(DType::kI64, {2, 3});
  EXPECT_EQ(run_with("ArgMax", {x23()}, {y2}).message(),
            "ArgMax: output reduced is [2, 3], expected [1, 3]");
}

}  // namespace
}  // namespace loom::kernels
