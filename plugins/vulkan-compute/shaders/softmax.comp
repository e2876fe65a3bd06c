// Softmax / LogSoftmax over the middle axis of an (outer, n, inner) view: one
// invocation per (outer, inner) row. Push constants: kernels.hpp (kSoftmax).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows; uint n; uint inner; uint log_softmax; } p;

void main() {
  uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
             gl_LocalInvocationID.x;
  if (row >= p.rows) return;
  uint o = row / p.inner;
  uint i = row % p.inner;
  uint base = o * p.n * p.inner + i;
  uint last = base + (p.n - 1u) * p.inner;
  if (p.n == 0u || last >= uint(x.length()) || last >= uint(y.length())) return;
  float m = x[base];
  for (uint k = 1u; k < p.n; ++k) m = max(m, x[base + k * p.inner]);
  float s = 0.0;
  for (uint k = 0u; k < p.n; ++k) s += exp(x[base + k * p.inner] - m);
  if (p.log_softmax != 0u) {
    float ls = log(s);
    for (uint k = 0u; k < p.n; ++k) y[base + k * p.inner] = x[base + k * p.inner] - m - ls;
  } else {
    float r = 1.0 / s;
    for (uint k = 0u; k < p.n; ++k) y[base + k * p.inner] = exp(x[base + k * p.inner] - m) * r;
  }
}
