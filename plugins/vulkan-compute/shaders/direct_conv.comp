// Direct 2-D convolution (NCHW), one invocation per output element, for
// grouped convolutions with few channels per group (depthwise above all),
// where the implicit GEMM of conv.comp would fill one row of a 64 x 64 tile:
// y[n, oc, oh, ow] = act(bias[oc] + sum over the channels c of oc's group
// and the taps (kh, kw) of x[n, c, oh * sh + kh * dh - pt, ow * sw + kw * dw
// - pl] * w[oc, c, kh, kw]), padding reading 0. Every access is clamped to
// its buffer's length. Push constants: kernels.hpp (kDirectConv, conv's
// layout).
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
  uint ylen = uint(y.length());
  if (i >= p.N * p.M * p.OH * p.OW || i >= ylen) return;
  uint ow = i % p.OW;
  uint t = i / p.OW;
  uint oh = t % p.OH;
  t /= p.OH;
  uint oc = t % p.M;
  uint n = t / p.M;
  uint Mg = p.M / p.group;
  uint Cg = p.C / p.group;
  uint g = oc / Mg;
  uint xlen = uint(x.length());
  uint wlen = uint(w.length());
  float acc = 0.0;
  if ((p.flags & 4u) != 0u && oc < uint(bias.length())) acc = bias[oc];
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
        uint wi = wbase + kh * p.KW + kw;
        if (xi < xlen && wi < wlen) acc += x[xi] * w[wi];
      }
    }
  }
  if (((p.flags >> 3u) & 3u) == 1u) acc = max(acc, 0.0);
  y[i] = acc;
}
