// Blob format 11: the operators that only move elements (Identity, Reshape,
// Flatten, Squeeze / Unsqueeze, Transpose, Slice, Split, Concat, Gather) on
// every blob dtype, and MaxPool on u8 and i8 — the tensors a quantized
// model (QOperator form: QLinearConv -> MaxPool -> Flatten ->
// QLinearMatMul) passes through unchanged. The oracle is the f32 graph the
// plugin already runs: fed element numbers, its outputs say which input
// element lands where; fed the 8-bit values as floats, it gives the pool.
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "compile_support.hpp"

namespace loom::cpu_simd::testing {
namespace {

using TT = TypedTensor;

// x [1, 4, 3, 3] (or the [1, 4, 6, 6] input of a MaxPool when `pool` is
// 1: 3x3, stride 2, pads 1; 2: 2x2, stride 2, ceil_mode 1) and z [2, 2],
// both of `dtype`, through Transpose, Reshape, Slice, Concat (along the
// inner axis), Gather, Unsqueeze, Flatten, Split and Identity. Outputs: the
// Transpose's [1, 3, 3, 4], the Split's [2, 1] and the Identity's [2, 5].
GraphBuilder moving_graph(gfb::DType dtype, int pool) {
  GraphBuilder b;
  const int x = b.input(pool != 0 ? Dims{1, 4, 6, 6} : Dims{1, 4, 3, 3}, dtype);
  const int z = b.input({2, 2}, dtype);
  int t = x;
  if (pool != 0) {
    t = b.tensor({1, 4, 3, 3}, dtype);
    std::vector<Attr> attrs = {attr_ints("kernel_shape", pool == 1 ? Dims{3, 3} : Dims{2, 2}),
                               attr_ints("strides", {2, 2})};
    attrs.push_back(pool == 1 ? attr_ints("pads", {1, 1, 1, 1}) : attr_i("ceil_mode", 1));
    b.node("MaxPool", {x}, {t}, attrs, 12);
  }
  const int tr = b.tensor({1, 3, 3, 4}, dtype), r = b.tensor({3, 12}, dtype), s = b.tensor({2, 4}, dtype);
  const int c = b.tensor({2, 6}, dtype), g = b.tensor({2, 6}, dtype), u = b.tensor({1, 2, 6}, dtype);
  const int f = b.tensor({2, 6}, dtype), p0 = b.tensor({2, 1}, dtype), p1 = b.tensor({2, 5}, dtype);
  const int id = b.tensor({2, 5}, dtype);
  b.node("Transpose", {t}, {tr}, {attr_ints("perm", {0, 2, 3, 1})}, 13);
  b.node("Reshape", {tr, b.constant_i64({2}, {3, 12})}, {r}, {}, 14);
  b.node("Slice",
         {r, b.constant_i64({2}, {0, 1}), b.constant_i64({2}, {3, 12}), b.constant_i64({2}, {0, 1}),
          b.constant_i64({2}, {2, 3})},
         {s}, {}, 13);
  b.node("Concat", {s, z}, {c}, {attr_i("axis", 1)}, 13);
  b.node("Gather", {c, b.constant_i64({2}, {1, 0})}, {g}, {attr_i("axis", 0)}, 13);
  b.node("Unsqueeze", {g, b.constant_i64({1}, {0})}, {u}, {}, 13);
  b.node("Flatten", {u}, {f}, {attr_i("axis", 2)}, 13);
  b.node("Split", {f, b.constant_i64({2}, {1, 5})}, {p0, p1}, {attr_i("axis", 1)}, 13);
  b.node("Identity", {p1}, {id}, {}, 13);
  for (int o : {tr, p0, id}) b.output(o);
  return b;
}

const std::vector<Dims> kOutShapes = {{1, 3, 3, 4}, {2, 1}, {2, 5}};

class CompileMoved : public CompileFixture {
 protected:
  // Runs moving_graph(dtype, pool) on `x` and `z`; its three outputs.
  std::vector<TT> run_graph(gfb::DType dtype, int pool, const TT& x, const TT& z) {
    const GraphBuilder b = moving_graph(dtype, pool);
    EXPECT_EQ(supported(b), std::vector<bool>(b.node_count(), true)) << gfb::EnumNameDType(dtype);
    std::vector<std::byte> blob;
    EXPECT_EQ(compile(b.finish(), &blob), "ok");
    // f32 needs no newer format; everything else is format 11.
    EXPECT_EQ(blob.size() > 4 ? static_cast<int>(blob[4]) : 0, dtype == gfb::DType::f32 ? 4 : 11);
    const auto type = static_cast<loom_dtype_t>(dtype);
    std::vector<TT> outs;
    for (const Dims& s : kOutShapes) outs.push_back(TT::out(s, type));
    EXPECT_EQ(run_typed(b, {x, z}, &outs), "ok");
    return outs;
  }
};

// Every dtype, moved without a MaxPool: the f32 graph fed element numbers
// (x's 0..35, then z's 36..39) says where each output element comes from;
// the typed graph's outputs must be those elements' bytes.
TEST_F(CompileMoved, EveryDtypeMovesTheElementsTheF32GraphMoves) {
  std::vector<float> where(40);
  for (size_t i = 0; i < where.size(); ++i) where[i] = static_cast<float>(i);
  const std::vector<TT> index =
      run_graph(gfb::DType::f32, 0, TT::f32({1, 4, 3, 3}, {where.begin(), where.begin() + 36}),
                TT::f32({2, 2}, {where.begin() + 36, where.end()}));
  ASSERT_EQ(index.size(), 3u);
  std::mt19937 rng(11);
  for (const gfb::DType dtype : {gfb::DType::u8, gfb::DType::i8, gfb::DType::bool_, gfb::DType::i32,
                                 gfb::DType::i64}) {
    SCOPED_TRACE(gfb::EnumNameDType(dtype));
    const auto type = static_cast<loom_dtype_t>(dtype);
    const size_t size = dtype_size(type);
    std::vector<uint8_t> all(40 * size);
    for (uint8_t& v : all) v = static_cast<uint8_t>(rng());
    if (dtype == gfb::DType::bool_) {
      for (uint8_t& v : all) v &= 1;
    }
    TT x{{1, 4, 3, 3}, type, {all.begin(), all.begin() + static_cast<int64_t>(36 * size)}};
    TT z{{2, 2}, type, {all.begin() + static_cast<int64_t>(36 * size), all.end()}};
    const std::vector<TT> got = run_graph(dtype, 0, x, z);
    ASSERT_EQ(got.size(), 3u);
    for (size_t o = 0; o < got.size(); ++o) {
      const std::vector<float> from = index[o].as<float>();
      std::vector<uint8_t> want;
      for (float e : from) {
        const size_t at = static_cast<size_t>(e) * size;
        want.insert(want.end(), all.begin() + static_cast<int64_t>(at), all.begin() + static_cast<int64_t>(at + size));
      }
      EXPECT_EQ(got[o].bytes, want) << "output " << o;
    }
  }
}

// u8 and i8 MaxPool (oneDNN's int8 pooling, or with ceil_mode the plugin's
// own loop), then the moves: equal to the f32 graph fed the same values.
TEST_F(CompileMoved, EightBitMaxPoolEqualsTheF32Pool) {
  std::mt19937 rng(5);
  for (const int pool : {1, 2}) {
    for (const gfb::DType dtype : {gfb::DType::u8, gfb::DType::i8}) {
      SCOPED_TRACE(::testing::Message() << gfb::EnumNameDType(dtype) << " pool " << pool);
      const bool u8 = dtype == gfb::DType::u8;
      std::vector<uint8_t> xb(144), zb(4);
      std::vector<float> xf, zf;
      for (uint8_t& v : xb) v = static_cast<uint8_t>(rng());
      for (uint8_t& v : zb) v = static_cast<uint8_t>(rng());
      xb[7] = u8 ? 255 : 127;  // the extremes
      xb[8] = u8 ? 0 : 128;
      auto value = [&](uint8_t v) { return u8 ? static_cast<float>(v) : static_cast<float>(static_cast<int8_t>(v)); };
      for (uint8_t v : xb) xf.push_back(value(v));
      for (uint8_t v : zb) zf.push_back(value(v));
      const std::vector<TT> want = run_graph(gfb::DType::f32, pool, TT::f32({1, 4, 6, 6}, xf), TT::f32({2, 2}, zf));
      const auto type = static_cast<loom_dtype_t>(dtype);
      const std::vector<TT> got = run_graph(dtype, pool, TT{{1, 4, 6, 6}, type, xb}, TT{{2, 2}, type, zb});
      ASSERT_EQ(got.size(), want.size());
      for (size_t o = 0; o < got.size(); ++o) {
        std::vector<float> values;
        for (uint8_t v : got[o].bytes) values.push_back(value(v));
        EXPECT_EQ(values, want[o].as<float>()) << "output " << o;
      }
    }
  }
}

// The same with oneDNN off: MaxPool of u8 on the plugin's own loop.
class CompileMovedWithoutOneDnn : public CompileMoved {
 protected:
  CompileMovedWithoutOneDnn() { options_ = {{"cpu.onednn", "0"}}; }
};

TEST_F(CompileMovedWithoutOneDnn, EightBitMaxPoolOnThePluginsLoop) {
  std::vector<uint8_t> xb(144), zb = {1, 2, 3, 4};
  std::vector<float> xf;
  for (size_t i = 0; i < xb.size(); ++i) {
    xb[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
    xf.push_back(static_cast<float>(xb[i]));
  }
  const std::vector<TT> want =
      run_graph(gfb::DType::f32, 1, TT::f32({1, 4, 6, 6}, xf), TT::f32({2, 2}, {1, 2, 3, 4}));
  const std::vector<TT> got =
      run_graph(gfb::DType::u8, 1, TT{{1, 4, 6, 6}, LOOM_DTYPE_U8, xb}, TT{{2, 2}, LOOM_DTYPE_U8, zb});
  ASSERT_EQ(got.size(), want.size());
  for (size_t o = 0; o < got.size(); ++o) {
    std::vector<float> values(got[o].bytes.begin(), got[o].bytes.end());
    EXPECT_EQ(values, want[o].as<float>()) << "output " << o;
  }
}

// What is refused, and why: operands of two dtypes, an inline u8 constant,
// MaxPool of u8 before opset 12 and of i32.
TEST_F(CompileMoved, RefusalsNameTheOperand) {
  auto refusal = [&](const GraphBuilder& b) {
    std::vector<std::byte> blob;
    const std::string s = compile(b.finish(), &blob);
    EXPECT_EQ(supported(b), std::vector<bool>(b.node_count(), false)) << s;
    return s;
  };
  {
    GraphBuilder b;
    const int a = b.input({2}, gfb::DType::u8), c = b.input({2}, gfb::DType::i8), y = b.tensor({4}, gfb::DType::u8);
    b.node("Concat", {a, c}, {y}, {attr_i("axis", 0)}, 13);
    b.output(y);
    EXPECT_NE(refusal(b).find("input 1 is i8, input 0 is u8"), std::string::npos) << refusal(b);
  }
  {
    GraphBuilder b;
    const uint8_t two[2] = {1, 2};
    const int a = b.input({2}, gfb::DType::u8), y = b.tensor({4}, gfb::DType::u8);
    b.node("Concat", {a, b.constant({2}, gfb::DType::u8, two, 2)}, {y}, {attr_i("axis", 0)}, 13);
    b.output(y);
    EXPECT_NE(refusal(b).find("input 1 is an inline u8 constant"), std::string::npos) << refusal(b);
  }
  for (const auto& [dtype, opset, why] :
       std::vector<std::tuple<gfb::DType, int64_t, std::string>>{{gfb::DType::u8, 11, "MaxPool of u8 needs opset 12"},
                                                                 {gfb::DType::i32, 12, "input 0 is i32"}}) {
    GraphBuilder b;
    const int x = b.input({1, 1, 4, 4}, dtype), y = b.tensor({1, 1, 2, 2}, dtype);
    b.node("MaxPool", {x}, {y}, {attr_ints("kernel_shape", {2, 2}), attr_ints("strides", {2, 2})}, opset);
    b.output(y);
    EXPECT_NE(refusal(b).find(why), std::string::npos) << refusal(b);
  }
}

}  // namespace
}  // namespace loom::cpu_simd::testing
