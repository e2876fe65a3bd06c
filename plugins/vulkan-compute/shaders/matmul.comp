// Batched, tiled y = act(alpha * op(A) op(B) + beta * C). Each workgroup
// computes a 64 x 64 output tile with 16 x 16 invocations of 4 x 4 outputs,
// staging 16-deep slices of A and B in shared memory. Push constants:
// kernels.hpp (kMatMul).
#version 450
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer C { float c[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint M; uint N; uint K; uint batch; uint sa; uint sb; uint sc; uint flags;
  float alpha; float beta; uint crow; uint ccol;
} p;

const uint TILE = 64u;
const uint DEPTH = 16u;
shared float As[DEPTH][TILE];
shared float Bs[DEPTH][TILE];

void main() {
  uint tx = gl_LocalInvocationID.x;
  uint ty = gl_LocalInvocationID.y;
  uint tid = ty * 16u + tx;
  uint n0 = gl_WorkGroupID.x * TILE;
  uint m0 = gl_WorkGroupID.y * TILE;
  uint z = gl_WorkGroupID.z;
  bool ta = (p.flags & 1u) != 0u;
  bool tb = (p.flags & 2u) != 0u;
  uint abase = z * p.sa;
  uint bbase = z * p.sb;
  uint alen = uint(a.length());
  uint blen = uint(b.length());
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0u; k0 < p.K; k0 += DEPTH) {
    for (uint l = 0u; l < 4u; ++l) {
      uint e = tid + l * 256u;
      // A slice: 64 rows (m) x 16 columns (k); consecutive e walk k when A
      // is row-major, m when it is transposed.
      uint ak = ta ? e / TILE : e % DEPTH;
      uint am = ta ? e % TILE : e / DEPTH;
      uint gm = m0 + am;
      uint gk = k0 + ak;
      float v = 0.0;
      if (gm < p.M && gk < p.K) {
        uint idx = abase + (ta ? gk * p.M + gm : gm * p.K + gk);
        if (idx < alen) v = a[idx];
      }
      As[ak][am] = v;
      // B slice: 16 rows (k) x 64 columns (n).
      uint bk = tb ? e % DEPTH : e / TILE;
      uint bn = tb ? e / DEPTH : e % TILE;
      uint gn = n0 + bn;
      uint gk2 = k0 + bk;
      v = 0.0;
      if (gn < p.N && gk2 < p.K) {
        uint idx = bbase + (tb ? gn * p.K + gk2 : gk2 * p.N + gn);
        if (idx < blen) v = b[idx];
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

  bool bias = (p.flags & 4u) != 0u;
  uint act = (p.flags >> 3u) & 3u;
  uint ylen = uint(y.length());
  uint clen = uint(c.length());
  for (uint i = 0u; i < 4u; ++i) {
    uint m = m0 + ty + 16u * i;
    if (m >= p.M) continue;
    for (uint j = 0u; j < 4u; ++j) {
      uint n = n0 + tx + 16u * j;
      if (n >= p.N) continue;
      float v = p.alpha * acc[i][j];
      if (bias) {
        uint ci = z * p.sc + m * p.crow + n * p.ccol;
        if (ci < clen) v += p.beta * c[ci];
      }
      if (act == 1u) v = max(v, 0.0);
      uint yi = (z * p.M + m) * p.N + n;
      if (yi < ylen) y[yi] = v;
    }
  }
}
