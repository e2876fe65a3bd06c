// The requantization of QLinearConv's i32 sum, shared by qconv.comp and
// qconv_dot.comp (see qconv.comp for the arithmetic): the output byte of
// `acc` for an output channel of bias `bias` and multiplier `multiplier`,
// y of type `ytype` (1 u8, 2 i8) and zero point `y_zero`. `round_first`
// (types bit 13, the fused QDQ form): rounded half to even, then the zero
// point added, as QuantizeLinear does (and ONNX Runtime's QLinearConv).
uint requantize(int acc, int bias, float multiplier, int y_zero, uint ytype, bool round_first) {
  precise float scaled = float(double(acc) + double(bias)) * multiplier;
  int lo = ytype == 2u ? -128 : 0;
  int hi = ytype == 2u ? 127 : 255;
  int q = lo;  // NaN: the low end, as the reference
  if (!isnan(scaled)) {
    // roundEven(scaled + y_zero) of the exact sum (the reference adds in
    // double, exactly): a tie of scaled (fraction exactly 1/2) goes to the
    // even one of its neighbours after the zero point is added; otherwise
    // the nearest integer of scaled, plus the zero point. Clamped first so
    // that the conversion to int is defined.
    float s = clamp(scaled, -1024.0, 1024.0);
    float f = floor(s);
    int r = int(f);
    if (round_first) {
      r = int(roundEven(s));
    } else if (s - f == 0.5) {
      r += ((r + y_zero) & 1) != 0 ? 1 : 0;
    } else {
      r = int(roundEven(s));
    }
    q = clamp(r + y_zero, lo, hi);
  }
  return uint(q) & 255u;
}
