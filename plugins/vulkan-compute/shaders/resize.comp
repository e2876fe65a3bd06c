// Resize (nearest and n-linear) through per-axis tap tables computed at
// compile time: for output coordinate o of axis d the table holds (i0, i1,
// w), and that axis contributes (1 - w) * x[.., i0, ..] + w * x[.., i1, ..].
// Nearest modes store i0 == i1 and w == 0, so one kernel serves both; the
// coordinate transformation and rounding live entirely in the table. Taps
// are clamped to the input extent and every access to its buffer's length.
// One invocation per output element. Push constants: kernels.hpp (kResize).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer T { float table[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint count; uint rank; uint in_dims[6]; uint out_dims[6]; } p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(y.length())) return;
  uint rank = min(p.rank, 6u);
  uint tlen = uint(table.length());
  uint xlen = uint(x.length());
  // Per axis: the two input offsets (element index times the axis stride)
  // and the weight of the second.
  uint off0[6];
  uint off1[6];
  float wt[6];
  uint rem = i;
  uint stride = 1u;
  uint base = 0u;
  for (uint d = 0u; d < rank; ++d) base += 3u * p.out_dims[d];
  for (int d = int(rank) - 1; d >= 0; --d) {
    uint od = max(p.out_dims[d], 1u);
    uint id = max(p.in_dims[d], 1u);
    uint o = rem % od;
    rem /= od;
    base -= 3u * p.out_dims[d];
    uint t = base + 3u * o;
    float i0 = t + 2u < tlen ? table[t] : 0.0;
    float i1 = t + 2u < tlen ? table[t + 1u] : 0.0;
    wt[d] = t + 2u < tlen ? table[t + 2u] : 0.0;
    off0[d] = min(uint(max(i0, 0.0)), id - 1u) * stride;
    off1[d] = min(uint(max(i1, 0.0)), id - 1u) * stride;
    stride *= id;
  }
  float acc = 0.0;
  uint corners = 1u << rank;
  for (uint c = 0u; c < corners; ++c) {
    float weight = 1.0;
    uint xi = 0u;
    for (uint d = 0u; d < rank; ++d) {
      bool second = ((c >> d) & 1u) != 0u;
      weight *= second ? wt[d] : 1.0 - wt[d];
      xi += second ? off1[d] : off0[d];
    }
    if (weight != 0.0 && xi < xlen) acc += weight * x[xi];
  }
  y[i] = acc;
}
