// Batched, tiled y = act(alpha * op(A) op(B) + beta * C). Each workgroup
// computes a 128 x 128 output tile with 16 x 16 invocations of 8 x 8 outputs
// (rows ty*4..+3 and 64+ty*4..+3, columns tx*4..+3 and 64+tx*4..+3, so that
// every shared-memory read is one vec4 and 16 invocations read 16 distinct
// vec4s), staging 16-deep slices of A and B in shared memory, A stored
// k-major so that both operands are read the same way; the next slice is
// fetched into registers while the current one is multiplied. Push
// constants: kernels.hpp (kMatMul).
#version 450
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 16, local_size_y = 16) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer C { float c[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint M; uint N; uint K; uint batch; uint sa; uint sb; uint sc; uint flags;
  float alpha; float beta; uint crow; uint ccol;
} p;

const uint TILE = 128u;
const uint DEPTH = 16u;
shared vec4 As[DEPTH][TILE / 4u];  // As[k][m / 4], component m % 4
shared vec4 Bs[DEPTH][TILE / 4u];  // Bs[k][n / 4], component n % 4

// Per invocation, set at the start of main(). Each invocation fetches 8
// elements of each operand's next slice into registers while the current
// slice is multiplied: 8 consecutive in memory along k (row-major A,
// transposed B) from row nr, column nk; else two runs of 4 along m or n,
// from column wc of k rows wk and wk + 8.
uint m0, n0, abase, bbase, alen, blen, wk, wc, nr, nk;
bool ta, tb;

// Element (m, k) of A, or 0 outside the matrix or the buffer.
float load_a(uint m, uint k) {
  if (m >= p.M || k >= p.K) return 0.0;
  uint idx = abase + (ta ? k * p.M + m : m * p.K + k);
  return idx < alen ? a[idx] : 0.0;
}

// Element (k, n) of B, or 0 outside.
float load_b(uint k, uint n) {
  if (n >= p.N || k >= p.K) return 0.0;
  uint idx = bbase + (tb ? n * p.K + k : k * p.N + n);
  return idx < blen ? b[idx] : 0.0;
}

// This invocation's elements of the slice starting at k0. A slice wholly
// inside both matrices and buffers (every one but the edges of a large
// product) is read without per-element checks.
void fetch(uint k0, out float ra[8], out float rb[8]) {
  uint klast = k0 + DEPTH - 1u;
  uint alast = abase + (ta ? klast * p.M + m0 + TILE - 1u : (m0 + TILE - 1u) * p.K + klast);
  uint blast = bbase + (tb ? (n0 + TILE - 1u) * p.K + klast : klast * p.N + n0 + TILE - 1u);
  bool inside = m0 + TILE <= p.M && n0 + TILE <= p.N && klast < p.K && alast < alen && blast < blen;
  if (inside) {
    [[unroll]] for (uint q = 0u; q < 8u; ++q) {
      ra[q] = ta ? a[abase + (k0 + wk + 8u * (q / 4u)) * p.M + m0 + wc + (q % 4u)]
                 : a[abase + (m0 + nr) * p.K + k0 + nk + q];
      rb[q] = tb ? b[bbase + (n0 + nr) * p.K + k0 + nk + q]
                 : b[bbase + (k0 + wk + 8u * (q / 4u)) * p.N + n0 + wc + (q % 4u)];
    }
  } else {
    [[unroll]] for (uint q = 0u; q < 8u; ++q) {
      ra[q] = ta ? load_a(m0 + wc + (q % 4u), k0 + wk + 8u * (q / 4u)) : load_a(m0 + nr, k0 + nk + q);
      rb[q] = tb ? load_b(k0 + nk + q, n0 + nr) : load_b(k0 + wk + 8u * (q / 4u), n0 + wc + (q % 4u));
    }
  }
}

void main() {
  uint tx = gl_LocalInvocationID.x;
  uint ty = gl_LocalInvocationID.y;
  uint tid = ty * 16u + tx;
  n0 = gl_WorkGroupID.x * TILE;
  m0 = gl_WorkGroupID.y * TILE;
  uint z = gl_WorkGroupID.z;
  ta = (p.flags & 1u) != 0u;
  tb = (p.flags & 2u) != 0u;
  abase = z * p.sa;
  bbase = z * p.sb;
  alen = uint(a.length());
  blen = uint(b.length());
  vec4 acc[8][2];
  [[unroll]] for (int i = 0; i < 8; ++i) {
    acc[i][0] = vec4(0.0);
    acc[i][1] = vec4(0.0);
  }

  wk = tid / 32u;
  wc = (tid % 32u) * 4u;
  nr = tid / 2u;
  nk = (tid % 2u) * 8u;
  float ra[8];
  float rb[8];
  fetch(0u, ra, rb);

  for (uint k0 = 0u; k0 < p.K; k0 += DEPTH) {
    if (ta) {
      As[wk][wc / 4u] = vec4(ra[0], ra[1], ra[2], ra[3]);
      As[wk + 8u][wc / 4u] = vec4(ra[4], ra[5], ra[6], ra[7]);
    } else {
      [[unroll]] for (uint q = 0u; q < 8u; ++q) As[nk + q][nr / 4u][nr % 4u] = ra[q];
    }
    if (tb) {
      [[unroll]] for (uint q = 0u; q < 8u; ++q) Bs[nk + q][nr / 4u][nr % 4u] = rb[q];
    } else {
      Bs[wk][wc / 4u] = vec4(rb[0], rb[1], rb[2], rb[3]);
      Bs[wk + 8u][wc / 4u] = vec4(rb[4], rb[5], rb[6], rb[7]);
    }
    barrier();
    if (k0 + DEPTH < p.K) fetch(k0 + DEPTH, ra, rb);
    [[unroll]] for (uint kk = 0u; kk < DEPTH; ++kk) {
      vec4 a0 = As[kk][ty];
      vec4 a1 = As[kk][16u + ty];
      vec4 b0 = Bs[kk][tx];
      vec4 b1 = Bs[kk][16u + tx];
      [[unroll]] for (int i = 0; i < 4; ++i) {
        acc[i][0] += a0[i] * b0;
        acc[i][1] += a0[i] * b1;
        acc[4 + i][0] += a1[i] * b0;
        acc[4 + i][1] += a1[i] * b1;
      }
    }
    barrier();
  }

  bool bias = (p.flags & 4u) != 0u;
  uint act = (p.flags >> 3u) & 3u;
  uint ylen = uint(y.length());
  uint clen = uint(c.length());
  [[unroll]] for (uint i = 0u; i < 8u; ++i) {
    uint m = m0 + (i < 4u ? ty * 4u + i : 64u + ty * 4u + (i - 4u));
    [[unroll]] for (uint h = 0u; h < 2u; ++h) {
      [[unroll]] for (uint j = 0u; j < 4u; ++j) {
        uint n = n0 + h * 64u + tx * 4u + j;
        if (m < p.M && n < p.N) {
          float v = p.alpha * acc[i][h][j];
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
  }
}
