// Resize through the vulkan-compute compile entries: the compiled blobs run
// on the device and match host loops in double precision written from the
// ONNX formulas, and attribute values the plugin does not compute exactly
// are not claimed.
#include <cmath>

#include "compile_harness.hpp"

namespace loom::vulkan::test {
namespace {

using Strings = std::vector<std::pair<std::string, std::string>>;

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

Strings resize_attrs(const ResizeCase& c) {
  Strings s = {{"mode", c.mode}, {"coordinate_transformation_mode", c.coord}};
  if (!c.nearest.empty()) s.push_back({"nearest_mode", c.nearest});
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
  Graph g;
  const int x = g.input(in);
  std::vector<Dims> outs;
  std::vector<ResizeCase> cases;
  for (ResizeCase c : by_scales) {
    const std::vector<float> s(c.scales.begin(), c.scales.end());
    c.scales.assign(s.begin(), s.end());  // the f32 factors the node carries
    const int y = g.tensor(c.out);
    g.node("Resize", {x, -1, g.constant_f32({4}, s)}, {y}, {}, 13, {}, resize_attrs(c));
    g.output(y);
    outs.push_back(c.out);
    cases.push_back(c);
  }
  for (ResizeCase c : by_sizes) {
    const int y = g.tensor(c.out);
    // Opset 11 passes an empty roi and scales beside sizes.
    const int roi = g.constant_f32({0}, {}), scales = g.constant_f32({0}, {});
    g.node("Resize", {x, roi, scales, g.constant_i64({4}, c.out)}, {y}, {}, 11, {}, resize_attrs(c));
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
  Graph r;
  const int x = r.input({1, 1, 3, 4});
  const int up = r.constant_f32({4}, {1, 1, 2, 2});
  const int run_time_scales = r.input({4});
  auto node = [&](std::vector<int32_t> in, Dims out, Strings s, int64_t opset = 13,
                  std::vector<std::pair<std::string, int64_t>> ints = {}) {
    r.node("Resize", std::move(in), {r.tensor(std::move(out))}, std::move(ints), opset, {}, std::move(s));
  };
  node({x, -1, up}, {1, 1, 6, 8}, {{"mode", "cubic"}});
  node({x, -1, up}, {1, 1, 6, 8}, {{"coordinate_transformation_mode", "tf_crop_and_resize"}});
  node({x, -1, up}, {1, 1, 6, 8}, {{"mode", "linear"}}, 18, {{"antialias", 1}});
  node({x, -1, up}, {1, 1, 6, 8}, {{"keep_aspect_ratio_policy", "not_larger"}}, 18);
  node({x, -1, run_time_scales}, {1, 1, 6, 8}, {});
  node({x, up}, {1, 1, 6, 8}, {}, 10);
  // 3 x 1.5 = 4.5: align_corners would divide by the spec's 3 or the
  // reference's 3.5.
  node({x, -1, r.constant_f32({4}, {1, 1, 1.5f, 1})}, {1, 1, 4, 4}, {{"coordinate_transformation_mode", "align_corners"}});
  // One output element: the spec reads x[0], its reference x[1].
  node({x, -1, -1, r.constant_i64({4}, {1, 1, 1, 4})}, {1, 1, 1, 4},
       {{"coordinate_transformation_mode", "pytorch_half_pixel"}});
  // An output shape that is not floor(in * scale).
  node({x, -1, up}, {1, 1, 7, 8}, {});
  // Both scales and sizes.
  node({x, -1, up, r.constant_i64({4}, {1, 1, 6, 8})}, {1, 1, 6, 8}, {});
  EXPECT_EQ(supported(r), std::vector<bool>(r.node_count(), false));
}

}  // namespace
}  // namespace loom::vulkan::test
