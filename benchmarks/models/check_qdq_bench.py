#!/usr/bin/python3
"""Exact integer emulation of make_qdq_bench.py's QDQ model (each fused
group as QLinearConv / QLinearMatMul: integer accumulators, then
float(acc + bias) * float(x_scale * w_scale / y_scale) widened to double,
plus the zero point, rounded half to even, clamped), compared with logits
written by Loom and / or ONNX Runtime, in units of the output's scale. Also
counts, per convolution, the pairs of neighbouring u8 x s8 products (along
input channels, and along the (c, kh, kw) order) whose sum leaves s16, as a
vpmaddubsw without VNNI would saturate them (x's pads taken as 0).

Usage: check_qdq_bench.py DIR NAME=LOGITS.npy ...
  (DIR holds qdq_bench.onnx and input.npy from make_qdq_bench.py)

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def quantize(v, scale, zero):
    return np.clip(np.rint(v / np.float32(scale)).astype(np.float32) + np.float32(zero), 0, 255).astype(np.int64)


def requantize(acc, bias, x_scale, w_scale, y_scale, zero, lo):
    mult = (np.float32(x_scale) * w_scale.astype(np.float32) / np.float32(y_scale)).astype(np.float32)
    scaled = ((acc + bias).astype(np.float32) * mult).astype(np.float32).astype(np.float64) + zero
    return np.clip(np.rint(scaled), max(lo, 0), 255).astype(np.int64)


def saturating_pairs(x, w):
    """Pairs of neighbouring products leaving s16: (along channels, along (c, kh, kw))."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    # c, 9 taps, h * w
    cols = np.stack([xp[0, :, r:r + h, s:s + wd].reshape(c, -1) for r in range(3) for s in range(3)], axis=1)
    w = w.reshape(w.shape[0], c, 9)

    def count(order_w, order_x):
        total = 0
        for j in range(0, order_w.shape[1] // 2 * 2, 2):
            p = np.outer(order_w[:, j], order_x[j]) + np.outer(order_w[:, j + 1], order_x[j + 1])
            total += int(((p > 32767) | (p < -32768)).sum())
        return total

    by_channel = sum(count(w[:, :, t], cols[:, t]) for t in range(9))
    by_k = count(w.reshape(w.shape[0], c * 9), cols.reshape(c * 9, -1))
    return by_channel, by_k


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    model = onnx.load(d + "/qdq_bench.onnx")
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    layers = sum(1 for k in init if k.startswith("w") and k.endswith("_q"))
    a = quantize(np.load(d + "/input.npy"), init["a0_s"], init["a0_z"])
    for i in range(layers):
        w = init[f"w{i}_q"].astype(np.int64)
        n, c, h, wd = a.shape
        pairs = saturating_pairs(a, w)
        print(f"conv {i}: saturating pairs along channels {pairs[0]}, along (c, kh, kw) {pairs[1]}")
        xp = np.pad(a - int(init[f"a{i}_z"]), ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = np.stack([xp[:, :, r:r + h, s:s + wd] for r in range(3) for s in range(3)], axis=2)
        acc = np.einsum("nckhw,mck->nmhw", cols, w.reshape(w.shape[0], c, 9))
        zero = int(init[f"a{i + 1}_z"])
        a = requantize(acc, init[f"w{i}_bq"].astype(np.int64).reshape(1, -1, 1, 1), init[f"a{i}_s"],
                       init[f"w{i}_s"].reshape(1, -1, 1, 1), init[f"a{i + 1}_s"], zero, zero)
    g = ((a - int(init[f"a{layers}_z"])).astype(np.float32) * np.float32(init[f"a{layers}_s"])).mean(
        axis=(2, 3), dtype=np.float32)
    gq = quantize(g, init[f"a{layers + 1}_s"], init[f"a{layers + 1}_z"])
    acc = (gq - int(init[f"a{layers + 1}_z"])) @ init["fc_q"].astype(np.int64).T
    out_s, out_z = init[f"a{layers + 2}_s"], int(init[f"a{layers + 2}_z"])
    out = requantize(acc, init["fc_bq"].astype(np.int64), init[f"a{layers + 1}_s"], init["fc_s"], out_s, out_z, -1)
    logits = (out - out_z).astype(np.float32) * np.float32(out_s)
    for spec in sys.argv[2:]:
        name, path = spec.split("=", 1)
        other = np.load(path).reshape(logits.shape)
        print(f"{name}: largest difference from the exact result {np.abs(other - logits).max() / float(out_s):.3f} "
              f"output units, bit for bit equal: {np.array_equal(other, logits)}")


if __name__ == "__main__":
    main()
