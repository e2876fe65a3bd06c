// Resize and ConvTranspose through the vulkan-compute compile entries: the
// compiled blobs run on the device and match host loops in double precision
// written from the ONNX formulas, and attribute values the plugin does not
// compute exactly are not claimed.
#include <cmath>

#include "compile_harness.hpp"

namespace loom::vulkan::test {
namespace {

struct ResizeCase {
  std::string mode, coord, nearest;
  std::vector<double> scales;  // per axis; from sizes when the node has sizes
  Dims out;
};

// The input coordinate along one axis, as the ONNX Resize formulas define it.
double host_source(const ResizeCase& c, double scale, int64_t in, int64_t out, int64_t o) {
  const double x = static_cast<double>(o);
  if (c.coord == "asymmetric") return x / scale;
  if (c.coord == "align_corners") return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
  if (c.coord == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  if (c.coord == "pytorch_half_pixel" && out == 1) return -0.5;
  return (x + 0.5) / scale - 0.5;
}

// Resize of x (shape `in`): for every output element each axis picks two
// input positions and their weights (nearest: one position, weight 1), and
// the value is the weighted sum over all combinations.
std::vector<double> resize_reference(const std::vector<float>& x, const Dims& in, const ResizeCase& c) {
  const size_t rank = in.size();
  size_t count = 1;
  for (int64_t d : c.out) count *= static_cast<size_t>(d);
  std::vector<double> y(count);
  for (size_t i = 0; i < count; ++i) {
    std::vector<int64_t> pos[2];
    std::vector<double> weight[2];
    size_t rem = i;
    std::vector<int64_t> o(rank);
    for (size_t d = rank; d-- > 0;) {
      o[d] = static_cast<int64_t>(rem % static_cast<size_t>(c.out[d]));
      rem /= static_cast<size_t>(c.out[d]);
    }
    for (size_t d = 0; d < rank; ++d) {
      const double s = host_source(c, c.scales[d], in[d], c.out[d], o[d]);
      auto clamp = [&](double v) { return static_cast<int64_t>(std::min<double>(std::max(v, 0.0), in[d] - 1)); };
      const double f = std::floor(s), frac = s - f;
      if (c.mode == "linear") {
        pos[0].push_back(clamp(f));
        pos[1].push_back(clamp(f + 1));
        weight[0].push_back(1 - frac);
        weight[1].push_back(frac);
      } else {
        double pick = f;
        if (frac != 0) {
          if (c.nearest == "ceil" || (c.nearest == "round_prefer_ceil" && frac >= 0.5) ||
              ((c.nearest.empty() || c.nearest == "round_prefer_floor") && frac > 0.5)) {
            pick = f + 1;
          }
        }
        pos[0].push_back(clamp(pick));
        pos[1].push_back(clamp(pick));
        weight[0].push_back(1);
        weight[1].push_back(0);
      }
    }
    double acc = 0;
    for (size_t corner = 0; corner < (size_t{1} << rank); ++corner) {
      double w = 1;
      size_t at = 0;
      for (size_t d = 0; d < rank; ++d) {
        const int side = (corner >> d) & 1;
        w *= weight[side][d];
        at = at * static_cast<size_t>(in[d]) + static_cast<size_t>(pos[side][d]);
      }
      acc += w * x[at];
    }
    y[i] = acc;
  }
  return y;
}

std::vector<Attr> resize_attrs(const ResizeCase& c) {
  std::vector<Attr> s = {attr_s("mode", c.mode), attr_s("coordinate_transformation_mode", c.coord)};
  if (!c.nearest.empty()) s.push_back(attr_s("nearest_mode", c.nearest));
  return s;
}

TEST_F(VulkanCompile, ResizeNearestAndLinearMatchTheOnnxFormulas) {
  LOOM_VK_REQUIRE_DEVICE();
  const Dims in = {1, 2, 3, 4};
  // Scales cases give the factors; sizes cases give the output shape (the
  // factors are out / in).
  const std::vector<ResizeCase> by_scales = {
      {"nearest", "half_pixel", "", {1, 1, 2, 1.5}, {1, 2, 6, 6}},
      {"linear", "asymmetric", "", {1, 1, 0.5, 0.5}, {1, 2, 1, 2}},
      {"nearest", "asymmetric", "round_prefer_ceil", {1, 1, 2, 0.75}, {1, 2, 6, 3}},
      {"linear", "half_pixel", "", {1, 2, 1.7, 2.5}, {1, 4, 5, 10}},
      {"nearest", "tf_half_pixel_for_nn", "ceil", {1, 1, 0.6, 0.8}, {1, 2, 1, 3}},
  };
  const std::vector<ResizeCase> by_sizes = {
      {"linear", "align_corners", "", {}, {1, 2, 5, 7}},
      {"nearest", "pytorch_half_pixel", "floor", {}, {2, 2, 7, 3}},
      {"linear", "pytorch_half_pixel", "", {}, {1, 2, 2, 8}},
      {"nearest", "align_corners", "round_prefer_floor", {}, {1, 3, 5, 2}},
  };
  GraphBuilder g;
  const int x = g.input(in);
  std::vector<Dims> outs;
  std::vector<ResizeCase> cases;
  for (ResizeCase c : by_scales) {
    const std::vector<float> s(c.scales.begin(), c.scales.end());
    c.scales.assign(s.begin(), s.end());  // the f32 factors the node carries
    const int y = g.tensor(c.out);
    g.node("Resize", {x, -1, g.constant_f32({4}, s)}, {y}, resize_attrs(c), 13);
    g.output(y);
    outs.push_back(c.out);
    cases.push_back(c);
  }
  for (ResizeCase c : by_sizes) {
    const int y = g.tensor(c.out);
    // Opset 11 passes an empty roi and scales beside sizes.
    const int roi = g.constant_f32({0}, {}), scales = g.constant_f32({0}, {});
    g.node("Resize", {x, roi, scales, g.constant_i64({4}, c.out)}, {y}, resize_attrs(c), 11);
    g.output(y);
    outs.push_back(c.out);
    for (size_t d = 0; d < 4; ++d) c.scales.push_back(static_cast<double>(c.out[d]) / static_cast<double>(in[d]));
    cases.push_back(c);
  }
  EXPECT_EQ(supported(g), std::vector<bool>(cases.size(), true));
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xv = random_values(24, 31);
  const auto got = run(blob, {{in, xv}}, outs);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::vector<double> want = resize_reference(xv, in, cases[c]);
    ASSERT_EQ(got[c].size(), want.size()) << c;
    for (size_t e = 0; e < want.size(); ++e) {
      EXPECT_NEAR(got[c][e], want[e], 1e-6) << "case " << c << " (" << cases[c].mode << ", " << cases[c].coord
                                            << ") element " << e;
    }
  }
}

TEST_F(VulkanCompile, ResizeRefusesWhatItDoesNotComputeExactly) {
  GraphBuilder r;
  const int x = r.input({1, 1, 3, 4});
  const int up = r.constant_f32({4}, {1, 1, 2, 2});
  const int run_time_scales = r.input({4});
  auto node = [&](std::vector<int32_t> in, Dims out, std::vector<Attr> attrs, int64_t opset = 13) {
    r.node("Resize", std::move(in), {r.tensor(std::move(out))}, std::move(attrs), opset);
  };
  node({x, -1, up}, {1, 1, 6, 8}, {attr_s("mode", "cubic")});
  node({x, -1, up}, {1, 1, 6, 8}, {attr_s("coordinate_transformation_mode", "tf_crop_and_resize")});
  node({x, -1, up}, {1, 1, 6, 8}, {attr_i("antialias", 1), attr_s("mode", "linear")}, 18);
  node({x, -1, up}, {1, 1, 6, 8}, {attr_s("keep_aspect_ratio_policy", "not_larger")}, 18);
  node({x, -1, run_time_scales}, {1, 1, 6, 8}, {});
  node({x, up}, {1, 1, 6, 8}, {}, 10);
  // 3 x 1.5 = 4.5: align_corners would divide by the spec's 3 or the
  // reference's 3.5.
  node({x, -1, r.constant_f32({4}, {1, 1, 1.5f, 1})}, {1, 1, 4, 4}, {attr_s("coordinate_transformation_mode", "align_corners")});
  // One output element: the spec reads x[0], its reference x[1].
  node({x, -1, -1, r.constant_i64({4}, {1, 1, 1, 4})}, {1, 1, 1, 4},
       {attr_s("coordinate_transformation_mode", "pytorch_half_pixel")});
  // An output shape that is not floor(in * scale).
  node({x, -1, up}, {1, 1, 7, 8}, {});
  // Both scales and sizes.
  node({x, -1, up, r.constant_i64({4}, {1, 1, 6, 8})}, {1, 1, 6, 8}, {});
  EXPECT_EQ(supported(r), std::vector<bool>(r.node_count(), false));
}

struct ConvTransposeShape {
  int64_t n, c, m, group;
  Dims in, kernel, strides, dilations, pads, out;  // spatial; pads begin then end
};

// The scatter form: every input element adds x * w to the output positions
// its kernel taps reach.
std::vector<double> conv_transpose_reference(const ConvTransposeShape& s, const std::vector<float>& x,
                                             const std::vector<float>& w, const std::vector<float>* bias) {
  const bool two = s.in.size() == 2;
  const int64_t H = two ? s.in[0] : 1, W = s.in.back(), OH = two ? s.out[0] : 1, OW = s.out.back();
  const int64_t KH = two ? s.kernel[0] : 1, KW = s.kernel.back();
  const int64_t sh = two ? s.strides[0] : 1, sw = s.strides.back();
  const int64_t dh = two ? s.dilations[0] : 1, dw = s.dilations.back();
  const int64_t pt = two ? s.pads[0] : 0, pl = two ? s.pads[1] : s.pads[0];
  const int64_t cg = s.c / s.group, mg = s.m / s.group;
  std::vector<double> y(static_cast<size_t>(s.n * s.m * OH * OW), 0.0);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t ic = 0; ic < s.c; ++ic) {
      const int64_t g = ic / cg;
      for (int64_t ih = 0; ih < H; ++ih) {
        for (int64_t iw = 0; iw < W; ++iw) {
          const double xv = x[static_cast<size_t>(((n * s.c + ic) * H + ih) * W + iw)];
          for (int64_t m = 0; m < mg; ++m) {
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t oh = ih * sh + kh * dh - pt;
              if (oh < 0 || oh >= OH) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ow = iw * sw + kw * dw - pl;
                if (ow < 0 || ow >= OW) continue;
                const int64_t oc = g * mg + m;
                y[static_cast<size_t>(((n * s.m + oc) * OH + oh) * OW + ow)] +=
                    xv * w[static_cast<size_t>(((ic * mg + m) * KH + kh) * KW + kw)];
              }
            }
          }
        }
      }
    }
  }
  if (bias != nullptr) {
    for (size_t i = 0; i < y.size(); ++i) y[i] += (*bias)[(i / static_cast<size_t>(OH * OW)) % static_cast<size_t>(s.m)];
  }
  return y;
}

Dims full(int64_t a, int64_t b, const Dims& spatial) {
  Dims d = {a, b};
  d.insert(d.end(), spatial.begin(), spatial.end());
  return d;
}

TEST_F(VulkanCompile, ConvTransposeWithGroupsStridesOutputPaddingAndBiasMatches) {
  LOOM_VK_REQUIRE_DEVICE();
  // 2-D, two groups, strides (2, 3), dilations (2, 1), pads (1, 0, 0, 2),
  // output_padding (1, 2): H 2*2 + 1 + 5 - 1 = 9, W 3*4 + 2 + 2 - 2 = 14.
  const ConvTransposeShape a = {2, 4, 6, 2, {3, 5}, {3, 2}, {2, 3}, {2, 1}, {1, 0, 0, 2}, {9, 14}};
  // 1-D, strides 2, output_padding 1, no bias: 2*6 + 1 + 3 = 16.
  const ConvTransposeShape b = {1, 2, 3, 1, {7}, {3}, {2}, {1}, {0, 0}, {16}};
  // 1-D with output_shape 13 (padding 2, one on each side), depthwise.
  const ConvTransposeShape c = {1, 2, 2, 2, {7}, {3}, {2}, {1}, {1, 1}, {13}};
  const std::vector<float> wa = random_values(4 * 3 * 3 * 2, 41), ba = random_values(6, 42);
  const std::vector<float> wb = random_values(2 * 3 * 3, 43), wc = random_values(2 * 1 * 3, 44);
  GraphBuilder g;
  const int xa = g.input(full(2, 4, a.in)), xb = g.input(full(1, 2, b.in));
  const int ya = g.tensor(full(2, 6, a.out)), yb = g.tensor(full(1, 3, b.out)), yc = g.tensor(full(1, 2, c.out));
  g.node("ConvTranspose", {xa, g.constant_f32({4, 3, 3, 2}, wa), g.constant_f32({6}, ba)}, {ya}, {attr_i("group", 2), attr_ints("strides", a.strides), attr_ints("dilations", a.dilations), attr_ints("pads", a.pads), attr_ints("output_padding", {1, 2}), attr_ints("kernel_shape", a.kernel)}, 11);
  g.node("ConvTranspose", {xb, g.constant_f32({2, 3, 3}, wb)}, {yb}, {attr_ints("strides", b.strides), attr_ints("output_padding", {1})}, 11);
  g.node("ConvTranspose", {xb, g.constant_f32({2, 1, 3}, wc)}, {yc}, {attr_i("group", 2), attr_ints("strides", c.strides), attr_ints("output_shape", c.out)}, 11);
  g.output(ya);
  g.output(yb);
  g.output(yc);
  EXPECT_EQ(supported(g), (std::vector<bool>{true, true, true}));
  std::vector<uint8_t> blob;
  ASSERT_EQ(compile(g.finish(), &blob), "ok");
  const std::vector<float> xav = random_values(2 * 4 * 3 * 5, 45), xbv = random_values(2 * 7, 46);
  const auto got = run(blob, {{full(2, 4, a.in), xav}, {full(1, 2, b.in), xbv}},
                       {full(2, 6, a.out), full(1, 3, b.out), full(1, 2, c.out)});
  ASSERT_EQ(got.size(), 3u);
  const std::vector<double> want[3] = {conv_transpose_reference(a, xav, wa, &ba),
                                       conv_transpose_reference(b, xbv, wb, nullptr),
                                       conv_transpose_reference(c, xbv, wc, nullptr)};
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(got[k].size(), want[k].size()) << k;
    for (size_t e = 0; e < want[k].size(); ++e) EXPECT_NEAR(got[k][e], want[k][e], 1e-5) << k << " " << e;
  }
}

TEST_F(VulkanCompile, ConvTransposeRefusesAmbiguousPaddingAndOtherRanks) {
  GraphBuilder r;
  const int x = r.input({1, 1, 3, 3});
  const int w = r.constant_f32({1, 2, 3, 3}, std::vector<float>(18, 1.0f));
  // SAME_UPPER with strides 2: padding 7 - 6 = 1 is odd.
  r.node("ConvTranspose", {x, w}, {r.tensor({1, 2, 6, 6})}, {attr_ints("strides", {2, 2}), attr_s("auto_pad", "SAME_UPPER")}, 11);
  // output_shape beyond the natural size: a negative padding.
  r.node("ConvTranspose", {x, w}, {r.tensor({1, 2, 10, 8})}, {attr_ints("strides", {3, 2}), attr_ints("output_shape", {10, 8})}, 11);
  // output_padding not below the stride (nor the dilation).
  r.node("ConvTranspose", {x, w}, {r.tensor({1, 2, 6, 6})}, {attr_ints("output_padding", {1, 1})}, 11);
  // 3-D.
  const int x3 = r.input({1, 1, 2, 2, 2});
  r.node("ConvTranspose", {x3, r.constant_f32({1, 1, 1, 1, 1}, {1.0f})}, {r.tensor({1, 1, 2, 2, 2})}, {}, 11);
  EXPECT_EQ(supported(r), (std::vector<bool>{false, false, false, false}));
}

}  // namespace
}  // namespace loom::vulkan::test
