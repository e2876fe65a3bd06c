// 2-D max / average pooling over NCHW planes, one invocation per output
// element. mode 0 max, 1 average over the window's positions inside the
// input, 2 average over the whole window (count_include_pad). Push
// constants: kernels.hpp (kPool).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint planes; uint H; uint W; uint OH; uint OW; uint KH; uint KW;
  uint sh; uint sw; uint dh; uint dw; uint pt; uint pl; uint mode;
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.planes * p.OH * p.OW || i >= uint(y.length())) return;
  uint ow = i % p.OW;
  uint t = i / p.OW;
  uint oh = t % p.OH;
  uint plane = t / p.OH;
  uint xlen = uint(x.length());
  float acc = p.mode == 0u ? uintBitsToFloat(0xff800000u) : 0.0;
  uint count = 0u;
  for (uint kh = 0u; kh < p.KH; ++kh) {
    int ih = int(oh * p.sh + kh * p.dh) - int(p.pt);
    if (ih < 0 || uint(ih) >= p.H) continue;
    for (uint kw = 0u; kw < p.KW; ++kw) {
      int iw = int(ow * p.sw + kw * p.dw) - int(p.pl);
      if (iw < 0 || uint(iw) >= p.W) continue;
      uint xi = (plane * p.H + uint(ih)) * p.W + uint(iw);
      if (xi >= xlen) continue;
      float v = x[xi];
      acc = p.mode == 0u ? max(acc, v) : acc + v;
      ++count;
    }
  }
  if (p.mode == 1u) acc = count == 0u ? 0.0 : acc / float(count);
  if (p.mode == 2u) acc = acc / float(p.KH * p.KW);
  y[i] = acc;
}
