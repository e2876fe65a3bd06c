// y = a op b with broadcasting by element strides. Push constants and op
// numbers: kernels.hpp (kBinary).
#version 450
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint count; uint op; uint rank; uint dims[6]; uint sa[6]; uint sb[6];
} p;

float power(float x, float e) {
  if (e == 0.0) return 1.0;
  if (x >= 0.0) return pow(x, e);
  if (e != floor(e)) return uintBitsToFloat(0x7fc00000u);  // NaN, as ONNX/C pow
  float r = pow(-x, e);
  return mod(e, 2.0) == 1.0 ? -r : r;
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(y.length())) return;
  uint rem = i;
  uint ia = 0u;
  uint ib = 0u;
  if (p.rank == 1u) {
    ia = i * p.sa[0];
    ib = i * p.sb[0];
  } else for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint n = p.dims[d];
    uint c = rem % n;
    rem /= n;
    ia += c * p.sa[d];
    ib += c * p.sb[d];
  }
  if (ia >= uint(a.length()) || ib >= uint(b.length())) return;
  float u = a[ia];
  float v = b[ib];
  float r = 0.0;
  switch (p.op) {
    case 0u: r = u + v; break;
    case 1u: r = u - v; break;
    case 2u: r = u * v; break;
    case 3u: r = u / v; break;
    case 4u: r = power(u, v); break;
    case 5u: r = max(u, v); break;
    case 6u: r = min(u, v); break;
    case 7u: r = u < 0.0 ? u * v : u; break;
    case 8u: r = u; break;
  }
  y[i] = r;
}
