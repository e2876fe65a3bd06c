// The packing pass of qconv_dot.comp (int8_dot.cpp adds it when it loads a
// blob on a device with shaderIntegerDotProduct; never in a blob): x, NCHW
// bytes, becomes words of four channels, [N][group][H * W][C4] with
// C4 = ceil(C / group / 4); byte j of word c4 is channel 4 * c4 + j of the
// group, 0 past the group's last channel (it meets weight bytes of 0).
// One invocation per word.
// Push constants: count (words), C, H * W, group.
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer X { uint8_t x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer P { uint packed[]; };
layout(push_constant) uniform Push { uint count; uint C; uint HW; uint group; } p;

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u + gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(packed.length())) return;
  uint Cg = p.C / p.group;
  uint C4 = (Cg + 3u) / 4u;
  uint c4 = i % C4;
  uint t = i / C4;
  uint pixel = t % p.HW;
  t /= p.HW;  // n * group + g
  uint g = t % p.group;
  uint n = t / p.group;
  uint xlen = uint(x.length());
  uint word = 0u;
  for (uint j = 0u; j < 4u; ++j) {
    uint c = 4u * c4 + j;
    if (c >= Cg) break;
    uint xi = (n * p.C + g * Cg + c) * p.HW + pixel;
    if (xi < xlen) word |= uint(x[xi]) << (8u * j);
  }
  packed[i] = word;
}
