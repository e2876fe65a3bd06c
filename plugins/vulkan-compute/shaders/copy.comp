// A strided copy of a box of `count` elements: element (i0, ..., i{rank-1})
// of the box is read at x[x0 + sum(i_d * sx_d)] (signed strides: Slice with
// negative steps) and written at y[y0 + sum(i_d * sy_d)] (Concat writes each
// input into its part of y). Push constants: kernels.hpp (kCopy).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint count; uint rank; uint x0; uint y0; uint dims[6]; int sx[6]; uint sy[6];
} p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count) return;
  uint rem = i;
  int ix = int(p.x0);
  uint iy = p.y0;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint dim = max(p.dims[d], 1u);
    uint k = rem % dim;
    rem /= dim;
    ix += int(k) * p.sx[d];
    iy += k * p.sy[d];
  }
  if (ix < 0 || uint(ix) >= uint(x.length()) || iy >= uint(y.length())) return;
  y[iy] = x[uint(ix)];
}
