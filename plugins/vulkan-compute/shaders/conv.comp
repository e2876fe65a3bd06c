// 2-D convolution as an implicit GEMM per (image, group): y[m, p] =
// act(sum_k W[m, k] * im2col(x)[k, p] + bias[m]), with k over (channel, kh,
// kw) of the group and p over output pixels. Same tiling as matmul.comp:
// 64 x 64 tiles, 16-deep slices in shared memory, 4 x 4 outputs per
// invocation; im2col elements are computed on the fly (padding reads 0).
// With splits S > 1 (split-K) workgroup z = (image, group) * S + slice
// reduces only its slice of k and writes its partial result to slice `slice`
// of y ([S, N, M, OH, OW]), adding the bias in slice 0 only.
// Push constants: kernels.hpp (kConv).
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W { float w[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint N; uint C; uint H; uint W; uint M; uint OH; uint OW; uint KH; uint KW;
  uint sh; uint sw; uint dh; uint dw; uint pt; uint pl; uint group; uint flags;
  uint splits;  // 1 for a format-1 dispatch (the executable pushes it)
} p;

const uint TILE = 64u;
const uint DEPTH = 16u;
shared float As[DEPTH][TILE];
shared float Bs[DEPTH][TILE];

void main() {
  uint tx = gl_LocalInvocationID.x;
  uint ty = gl_LocalInvocationID.y;
  uint tid = ty * 16u + tx;
  uint S = max(p.splits, 1u);
  uint slice = gl_WorkGroupID.z % S;
  uint z = gl_WorkGroupID.z / S;
  uint n = z / p.group;
  uint g = z % p.group;
  uint Mg = p.M / p.group;
  uint Cg = p.C / p.group;
  uint KK = p.KH * p.KW;
  uint K = Cg * KK;
  uint P = p.OH * p.OW;
  uint m0 = gl_WorkGroupID.y * TILE;
  uint p0 = gl_WorkGroupID.x * TILE;
  uint xlen = uint(x.length());
  uint wlen = uint(w.length());
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  // This slice's part of k: whole 16-deep steps, the last slice the rest.
  uint steps = (K + DEPTH - 1u) / DEPTH;
  uint per = (steps + S - 1u) / S;
  uint kbegin = min(slice * per, steps) * DEPTH;
  uint kend = min(kbegin + per * DEPTH, K);
  for (uint k0 = kbegin; k0 < kend; k0 += DEPTH) {
    for (uint l = 0u; l < 4u; ++l) {
      uint e = tid + l * 256u;
      uint ak = e % DEPTH;
      uint am = e / DEPTH;
      uint gm = m0 + am;
      uint gk = k0 + ak;
      float v = 0.0;
      if (gm < Mg && gk < kend) {
        uint wi = (g * Mg + gm) * K + gk;
        if (wi < wlen) v = w[wi];
      }
      As[ak][am] = v;
      uint bn = e % TILE;
      uint bk = e / TILE;
      uint gp = p0 + bn;
      uint gk2 = k0 + bk;
      v = 0.0;
      if (gp < P && gk2 < kend) {
        uint c = gk2 / KK;
        uint r = gk2 % KK;
        int ih = int((gp / p.OW) * p.sh + (r / p.KW) * p.dh) - int(p.pt);
        int iw = int((gp % p.OW) * p.sw + (r % p.KW) * p.dw) - int(p.pl);
        if (ih >= 0 && iw >= 0 && uint(ih) < p.H && uint(iw) < p.W) {
          uint xi = ((n * p.C + g * Cg + c) * p.H + uint(ih)) * p.W + uint(iw);
          if (xi < xlen) v = x[xi];
        }
      }
      Bs[bk][bn] = v;
    }
    barrier();
    for (uint kk = 0u; kk < DEPTH; ++kk) {
      float av[4];
      float bv[4];
      for (uint i = 0u; i < 4u; ++i) av[i] = As[kk][ty + 16u * i];
      for (uint j = 0u; j < 4u; ++j) bv[j] = Bs[kk][tx + 16u * j];
      for (uint i = 0u; i < 4u; ++i)
        for (uint j = 0u; j < 4u; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }

  bool has_bias = (p.flags & 4u) != 0u;
  uint act = (p.flags >> 3u) & 3u;
  uint ylen = uint(y.length());
  uint blen = uint(bias.length());
  for (uint i = 0u; i < 4u; ++i) {
    uint m = m0 + ty + 16u * i;
    if (m >= Mg) continue;
    uint oc = g * Mg + m;
    for (uint j = 0u; j < 4u; ++j) {
      uint q = p0 + tx + 16u * j;
      if (q >= P) continue;
      float v = acc[i][j];
      if (has_bias && slice == 0u && oc < blen) v += bias[oc];
      if (act == 1u) v = max(v, 0.0);
      uint yi = ((slice * p.N + n) * p.M + oc) * P + q;
      if (yi < ylen) y[yi] = v;
    }
  }
}
