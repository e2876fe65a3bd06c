// qbinary (format 5): a quantized Add or Mul of u8 / i8 tensors with
// binary.comp's broadcasting, the fused DequantizeLinear x 2 -> Add / Mul ->
// QuantizeLinear form, with ONNX Runtime's QLinearAdd / QLinearMul
// arithmetic on the raw bytes (as cpu-simd's qadd; fuse_qdq.cpp computes
// the parameters):
//   Add: y = fma(u, u_ratio, fma(w, w_ratio, fixed)), u = a and w = b, or
//        the other way round with the swap flag
//   Mul: y = float((a - a_zero) * (b - b_zero)) * ratio + y_zero, rounded
//        after the product and after the sum (`precise`: no contraction)
// then rounded half to even and saturated, NaN to 0. The fused
// multiply-adds are exact where the device's fma rounds once (lavapipe and
// the GPUs we know do; Vulkan lets fma round twice).
// Push constants: int8_kernels.hpp (kQBinaryPush).
#version 450
#extension GL_EXT_shader_8bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer A { uint8_t a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint8_t b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint8_t y[]; };
layout(push_constant) uniform P {
  uint count; uint op; uint rank; uint dims[6]; uint sa[6]; uint sb[6];
  uint types; int a_zero; int b_zero; int y_zero; float f0; float f1; float f2;
} p;

int load8(uint8_t v, bool is_signed) {
  int i = int(uint(v));
  return is_signed && i >= 128 ? i - 256 : i;
}

void main() {
  uint i = (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * 256u +
           gl_LocalInvocationID.x;
  if (i >= p.count || i >= uint(y.length())) return;
  uint rem = i;
  uint ia = 0u;
  uint ib = 0u;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    uint n = p.dims[d];
    uint c = rem % n;
    rem /= n;
    ia += c * p.sa[d];
    ib += c * p.sb[d];
  }
  if (ia >= uint(a.length()) || ib >= uint(b.length())) return;
  int av = load8(a[ia], (p.types & 15u) == 2u);
  int bv = load8(b[ib], ((p.types >> 4u) & 15u) == 2u);
  bool y_signed = ((p.types >> 8u) & 15u) == 2u;
  precise float r;
  if (p.op == 2u) {
    r = float((av - p.a_zero) * (bv - p.b_zero)) * p.f0 + float(p.y_zero);
  } else {
    bool swap = (p.types & 4096u) != 0u;
    float u = float(swap ? bv : av);
    float w = float(swap ? av : bv);
    // fma in double: u and w are integers below 2^8 in magnitude, so each
    // product is exact in double; the sum is rounded once to double, then
    // to f32 (lavapipe's GLSL fma() rounds twice).
    precise float inner = float(double(w) * double(p.f1) + double(p.f2));
    r = float(double(u) * double(p.f0) + double(inner));
  }
  int q = 0;  // NaN
  if (!isnan(r)) {
    float lo = y_signed ? -128.0 : 0.0;
    float hi = y_signed ? 127.0 : 255.0;
    q = int(clamp(roundEven(clamp(r, -1024.0, 1024.0)), lo, hi));
  }
  y[i] = uint8_t(uint(q) & 255u);
}
