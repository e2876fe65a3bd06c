// The pools and the normalizations: hand-computed cases, opset forms and
// error paths.
#include "nn_test_util.hpp"

namespace loom::kernels::nntest {
namespace {

// ------------------------------------------------------------------ pools

TEST(MaxPool, ValuesAndIndicesInBothStorageOrders) {
  TBuf x = f32({1, 1, 3, 3}, iota(9));
  auto t = infer("MaxPool", {{DType::kF32, x.shape}}, {ints("kernel_shape", {2, 2})});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1].dtype, DType::kI64);
  TBuf y = out({1, 1, 2, 2});
  TBuf idx = out(DType::kI64, {1, 1, 2, 2});
  ASSERT_TRUE(run("MaxPool", {&x}, {&y, &idx}, {ints("kernel_shape", {2, 2})}).ok());
  expect_near(y.values<float>(), {5, 6, 8, 9});
  EXPECT_EQ(idx.values<int64_t>(), (std::vector<int64_t>{4, 5, 7, 8}));
  ASSERT_TRUE(run("MaxPool", {&x}, {&y, &idx}, {ints("kernel_shape", {2, 2}), iattr("storage_order", 1)}).ok());
  EXPECT_EQ(idx.values<int64_t>(), (std::vector<int64_t>{4, 7, 5, 8}));
  // Y alone is fine too.
  TBuf y1 = infer_and_run("MaxPool", {&x}, {1, 1, 2, 2}, {ints("kernel_shape", {2, 2})});
  expect_near(y1.values<float>(), {5, 6, 8, 9});
}

TEST(MaxPool, CeilModeDilationsAndUint8) {
  TBuf x = f32({1, 1, 4, 4}, iota(16));
  auto floor_t = infer("MaxPool", {{DType::kF32, x.shape}}, {ints("kernel_shape", {3, 3}), ints("strides", {2, 2})});
  ASSERT_TRUE(floor_t.ok());
  EXPECT_EQ((*floor_t)[0].shape, (Shape{1, 1, 1, 1}));
  TBuf y = infer_and_run("MaxPool", {&x}, {1, 1, 2, 2},
                         {ints("kernel_shape", {3, 3}), ints("strides", {2, 2}), iattr("ceil_mode", 1)});
  expect_near(y.values<float>(), {11, 12, 15, 16});
  TBuf x1 = f32({1, 1, 1, 5}, iota(5));
  TBuf y1 = infer_and_run("MaxPool", {&x1}, {1, 1, 1, 3}, {ints("kernel_shape", {1, 2}), ints("dilations", {1, 2})});
  expect_near(y1.values<float>(), {3, 4, 5});
  TBuf xu = typed<uint8_t>(DType::kU8, {1, 1, 4}, {7, 200, 3, 9});
  TBuf yu = infer_and_run("MaxPool", {&xu}, {1, 1, 2}, {ints("kernel_shape", {2}), ints("strides", {2})});
  EXPECT_EQ(yu.values<uint8_t>(), (std::vector<uint8_t>{200, 9}));
}

TEST(MaxPool, Errors) {
  const TensorType x{DType::kF32, {1, 1, 4, 4}};
  EXPECT_EQ(message(infer("MaxPool", {x}).status()), "MaxPool: attribute 'kernel_shape' is required");
  EXPECT_TRUE(contains(infer("MaxPool", {x}, {ints("kernel_shape", {2})}).status(), "does not match X"));
  EXPECT_TRUE(contains(infer("MaxPool", {x}, {ints("kernel_shape", {5, 5})}).status(), "exceeds the padded input"));
  EXPECT_TRUE(contains(infer("MaxPool", {x}, {ints("kernel_shape", {2, 2}), iattr("ceil_mode", 2)}).status(),
                       "'ceil_mode' must be 0 or 1"));
  EXPECT_EQ(infer("MaxPool", {{DType::kI32, {1, 1, 4, 4}}}, {ints("kernel_shape", {2, 2})}).status().code(),
            StatusCode::kUnimplemented);
  TBuf xb = f32({1, 1, 2, 2}, iota(4));
  TBuf y = out({1, 1, 1, 1});
  EXPECT_TRUE(contains(run("MaxPool", {&xb}, {&y}, {ints("kernel_shape", {2, 2}), iattr("storage_order", 3)}),
                       "'storage_order' must be 0 or 1"));
  TBuf idx = out(DType::kI32, {1, 1, 1, 1});
  EXPECT_TRUE(contains(run("MaxPool", {&xb}, {&y, &idx}, {ints("kernel_shape", {2, 2})}), "Indices has dtype i32"));
  TBuf y_bad = out({1, 1, 2, 2});
  EXPECT_EQ(message(run("MaxPool", {&xb}, {&y_bad}, {ints("kernel_shape", {2, 2})})),
            "MaxPool: output Y is [1, 1, 2, 2], expected [1, 1, 1, 1]");
  EXPECT_TRUE(contains(run("MaxPool", {}, {&y}, {ints("kernel_shape", {2, 2})}), "takes 1 input"));
}

TEST(Pools, HugeKernelOverHugePadsCostsOnlyTheValidPositions) {
  const int64_t k = int64_t{1} << 30;
  TBuf x = f32({1, 1, 1}, {8});
  std::vector<AttributeDef> a = {ints("kernel_shape", {k}), ints("pads", {k - 1, 0})};
  expect_near(infer_and_run("MaxPool", {&x}, {1, 1, 1}, a).values<float>(), {8});
  expect_near(infer_and_run("AveragePool", {&x}, {1, 1, 1}, a).values<float>(), {8});
  a.push_back(iattr("count_include_pad", 1));
  expect_near(infer_and_run("AveragePool", {&x}, {1, 1, 1}, a).values<float>(), {8.0f / static_cast<float>(k)});
}

TEST(AveragePool, CountIncludePad) {
  TBuf x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  std::vector<AttributeDef> a = {ints("kernel_shape", {2, 2}), ints("pads", {1, 1, 1, 1})};
  TBuf y = infer_and_run("AveragePool", {&x}, {1, 1, 3, 3}, a);
  expect_near(y.values<float>(), {1, 1.5f, 2, 2, 2.5f, 3, 3, 3.5f, 4});
  a.push_back(iattr("count_include_pad", 1));
  TBuf yi = infer_and_run("AveragePool", {&x}, {1, 1, 3, 3}, a);
  expect_near(yi.values<float>(), {0.25f, 0.75f, 0.5f, 1, 2.5f, 1.5f, 0.75f, 1.75f, 1});
  a.back() = iattr("count_include_pad", 5);
  TBuf y_bad = out({1, 1, 3, 3});
  EXPECT_TRUE(contains(run("AveragePool", {&x}, {&y_bad}, a), "'count_include_pad' must be 0 or 1"));
  EXPECT_EQ(infer("AveragePool", {{DType::kU8, {1, 1, 2, 2}}}, {ints("kernel_shape", {2, 2})}).status().code(),
            StatusCode::kUnimplemented);
}

TEST(GlobalPools, AverageMaxLp) {
  TBuf x = f32({1, 2, 2, 2}, iota(8));
  expect_near(infer_and_run("GlobalAveragePool", {&x}, {1, 2, 1, 1}).values<float>(), {2.5f, 6.5f});
  expect_near(infer_and_run("GlobalMaxPool", {&x}, {1, 2, 1, 1}).values<float>(), {4, 8});
  TBuf x2 = f32({1, 1, 2}, {3, 4});
  expect_near(infer_and_run("GlobalLpPool", {&x2}, {1, 1, 1}).values<float>(), {5});
  expect_near(infer_and_run("LpPool", {&x2}, {1, 1, 1}, {ints("kernel_shape", {2}), iattr("p", 1)}).values<float>(),
              {7});
  TBuf y = out({1, 1, 1});
  EXPECT_TRUE(contains(run("LpPool", {&x2}, {&y}, {ints("kernel_shape", {2}), iattr("p", 0)}), "'p' must be"));
  EXPECT_TRUE(contains(infer("GlobalAveragePool", {{DType::kF32, {2, 3}}}).status(), "must have rank 3-5"));
  EXPECT_TRUE(contains(infer("GlobalMaxPool", {{DType::kF32, {1, 1, 0}}}).status(), "empty spatial dimension"));
}

// ------------------------------------------------------------ normalizations

TEST(BatchNormalization, InferenceForm) {
  TBuf x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  TBuf scale = f32({2}, {1, 2}), b = f32({2}, {0, 1}), mean = f32({2}, {1, 3}), var = f32({2}, {1, 4});
  TBuf y = infer_and_run("BatchNormalization", {&x, &scale, &b, &mean, &var}, {1, 2, 1, 2},
                         {fattr("epsilon", 0.0f)});
  expect_near(y.values<float>(), {0, 1, 1, 2});
}

TEST(BatchNormalization, Opset7NonSpatialUsesPerElementParameters) {
  TBuf x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  TBuf ones = f32({2, 1, 2}, {1, 1, 1, 1}), zeros = f32({2, 1, 2}, {0, 0, 0, 0});
  TBuf mean = f32({2, 1, 2}, {1, 2, 3, 4});
  TBuf y = infer_and_run("BatchNormalization", {&x, &ones, &zeros, &mean, &ones}, {1, 2, 1, 2},
                         {iattr("spatial", 0), fattr("epsilon", 0.0f)}, 7);
  expect_near(y.values<float>(), {0, 0, 0, 0});
  // At opset 9 `spatial` is gone: the parameters must be [C].
  EXPECT_TRUE(contains(infer("BatchNormalization",
                             {{DType::kF32, {1, 2, 1, 2}}, {DType::kF32, {2, 1, 2}}, {DType::kF32, {2, 1, 2}},
                              {DType::kF32, {2, 1, 2}}, {DType::kF32, {2, 1, 2}}},
                             {iattr("spatial", 0)}, 9)
                           .status(),
                       "scale has shape [2, 1, 2], expected [2]"));
}

// Expected values from numpy (float64): x.mean / x.var over axes (0, 2),
// y = (x - mean) / sqrt(var + eps) * scale + B, running = input * momentum +
// batch * (1 - momentum).
TEST(BatchNormalization, TrainingModeUsesBatchStatisticsAndUpdatesRunningOnes) {
  TBuf x = f32({2, 2, 3}, {1, 2, 3, 4, 0, -2, 5, 6, 7, 1, 1, 1});
  TBuf scale = f32({2}, {1, 2}), b = f32({2}, {0, 0.5f}), mean = f32({2}, {0.5f, -1}),
       var = f32({2}, {2, 3});
  const std::vector<const TBuf*> in = {&x, &scale, &b, &mean, &var};
  TBuf y = out({2, 2, 3}), rm = out({2}), rv = out({2});
  Status s = run("BatchNormalization", in, {&y, &rm, &rv},
                 {iattr("training_mode", 1), fattr("epsilon", 0.01f), fattr("momentum", 0.8f)}, 15);
  ASSERT_TRUE(s.ok()) << s.to_string();
  // Batch mean [4, 0.8333333], population variance [4.6666667, 3.1388889].
  expect_near(y.values<float>(), {-1.38724461f, -0.92482974f, -0.46241487f, 4.06905859f, -0.43922595f,
                                  -2.69336822f, 0.46241487f, 0.92482974f, 1.38724461f, 0.68784519f,
                                  0.68784519f, 0.68784519f});
  expect_near(rm.values<float>(), {1.2f, -0.63333333f});
  expect_near(rv.values<float>(), {2.53333333f, 3.02777778f});
  // Defaults (epsilon 1e-5, momentum 0.9), opset 14, and Y alone.
  TBuf y14 = out({2, 2, 3}), rm14 = out({2}), rv14 = out({2});
  ASSERT_TRUE(run("BatchNormalization", in, {&y14, &rm14, &rv14}, {iattr("training_mode", 1)}, 14).ok());
  expect_near(y14.values<float>(), {-1.38872866f, -0.92581911f, -0.46290955f, 4.07473361f, -0.44071937f,
                                    -2.69844586f, 0.46290955f, 0.92581911f, 1.38872866f, 0.68814387f,
                                    0.68814387f, 0.68814387f});
  expect_near(rm14.values<float>(), {0.85f, -0.81666667f});
  expect_near(rv14.values<float>(), {2.26666667f, 3.01388889f});
  TBuf y_only = out({2, 2, 3});
  ASSERT_TRUE(run("BatchNormalization", in, {&y_only}, {iattr("training_mode", 1)}, 15).ok());
  expect_near(y_only.values<float>(), y14.values<float>());
  // running_mean left out, running_var asked for.
  TBuf rv_only = out({2});
  ASSERT_TRUE(run("BatchNormalization", in, {&y_only, nullptr, &rv_only}, {iattr("training_mode", 1)}, 15).ok());
  expect_near(rv_only.values<float>(), {2.26666667f, 3.01388889f});
  // The inference form of the same node ignores the batch: (x - 0.5) / sqrt(2) for channel 0.
  TBuf y_inf = out({2, 2, 3});
  ASSERT_TRUE(run("BatchNormalization", in, {&y_inf}, {fattr("epsilon", 0.0f)}, 15).ok());
  EXPECT_NEAR(y_inf.values<float>()[0], 0.35355339f, 1e-5f);
}

TEST(BatchNormalization, TrainingFormErrors) {
  TBuf x = f32({1, 1, 2}, {1, 2});
  TBuf p = f32({1}, {1});
  TBuf y = out({1, 1, 2}), m = out({1});
  const std::vector<const TBuf*> in = {&x, &p, &p, &p, &p};
  // Extra outputs without training_mode are invalid (opset 14 on).
  EXPECT_EQ(message(run("BatchNormalization", in, {&y, &m, &m}, {}, 15)),
            "BatchNormalization: training_mode is 0 but the node has 3 outputs; running_mean and "
            "running_var exist in training mode only");
  EXPECT_EQ(run("BatchNormalization", in, {&y, &m}, {iattr("training_mode", 0)}, 14).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(run("BatchNormalization", in, {&y, &m, &m, &m}, {iattr("training_mode", 1)}, 15),
                       "has 4 outputs; at most 3 (Y, running_mean, running_var)"));
  EXPECT_TRUE(contains(run("BatchNormalization", in, {&y}, {iattr("training_mode", 2)}, 15),
                       "'training_mode' must be 0 or 1, got 2"));
  EXPECT_TRUE(contains(infer("BatchNormalization", {{DType::kF32, {1, 1, 2}}, {DType::kF32, {1}}, {DType::kF32, {1}},
                                                    {DType::kF32, {1}}, {DType::kF32, {1}}},
                             {iattr("training_mode", 2)}, 15)
                           .status(),
                       "'training_mode' must be 0 or 1"));
  // A running statistic of the wrong shape or type.
  TBuf m2 = out({2});
  EXPECT_TRUE(contains(run("BatchNormalization", in, {&y, &m2}, {iattr("training_mode", 1)}, 15), "running_mean"));
  TBuf mi = out(DType::kI32, {1});
  EXPECT_TRUE(contains(run("BatchNormalization", in, {&y, &m, &mi}, {iattr("training_mode", 1)}, 15), "running_var"));
  // No element to take statistics of.
  TBuf empty = f32({0, 1, 2}, {});
  TBuf y0 = out({0, 1, 2});
  EXPECT_TRUE(contains(run("BatchNormalization", {&empty, &p, &p, &p, &p}, {&y0}, {iattr("training_mode", 1)}, 15),
                       "at least one element per channel; X has shape [0, 1, 2]"));
  // training_mode is an attribute of opset 14 on; the training outputs of
  // opsets 7-13 (mean, var, saved_mean, saved_var) are not implemented.
  EXPECT_TRUE(contains(run("BatchNormalization", in, {&y}, {iattr("training_mode", 1)}, 9),
                       "'training_mode' exists from opset 14 on"));
  Status old = run("BatchNormalization", in, {&y, &m, &m}, {}, 9);
  EXPECT_EQ(old.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(old, "training outputs of opsets 7-13"));
  // ... but outputs listed and left out are no training outputs.
  EXPECT_TRUE(run("BatchNormalization", in, {&y, nullptr, nullptr, nullptr, nullptr}, {}, 9).ok());
  // infer types every output the opset allows, so such nodes reach run().
  const TensorType c{DType::kF32, {1}};
  auto t9 = infer("BatchNormalization", {{DType::kF32, {1, 1, 2}}, c, c, c, c}, {}, 9);
  ASSERT_TRUE(t9.ok());
  EXPECT_EQ(t9->size(), 5u);
  auto t15 = infer("BatchNormalization", {{DType::kF32, {1, 1, 2}}, c, c, c, c}, {iattr("training_mode", 1)}, 15);
  ASSERT_TRUE(t15.ok());
  ASSERT_EQ(t15->size(), 3u);
  EXPECT_EQ((*t15)[2].shape, (Shape{1}));
  EXPECT_TRUE(contains(run("BatchNormalization", {&x, &p, &p, &p}, {&y}), "takes 5 inputs"));
  EXPECT_TRUE(contains(infer("BatchNormalization", {{DType::kF32, {2}}, {DType::kF32, {2}}, {DType::kF32, {2}}, {DType::kF32, {2}}, {DType::kF32, {2}}}).status(), "rank >= 2"));
}

TEST(InstanceNormalization, PerPlaneStatistics) {
  TBuf x = f32({1, 1, 2}, {1, 3});
  TBuf s = f32({1}, {2}), b = f32({1}, {1});
  TBuf y = infer_and_run("InstanceNormalization", {&x, &s, &b}, {1, 1, 2}, {fattr("epsilon", 0.0f)});
  expect_near(y.values<float>(), {-1, 3});
  TBuf bad = f32({2}, {1, 1});
  TBuf y2 = out({1, 1, 2});
  EXPECT_TRUE(contains(run("InstanceNormalization", {&x, &bad, &b}, {&y2}), "scale has shape [2], expected [1]"));
}

TEST(LayerNormalization, AxisAndOptionalOutputs) {
  TBuf x = f32({2, 2}, {1, 3, 2, 2});
  TBuf s = f32({2}, {1, 1});
  auto t = infer("LayerNormalization", {{DType::kF32, {2, 2}}, {DType::kF32, {2}}});
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[1].shape, (Shape{2, 1}));
  TBuf y = out({2, 2}), mean = out({2, 1}), inv = out({2, 1});
  ASSERT_TRUE(run("LayerNormalization", {&x, &s}, {&y, &mean, &inv}).ok());
  expect_near(y.values<float>(), {-1, 1, 0, 0});
  expect_near(mean.values<float>(), {2, 2});
  expect_near(inv.values<float>(), {1.0f / std::sqrt(1.00001f), 1.0f / std::sqrt(1e-5f)}, 1e-3f);
  // axis 0 normalizes everything; B adds per element.
  TBuf s4 = f32({2, 2}, {1, 1, 1, 1}), b4 = f32({2, 2}, {0, 0, 0, 10});
  TBuf y0 = infer_and_run("LayerNormalization", {&x, &s4, &b4}, {2, 2}, {iattr("axis", 0), fattr("epsilon", 0)});
  expect_near(y0.values<float>(), {-std::sqrt(2.0f), std::sqrt(2.0f), 0, 10});
  EXPECT_TRUE(contains(infer("LayerNormalization", {{DType::kF32, {2, 2}}, {DType::kF32, {3}}}).status(),
                       "Scale [3] does not broadcast to [2]"));
  EXPECT_TRUE(contains(infer("LayerNormalization", {{DType::kF32, {2, 2}}, {DType::kF32, {2}}}, {iattr("axis", 2)}).status(),
                       "axis 2 out of range"));
  EXPECT_EQ(infer("LayerNormalization", {{DType::kF32, {2, 2}}, {DType::kF32, {2}}}, {iattr("stash_type", 11)})
                .status()
                .code(),
            StatusCode::kUnimplemented);
  TBuf bad_mean = out({2});
  EXPECT_TRUE(contains(run("LayerNormalization", {&x, &s}, {&y, &bad_mean}), "output Mean is [2], expected [2, 1]"));
}

TEST(LpNormalization, P1AndP2) {
  TBuf x = f32({1, 2}, {3, 4});
  expect_near(infer_and_run("LpNormalization", {&x}, {1, 2}).values<float>(), {0.6f, 0.8f});
  expect_near(infer_and_run("LpNormalization", {&x}, {1, 2}, {iattr("p", 1)}).values<float>(), {3.f / 7, 4.f / 7});
  expect_near(infer_and_run("LpNormalization", {&x}, {1, 2}, {iattr("axis", 0)}).values<float>(), {1, 1});
  EXPECT_TRUE(contains(infer("LpNormalization", {{DType::kF32, {2}}}, {iattr("p", 3)}).status(), "'p' must be 1 or 2"));
}

TEST(MeanVarianceNormalization, DefaultAndExplicitAxes) {
  TBuf x = f32({1, 1, 1, 2}, {1, 3});
  expect_near(infer_and_run("MeanVarianceNormalization", {&x}, {1, 1, 1, 2}).values<float>(), {-1, 1});
  TBuf x2 = f32({2, 2}, {1, 3, 5, 5});
  expect_near(infer_and_run("MeanVarianceNormalization", {&x2}, {2, 2}, {ints("axes", {1})}).values<float>(),
              {-1, 1, 0, 0});
  EXPECT_TRUE(contains(infer("MeanVarianceNormalization", {{DType::kF32, {2, 2}}}).status(), "axis 2 out of range"));
}

}  // namespace
}  // namespace loom::kernels::nntest
