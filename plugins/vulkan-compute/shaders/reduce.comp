// ReduceSum / ReduceMean / ReduceMax (and sum then Relu, which adds up a
// split-K convolution's partial results) over the middle axis of an (outer,
// n, inner) view: one invocation per output. Push constants: kernels.hpp
// (kReduce).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows; uint n; uint inner; uint op; } p;

void main() {
  uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
             gl_LocalInvocationID.x;
  if (row >= p.rows || row >= uint(y.length())) return;
  uint base = (row / p.inner) * p.n * p.inner + row % p.inner;
  if (p.n != 0u && base + (p.n - 1u) * p.inner >= uint(x.length())) return;
  float acc = p.op == 2u ? uintBitsToFloat(0xff800000u) : 0.0;
  for (uint k = 0u; k < p.n; ++k) {
    float v = x[base + k * p.inner];
    acc = p.op == 2u ? max(acc, v) : acc + v;
  }
  if (p.op == 1u) acc = acc / float(p.n);
  if (p.op == 3u) acc = max(acc, 0.0);  // sum then Relu (split-K convolutions)
  y[row] = acc;
}
