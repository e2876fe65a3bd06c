// 2-D transposed convolution (NCHW), gathered per output element:
// y[n, oc, oh, ow] = bias[oc] + sum over the input channels c of oc's group
// and the kernel taps (kh, kw) with oh + pt - kh * dh = ih * sh and
// ow + pl - kw * dw = iw * sw inside X of x[n, c, ih, iw] *
// w[c, oc % (M / group), kh, kw]. W is [C, M / group, KH, KW]. Every access
// is clamped to its buffer's length. Push constants: kernels.hpp
// (kConvTranspose).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { float w[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint N; uint C; uint H; uint W; uint M; uint OH; uint OW; uint KH; uint KW;
  uint sh; uint sw; uint dh; uint dw; uint pt; uint pl; uint group; uint flags;
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.N * p.M * p.OH * p.OW || i >= uint(y.length()) || p.group == 0u ||
      p.sh == 0u || p.sw == 0u) {
    return;
  }
  uint ow = i % p.OW;
  uint t = i / p.OW;
  uint oh = t % p.OH;
  t /= p.OH;
  uint oc = t % p.M;
  uint n = t / p.M;
  uint Mg = p.M / p.group;
  uint Cg = p.C / p.group;
  uint g = oc / Mg;
  uint m = oc % Mg;
  uint xlen = uint(x.length());
  uint wlen = uint(w.length());
  float acc = 0.0;
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
        if (xi < xlen && wi < wlen) acc += x[xi] * w[wi];
      }
    }
  }
  if ((p.flags & 4u) != 0u && oc < uint(bias.length())) acc += bias[oc];
  y[i] = acc;
}
