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

namespace loom::kernels::reduce_testing {
namespace {

// X[k] = sum_n x[n] e^(-2 pi i k n / N) worked by hand for x = 1, 2, 3, 4:
// 10, -2 + 2i, -2, -2 - 2i.
TEST(Dft, RealSignalOnesidedInverseAndLengths) {
  Tens x = f32({1, 4, 1}, {1, 2, 3, 4});
  Call full = call("DFT", {x});
  ASSERT_TRUE(full.status.ok()) << full.status.message();
  EXPECT_EQ(full.out[0].shape, (Shape{1, 4, 2}));
  expect_near_all(full.out[0].values<float>(), {10, 0, -2, 2, -2, 0, -2, -2});
  Call half = call("DFT", {x}, {iattr("onesided", 1)});
  ASSERT_TRUE(half.status.ok()) << half.status.message();
  EXPECT_EQ(half.out[0].shape, (Shape{1, 3, 2}));
  expect_near_all(half.out[0].values<float>(), {10, 0, -2, 2, -2, 0});
  // The inverse of the full spectrum is the signal again (imaginary 0).
  Call back = call("DFT", {f32({1, 4, 2}, full.out[0].values<float>())}, {iattr("inverse", 1)});
  ASSERT_TRUE(back.status.ok()) << back.status.message();
  expect_near_all(back.out[0].values<float>(), {1, 0, 2, 0, 3, 0, 4, 0});
  // dft_length 2 truncates to 1, 2: 3, -1; 8 pads with zeros (X[0] is still 10,
  // X[4] = 1 - 2 + 3 - 4 = -2).
  Call two = call("DFT", {x, i64({}, {2})});
  ASSERT_TRUE(two.status.ok()) << two.status.message();
  expect_near_all(two.out[0].values<float>(), {3, 0, -1, 0});
  Call eight = call("DFT", {x, i64({}, {8})});
  ASSERT_TRUE(eight.status.ok()) << eight.status.message();
  EXPECT_EQ(eight.out[0].shape, (Shape{1, 8, 2}));
  EXPECT_NEAR(eight.out[0].values<float>()[0], 10, 1e-5);
  EXPECT_NEAR(eight.out[0].values<float>()[8], -2, 1e-5);
  // Along axis 2 of [1, 1, 4, 1], given as an operand in the opset-20 form.
  Call axis = call("DFT", {f32({1, 1, 4, 1}, {1, 2, 3, 4}), absent(), i64({}, {-2})}, {}, 20);
  ASSERT_TRUE(axis.status.ok()) << axis.status.message();
  expect_near_all(axis.out[0].values<float>(), {10, 0, -2, 2, -2, 0, -2, -2});
}

TEST(Dft, Errors) {
  Tens x = f32({1, 4, 1}, {1, 2, 3, 4});
  EXPECT_TRUE(contains(call("DFT", {x}, {iattr("axis", 2)}).status, "axis 2 is not a signal axis"));
  EXPECT_TRUE(contains(call("DFT", {f32({1, 2, 2}, {1, 0, 1, 0})}, {iattr("onesided", 1)}).status,
                       "onesided = 1 needs a real input"));
  EXPECT_TRUE(contains(call("DFT", {x, i64({}, {0})}).status, "'dft_length' must be in [1, 1048576], got 0"));
  EXPECT_TRUE(contains(call("DFT", {f32({4, 3}, std::vector<float>(12, 0))}).status,
                       "must end in a dimension of 1 (real) or 2 (complex)"));
}

TEST(Stft, FramesWithAndWithoutAWindow) {
  Tens s = f32({1, 6, 1}, {1, 2, 3, 4, 5, 6});
  // Frames 1..4 and 3..6: 10, -2 + 2i, -2 and 18, -2 + 2i, -2.
  Call plain = call("STFT", {s, i64({}, {2}), absent(), i64({}, {4})});
  ASSERT_TRUE(plain.status.ok()) << plain.status.message();
  EXPECT_EQ(plain.out[0].shape, (Shape{1, 2, 3, 2}));
  expect_near_all(plain.out[0].values<float>(), {10, 0, -2, 2, -2, 0, 18, 0, -2, 2, -2, 0});
  // Window 0, 1, 1, 0: the first frame is 0, 2, 3, 0: 5, -3 - 2i, 1.
  Call windowed = call("STFT", {s, i64({}, {2}), f32({4}, {0, 1, 1, 0})});
  ASSERT_TRUE(windowed.status.ok()) << windowed.status.message();
  const std::vector<float> all = windowed.out[0].values<float>();
  ASSERT_EQ(all.size(), 12u);
  std::vector<float> first(all.begin(), all.begin() + 6);
  expect_near_all(first, {5, 0, -3, -2, 1, 0});
}

TEST(Stft, Errors) {
  Tens s = f32({1, 6, 1}, {1, 2, 3, 4, 5, 6});
  EXPECT_TRUE(contains(call("STFT", {s, i64({}, {2})}).status, "give 'window' or 'frame_length'"));
  EXPECT_TRUE(contains(call("STFT", {s, i64({}, {2}), absent(), i64({}, {8})}).status,
                       "the frame length 8 is longer than the signal (6)"));
  EXPECT_TRUE(contains(call("STFT", {s, i64({}, {2}), f32({3}, {1, 1, 1}), i64({}, {4})}).status,
                       "operand 'window' has 3 values but 'frame_length' is 4"));
  EXPECT_TRUE(contains(call("STFT", {s, i64({}, {0}), absent(), i64({}, {4})}).status,
                       "operand 'frame_step' must be positive"));
}

// 2 filters over dft_length 8 at 8 kHz from 0 to 4 kHz: the 4 mel points
// (0, 536.5, 1073.0, 1609.5 mel) are 0, 426.9, 1114.2, 2220.8 Hz, bins
// floor(9 hz / 8000) = 0, 0, 1, 2. Filter 0 has an empty rising edge (1 at
// bin 0); filter 1 rises from bin 0 to 1 and falls to 0 at bin 2.
TEST(MelWeightMatrix, TriangularFiltersWorkedByHand) {
  Call m = call("MelWeightMatrix", {i64({}, {2}), i64({}, {8}), i64({}, {8000}), f32({}, {0}), f32({}, {4000})});
  ASSERT_TRUE(m.status.ok()) << m.status.message();
  EXPECT_EQ(m.out[0].shape, (Shape{5, 2}));
  expect_near_all(m.out[0].values<float>(), {1, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  EXPECT_TRUE(contains(
      call("MelWeightMatrix", {i64({}, {2}), i64({}, {8}), i64({}, {8000}), f32({}, {300}), f32({}, {100})}).status,
      "0 <= lower_edge_hertz < upper_edge_hertz <= sample_rate / 2"));
  EXPECT_TRUE(contains(
      call("MelWeightMatrix", {i64({}, {0}), i64({}, {8}), i64({}, {8000}), f32({}, {0}), f32({}, {100})}).status,
      "'num_mel_bins' must be in [1,"));
}

}  // namespace
}  // namespace loom::kernels::reduce_testing
