// DequantizeLinear with the reference kernel's arithmetic, bit for bit:
// y[i] = float(x[i] - zero_point[c]) * scale[c] in f32, c = (i / inner) %
// channels (1 channel: per tensor); x is u8, i8 (bytes) or i32 (its zero
// point is 0). The table holds the scales, then the zero points as floats.
// Push constants: int8_kernels.hpp (kDequantize). Needs shaderInt8 and
// storageBuffer8BitAccess.
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x = 256) in;
// x is bound once and read as bytes or as i32, as its dtype says.
layout(std430, set = 0, binding = 0) readonly buffer X8 { uint8_t x8[]; };
layout(std430, set = 0, binding = 0) readonly buffer X32 { int x32[]; };
layout(std430, set = 0, binding = 1) readonly buffer T { float table[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint count; uint channels; uint inner; uint xtype; } p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(y.length())) return;
  uint c = p.channels <= 1u ? 0u : (i / p.inner) % p.channels;
  if (c + p.channels >= uint(table.length())) return;
  int v;
  if (p.xtype == 3u) {  // i32
    if (i >= uint(x32.length())) return;
    v = x32[i];
  } else {
    if (i >= uint(x8.length())) return;
    v = int(uint(x8[i]));
    if (p.xtype == 2u && v >= 128) v -= 256;  // i8
  }
  int zp = int(table[p.channels + c]);
  precise float r = float(v - zp) * table[c];
  y[i] = r;
}
