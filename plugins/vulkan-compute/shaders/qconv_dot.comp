// QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger on a device
// with shaderIntegerDotProduct: the qconv.comp dispatch that int8_dot.cpp
// rewrites when it loads a blob (never in a blob), with the same push
// constants, table and y, the same bytes out. x comes packed by qpack.comp
// ([N][group][H][W][C4] words of four channels' bytes), w packed at load
// ([M][KH * KW][C4] words, then one i32 per output channel and tap: the sum
// of that tap's weights over the group's channels). Four products per
// instruction (OpSDot / OpUDot / OpSUDot on packed 4 x 8 bits), of the raw
// bytes; the zero points come in after, over the taps inside the input:
//   acc = sum x.w - x_zero * sum w - w_zero * sum x + n * x_zero * w_zero
// with n = Cg times those taps, which is qconv.comp's sum of
// (x - x_zero) * (w - w_zero) modulo 2^32, as its i32 wraps. Padding
// channels are 0 in both x and w.
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_spirv_intrinsics : require
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { uint w[]; };
layout(std430, set = 0, binding = 2) readonly buffer T { int table[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y8 { uint8_t y8[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y32 { int y32[]; };
layout(push_constant) uniform P {
  uint N; uint C; uint H; uint W; uint M; uint OH; uint OW; uint KH; uint KW;
  uint sh; uint sw; uint dh; uint dw; uint pt; uint pl; uint group;
  int x_zero; int y_zero; uint types;
} p;

#include "qrequant.glsl"

// SPV_KHR_integer_dot_product, packed 4 x 8 bits (format 0): glslang has no
// GLSL names for it, hence the intrinsics. 6019 DotProduct, 6018
// DotProductInput4x8BitPacked.
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int dot_ss(uint a, uint b, spirv_literal int packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4451)
uint dot_uu(uint a, uint b, spirv_literal int packed_format);
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4452)
int dot_su(uint signed_a, uint unsigned_b, spirv_literal int packed_format);

// The dot product of four x bytes and four w bytes, each of its signedness.
int dot4(uint xw, uint ww, bool xs, bool ws) {
  if (xs && ws) return dot_ss(xw, ww, 0);
  if (!xs && !ws) return int(dot_uu(xw, ww, 0));
  return xs ? dot_su(xw, ww, 0) : dot_su(ww, xw, 0);
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  uint ytype = (p.types >> 8u) & 15u;
  uint ylen = ytype == 3u ? uint(y32.length()) : uint(y8.length());
  if (i >= p.N * p.M * p.OH * p.OW || i >= ylen) return;
  bool xs = (p.types & 15u) == 2u;
  bool ws = ((p.types >> 4u) & 15u) == 2u;
  uint ow = i % p.OW;
  uint t = i / p.OW;
  uint oh = t % p.OH;
  t /= p.OH;
  uint oc = t % p.M;
  uint n = t / p.M;
  if (3u * oc + 2u >= uint(table.length())) return;
  int bias = table[3u * oc];
  int wz = table[3u * oc + 1u];
  uint Mg = p.M / p.group;
  uint Cg = p.C / p.group;
  uint C4 = (Cg + 3u) / 4u;
  uint g = oc / Mg;
  uint taps = p.KH * p.KW;
  uint sums = p.M * taps * C4;  // where the weight sums start in w
  uint xlen = uint(x.length());
  uint wlen = uint(w.length());
  const uint ones = 0x01010101u;
  int acc = 0, wsum = 0, xsum = 0, inside = 0;
  int ih0 = int(oh * p.sh) - int(p.pt);
  int iw0 = int(ow * p.sw) - int(p.pl);
  for (uint kh = 0u; kh < p.KH; ++kh) {
    int ih = ih0 + int(kh * p.dh);
    if (ih < 0 || uint(ih) >= p.H) continue;
    for (uint kw = 0u; kw < p.KW; ++kw) {
      int iw = iw0 + int(kw * p.dw);
      if (iw < 0 || uint(iw) >= p.W) continue;
      uint tap = kh * p.KW + kw;
      uint xb = (((n * p.group + g) * p.H + uint(ih)) * p.W + uint(iw)) * C4;
      uint wb = (oc * taps + tap) * C4;
      if (xb + C4 > xlen || wb + C4 > sums || sums + oc * taps + tap >= wlen) continue;
      for (uint c4 = 0u; c4 < C4; ++c4) acc += dot4(x[xb + c4], w[wb + c4], xs, ws);
      if (wz != 0) {
        for (uint c4 = 0u; c4 < C4; ++c4) xsum += xs ? dot_su(x[xb + c4], ones, 0) : int(dot_uu(x[xb + c4], ones, 0));
      }
      wsum += int(w[sums + oc * taps + tap]);
      inside += 1;
    }
  }
  acc += -p.x_zero * wsum - wz * xsum + inside * int(Cg) * p.x_zero * wz;
  if (ytype == 3u) {
    y32[i] = acc;
    return;
  }
  y8[i] = uint8_t(requantize(acc, bias, intBitsToFloat(table[3u * oc + 2u]), p.y_zero, ytype, (p.types & 8192u) != 0u));
}
