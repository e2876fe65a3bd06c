// EyeLike, the window functions, and the opset 18-19 forms of Pad (axes,
// wrap) and of the scatters (max/min reductions): values worked by hand and
// the error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "reduce_test_util.hpp"

namespace loom::kernels::reduce_testing {
namespace {

TEST(EyeLike, DiagonalWithOffsetAndDtype) {
  Call r = call("EyeLike", {f32({2, 3}, {9, 9, 9, 9, 9, 9})}, {iattr("k", 1)});
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].values<float>(), (std::vector<float>{0, 1, 0, 0, 0, 1}));
  Call i = call("EyeLike", {f32({2, 2}, {0, 0, 0, 0})}, {iattr("dtype", 7), iattr("k", -1)});
  ASSERT_TRUE(i.status.ok());
  EXPECT_EQ(i.out[0].values<int64_t>(), (std::vector<int64_t>{0, 0, 1, 0}));
  // An offset past the matrix leaves it zero, without overflow.
  Call far = call("EyeLike", {f32({2, 2}, {0, 0, 0, 0})}, {iattr("k", INT64_MAX)});
  ASSERT_TRUE(far.status.ok());
  EXPECT_EQ(far.out[0].values<float>(), (std::vector<float>{0, 0, 0, 0}));
}

TEST(EyeLike, Errors) {
  EXPECT_EQ(call("EyeLike", {f32({3}, {0, 0, 0})}).status.message(),
            "EyeLike: operand 'input' must be 2-D, got shape [3]");
  EXPECT_TRUE(contains(call("EyeLike", {f32({1, 1}, {0})}, {iattr("dtype", 99)}).status,
                       "EyeLike: attribute 'dtype' is 99, not an ONNX data type"));
}

TEST(Windows, PeriodicAndSymmetric) {
  Call hann = call("HannWindow", {i64({}, {4})});
  ASSERT_TRUE(hann.status.ok()) << hann.status.message();
  expect_near_all(hann.out[0].values<float>(), {0, 0.5f, 1, 0.5f});
  Call sym = call("HannWindow", {i64({}, {3})}, {iattr("periodic", 0)});
  ASSERT_TRUE(sym.status.ok());
  expect_near_all(sym.out[0].values<float>(), {0, 1, 0});
  Call hamming = call("HammingWindow", {i64({}, {2})});
  ASSERT_TRUE(hamming.status.ok());
  expect_near_all(hamming.out[0].values<float>(), {25.0f / 46 - 21.0f / 46, 25.0f / 46 + 21.0f / 46});
  Call blackman = call("BlackmanWindow", {i64({}, {2})}, {iattr("output_datatype", 11)});
  ASSERT_TRUE(blackman.status.ok());
  EXPECT_EQ(blackman.out[0].dtype, DType::kF64);
  EXPECT_NEAR(blackman.out[0].values<double>()[1], 0.42 + 0.5 + 0.08, 1e-12);
}

TEST(Windows, Errors) {
  EXPECT_TRUE(contains(call("HannWindow", {i64({}, {-1})}).status,
                       "HannWindow: operand 'size' must be in [0, 268435456], got -1"));
  EXPECT_TRUE(contains(call("HannWindow", {f32({}, {4})}).status,
                       "operand 'size' must be int32 or int64"));
  EXPECT_TRUE(contains(call("HammingWindow", {i64({}, {4})}, {iattr("periodic", 2)}).status,
                       "attribute 'periodic' must be 0 or 1"));
  EXPECT_TRUE(contains(call("BlackmanWindow", {i64({}, {4})}, {iattr("output_datatype", 9)}).status,
                       "must name a numeric type"));
  // Not a constant: the size decides the shape.
  auto types = infer_types("HannWindow", {TensorType{DType::kI64, {}, nullptr}});
  ASSERT_FALSE(types.ok());
  EXPECT_EQ(types.status().code(), StatusCode::kFailedPrecondition);
}

TEST(PadOpset18, AxesInputAndWrapMode) {
  Tens x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  // Pad only axis 1 (given as -1) by 1 before and 2 after, wrapping.
  Call r = call("Pad", {x, i64({2}, {1, 2}), absent(), i64({1}, {-1})}, {str_attr("mode", "wrap")}, 19);
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.out[0].shape, (Shape{2, 6}));
  expect_near_all(r.out[0].values<float>(), {3, 1, 2, 3, 1, 2, 6, 4, 5, 6, 4, 5});
  EXPECT_TRUE(contains(call("Pad", {x, i64({2}, {1, 2}), absent(), i64({1}, {2})}, {}, 18).status,
                       "Pad: axis 2 out of range for rank 2"));
  EXPECT_TRUE(contains(call("Pad", {x, i64({4}, {1, 2, 0, 0}), absent(), i64({1}, {0})}, {}, 18).status,
                       "'pads' has 4 entries, expected 2 for 'axes' [0]"));
  EXPECT_TRUE(contains(call("Pad", {x, i64({4}, {1, 1, 1, 1}), absent(), i64({2}, {0, -2})}, {}, 18).status,
                       "repeats an axis"));
  EXPECT_TRUE(contains(call("Pad", {x, i64({4}, {0, 0, 0, 0})}, {str_attr("mode", "wrap")}, 18).status,
                       "unknown 'mode' 'wrap'"));
}

TEST(ScatterOpset18, MaxAndMinReductions) {
  Tens data = f32({4}, {5, 5, 5, 5});
  Tens idx = i64({3}, {0, 0, 3});
  Tens upd = f32({3}, {7, 9, 1});
  Call mx = call("ScatterElements", {data, idx, upd}, {str_attr("reduction", "max")}, 18);
  ASSERT_TRUE(mx.status.ok()) << mx.status.message();
  expect_near_all(mx.out[0].values<float>(), {9, 5, 5, 5});
  Call mn = call("ScatterND", {data, i64({2, 1}, {1, 2}), f32({2}, {3, 8})}, {str_attr("reduction", "min")}, 18);
  ASSERT_TRUE(mn.status.ok()) << mn.status.message();
  expect_near_all(mn.out[0].values<float>(), {5, 3, 5, 5});
  EXPECT_TRUE(contains(call("ScatterElements", {data, idx, upd}, {str_attr("reduction", "max")}, 16).status,
                       "ScatterElements: unknown 'reduction' 'max'"));
}

}  // namespace
}  // namespace loom::kernels::reduce_testing
