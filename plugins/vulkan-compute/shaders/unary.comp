// y = op(x) elementwise. Push constants and op numbers: kernels.hpp (kUnary).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint count; uint op; float alpha; float beta; } p;

// Abramowitz and Stegun 7.1.26 refined: |error| < 1.5e-7.
float erf_approx(float v) {
  float a = abs(v);
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 +
               t * (-1.453152027 + t * 1.061405429))));
  float r = 1.0 - poly * exp(-a * a);
  return v < 0.0 ? -r : r;
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(x.length()) || i >= uint(y.length())) return;
  float v = x[i];
  float r = v;
  switch (p.op) {
    case 0u: r = v; break;
    case 1u: r = v > 0.0 ? v : 0.0; break;
    case 2u: r = 1.0 / (1.0 + exp(-v)); break;
    case 3u: r = tanh(clamp(v, -15.0, 15.0)); break;
    case 4u: r = exp(v); break;
    case 5u: r = v < 0.0 ? uintBitsToFloat(0x7fc00000u) : sqrt(v); break;
    case 6u: r = erf_approx(v); break;
    case 7u: r = abs(v); break;
    case 8u: r = -v; break;
    case 9u: r = min(max(v, p.alpha), p.beta); break;
    case 10u: r = clamp(p.alpha * v + p.beta, 0.0, 1.0); break;
    case 11u: r = v * clamp(v / 6.0 + 0.5, 0.0, 1.0); break;
    case 12u: r = v >= 0.0 ? v : p.alpha * v; break;
    case 13u: r = v < 0.0 ? uintBitsToFloat(0x7fc00000u) : (v == 0.0 ? -1.0 / 0.0 : log(v)); break;
    case 14u: r = 1.0 / v; break;
    case 15u: r = floor(v); break;
    case 16u: r = ceil(v); break;
    case 17u: r = v >= 0.0 ? v : p.alpha * (exp(v) - 1.0); break;
    case 18u: r = v > 20.0 ? v : log(1.0 + exp(v)); break;
    case 19u: r = sin(v); break;
    case 20u: r = cos(v); break;
  }
  y[i] = r;
}
