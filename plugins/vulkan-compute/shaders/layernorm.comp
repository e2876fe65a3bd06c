// LayerNormalization over the last `n` elements of each of `rows` rows, as
// ONNX defines it (mean, then the mean of squared deviations, then
// (x - mean) / sqrt(var + epsilon) * scale + bias), with scale and bias of n
// elements: one invocation per row. Push constants: kernels.hpp
// (kLayerNorm).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer S { float scale[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint rows; uint n; uint has_bias; float epsilon; } p;

void main() {
  uint row = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
             gl_LocalInvocationID.x;
  if (row >= p.rows || p.n == 0u) return;
  uint base = row * p.n;
  uint last = base + p.n - 1u;
  if (last >= uint(x.length()) || last >= uint(y.length()) || p.n > uint(scale.length()) ||
      (p.has_bias != 0u && p.n > uint(bias.length()))) {
    return;
  }
  float sum = 0.0;
  for (uint k = 0u; k < p.n; ++k) sum += x[base + k];
  float mean = sum / float(p.n);
  float sq = 0.0;
  for (uint k = 0u; k < p.n; ++k) {
    float d = x[base + k] - mean;
    sq += d * d;
  }
  float inv = 1.0 / sqrt(sq / float(p.n) + p.epsilon);
  for (uint k = 0u; k < p.n; ++k) {
    float v = (x[base + k] - mean) * inv * scale[k];
    if (p.has_bias != 0u) v += bias[k];
    y[base + k] = v;
  }
}
