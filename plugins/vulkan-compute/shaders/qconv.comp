// QLinearConv and ConvInteger (2-D, NCHW), and the fused QDQ form of
// ConvTranspose (types bit 14), one invocation per output element, with
// the reference kernels' arithmetic bit for bit:
//   acc = sum over the channels c of oc's group and the taps (kh, kw) of
//         (x[n, c, ih, iw] - x_zero_point) * (w[oc, c, kh, kw] - w_zero_point[oc])
// in i32 (wrapping like the reference's static_cast; w is read as [C, M]
// for a QLinearMatMul / MatMulInteger's B), padding taps skipped
// (they would add (x_zero_point - x_zero_point) * ... = 0). ConvInteger
// writes acc (i32). QLinearConv writes
//   saturate(roundEven(double(float(double(acc) + bias[oc]) * multiplier[oc])
//            + y_zero_point))
// where multiplier = float(x_scale) * float(w_scale[oc]) / float(y_scale) is
// computed by the compiler in f32 as the reference does; acc + bias is exact
// in double and rounded once to f32 like the reference's int64 -> float.
// Plain int32 multiply-add; qconv_dot.comp is the form with integer dot
// products that a load puts in its place where the device has them. The table
// (i32) holds per output channel: bias, w zero point, multiplier (f32 bits).
// Push constants: int8_kernels.hpp (kQConv). Needs shaderInt8,
// storageBuffer8BitAccess and shaderFloat64.
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { uint8_t x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { uint8_t w[]; };
layout(std430, set = 0, binding = 2) readonly buffer T { int table[]; };
// y is bound once and written as bytes (QLinearConv) or i32 (ConvInteger).
layout(std430, set = 0, binding = 3) writeonly buffer Y8 { uint8_t y8[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y32 { int y32[]; };
layout(push_constant) uniform P {
  uint N; uint C; uint H; uint W; uint M; uint OH; uint OW; uint KH; uint KW;
  uint sh; uint sw; uint dh; uint dw; uint pt; uint pl; uint group;
  // types: x dtype | w dtype << 4 | y dtype << 8 (1 u8, 2 i8, 3 i32), bit 12:
  // w is a matmul's B, [C, M] (a 1x1 convolution of one group); bit 13: the
  // zero point added after rounding (format 5, the fused QDQ form); bit 14:
  // transposed (format 6: ConvTranspose's geometry, w [C, M/group, KH, KW],
  // each output summing the taps that reach it, as conv_transpose.comp)
  int x_zero; int y_zero; uint types;
} p;

#include "qrequant.glsl"

int load8(uint8_t b, bool is_signed) {
  int v = int(uint(b));
  return is_signed && v >= 128 ? v - 256 : v;
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  uint ytype = (p.types >> 8u) & 15u;
  uint ylen = ytype == 3u ? uint(y32.length()) : uint(y8.length());
  if (i >= p.N * p.M * p.OH * p.OW || i >= ylen) return;
  bool xs = (p.types & 15u) == 2u;
  bool ws = ((p.types >> 4u) & 15u) == 2u;
  bool b_layout = ((p.types >> 12u) & 1u) != 0u;
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
  uint g = oc / Mg;
  uint xlen = uint(x.length());
  uint wlen = uint(w.length());
  int acc = 0;
  if ((p.types & 16384u) != 0u) {
    // Transposed: x[n, ic, ih, iw] reaches y[n, oc, oh, ow] through tap
    // (kh, kw) where oh + pt - kh * dh = ih * sh (and so for w).
    uint m = oc % Mg;
    for (uint kh = 0u; kh < p.KH; ++kh) {
      int sh_num = int(oh + p.pt) - int(kh * p.dh);
      if (sh_num < 0 || uint(sh_num) % p.sh != 0u) continue;
      uint ih = uint(sh_num) / p.sh;
      if (ih >= p.H) continue;
      for (uint kw = 0u; kw < p.KW; ++kw) {
        int sw_num = int(ow + p.pl) - int(kw * p.dw);
        if (sw_num < 0 || uint(sw_num) % p.sw != 0u) continue;
        uint iw = uint(sw_num) / p.sw;
        if (iw >= p.W) continue;
        for (uint c = 0u; c < Cg; ++c) {
          uint ic = g * Cg + c;
          uint xi = ((n * p.C + ic) * p.H + ih) * p.W + iw;
          uint wi = ((ic * Mg + m) * p.KH + kh) * p.KW + kw;
          if (xi < xlen && wi < wlen) acc += (load8(x[xi], xs) - p.x_zero) * (load8(w[wi], ws) - wz);
        }
      }
    }
    y8[i] = uint8_t(requantize(acc, bias, intBitsToFloat(table[3u * oc + 2u]), p.y_zero, ytype, true));
    return;
  }
  int ih0 = int(oh * p.sh) - int(p.pt);
  int iw0 = int(ow * p.sw) - int(p.pl);
  for (uint c = 0u; c < Cg; ++c) {
    uint xplane = (n * p.C + g * Cg + c) * p.H;
    uint wbase = (oc * Cg + c) * p.KH * p.KW;
    for (uint kh = 0u; kh < p.KH; ++kh) {
      int ih = ih0 + int(kh * p.dh);
      if (ih < 0 || uint(ih) >= p.H) continue;
      for (uint kw = 0u; kw < p.KW; ++kw) {
        int iw = iw0 + int(kw * p.dw);
        if (iw < 0 || uint(iw) >= p.W) continue;
        uint xi = (xplane + uint(ih)) * p.W + uint(iw);
        uint wi = b_layout ? c * p.M + oc : wbase + kh * p.KW + kw;
        if (xi < xlen && wi < wlen) acc += (load8(x[xi], xs) - p.x_zero) * (load8(w[wi], ws) - wz);
      }
    }
  }
  if (ytype == 3u) {
    y32[i] = acc;
    return;
  }
  y8[i] = uint8_t(requantize(acc, bias, intBitsToFloat(table[3u * oc + 2u]), p.y_zero, ytype, (p.types & 8192u) != 0u));
}
