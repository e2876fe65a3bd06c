// QuantizeLinear with the reference kernel's arithmetic, bit for bit:
// y[i] = saturate(roundEven(x[i] / scale[c]) + zero_point[c]) in f32, NaN to
// 0, where c = (i / inner) % channels (1 channel: per tensor). The f32
// quotient is the double quotient rounded to f32: a double division of two
// floats is within far less than half an f32 ulp of the exact quotient,
// which is never an f32 rounding tie, so this is the correctly rounded f32
// division on any device (an f32 division in SPIR-V may be 2.5 ulp off).
// The table holds the scales, then the zero points as floats. Push
// constants: kernels (int8_kernels.hpp, kQuantize). Needs shaderInt8,
// storageBuffer8BitAccess and shaderFloat64.
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer T { float table[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint8_t y[]; };
layout(push_constant) uniform P { uint count; uint channels; uint inner; uint is_signed; } p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(x.length()) || i >= uint(y.length())) return;
  uint c = p.channels <= 1u ? 0u : (i / p.inner) % p.channels;
  if (c + p.channels >= uint(table.length())) return;
  precise float q = float(double(x[i]) / double(table[c]));
  precise float v = roundEven(q) + table[p.channels + c];
  float lo = p.is_signed != 0u ? -128.0 : 0.0;
  float hi = p.is_signed != 0u ? 127.0 : 255.0;
  int r = isnan(v) ? 0 : int(clamp(v, lo, hi));
  y[i] = uint8_t(uint(r) & 255u);
}
