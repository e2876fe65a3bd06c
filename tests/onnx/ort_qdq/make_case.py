#!/usr/bin/env python3
"""Writes test_ort_qdq_cnn: a small QDQ CNN whose expected output is ONNX
Runtime's, frozen (issue 27's bound against ONNX Runtime as a regression
test, not only a benchmark run).

The model is what ONNX Runtime's static quantizer writes for a residual
block: an f32 input quantized to u8; DequantizeLinear -> Conv (3x3, s8
weights per output channel, i32 bias at x_scale * w_scale) ->
QuantizeLinear; a 1x1 Conv (weights per tensor) the same way; a residual
Add of the two quantized tensors (DequantizeLinear x 2 -> Add ->
QuantizeLinear, which ONNX Runtime runs as QLinearAdd); a MaxPool of the
bytes (DequantizeLinear -> MaxPool -> QuantizeLinear of one scale); a u8
output. Scales come from the f32 model's ranges on the input (a fixed
calibration), zero points are odd where it matters (ties). The expected
output is ONNX Runtime's, run on the CPU execution provider with every
graph optimization (it fuses the groups into QLinearConv / QLinearAdd),
through the peer's ort_bench.js:

    ../shared/peers/ort/setup.sh DIR      # ONNX Runtime 1.30 (npm)
    /usr/bin/python3 tests/onnx/ort_qdq/make_case.py --ort-dir DIR

cpu-simd must give these bytes exactly, with every node placed on it
(tests/onnx/CMakeLists.txt, onnx_conformance_cpu_simd_ort_qdq). The files
are checked in; the script rewrites them (identically while ONNX Runtime's
arithmetic stays the same).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
from onnx import helper, TensorProto

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import case_writer  # noqa: E402  (tests/onnx/case_writer.py)


def write_npy(path, a):
    np.save(path, a)


def conv2d(x, w, b, pad):
    """f32 NCHW convolution, stride 1 (the calibration's)."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow), np.float32)
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + oh, j:j + ow]
            y += np.einsum("nchw,mc->nmhw", patch, w[:, :, i, j])
    return y + b.reshape(1, -1, 1, 1)


def qparams(lo, hi):
    """u8 scale and zero point covering [min(lo, 0), max(hi, 0)]."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = np.float32((hi - lo) / 255.0)
    zero = np.uint8(np.clip(np.rint(-lo / scale), 0, 255))
    return scale, zero


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ort-dir", required=True, help="the ONNX Runtime peer (ort_bench.js there)")
    a = ap.parse_args()
    bench = os.path.join(a.ort_dir, "ort_bench.js")
    if not os.path.exists(bench):
        sys.exit(f"--ort-dir {a.ort_dir}: no ort_bench.js there")
    rng = np.random.default_rng(2027)
    x = rng.normal(0.0, 1.0, (1, 16, 24, 24)).astype(np.float32)
    w1f = rng.normal(0.0, 0.1, (32, 16, 3, 3)).astype(np.float32)
    b1f = rng.normal(0.0, 0.1, (32,)).astype(np.float32)
    w2f = rng.normal(0.0, 0.2, (32, 32, 1, 1)).astype(np.float32)
    b2f = rng.normal(0.0, 0.1, (32,)).astype(np.float32)

    # Weights: s8, symmetric, per output channel (w1) and per tensor (w2).
    w1s = (np.abs(w1f).reshape(32, -1).max(axis=1) / 127.0).astype(np.float32)
    w1q = np.clip(np.rint(w1f / w1s.reshape(-1, 1, 1, 1)), -127, 127).astype(np.int8)
    w2s = np.float32(np.abs(w2f).max() / 127.0)
    w2q = np.clip(np.rint(w2f / w2s), -127, 127).astype(np.int8)

    # Activations: calibrated on x through the f32 model.
    xs, xz = qparams(x.min(), x.max())
    y1 = conv2d(x, w1f, b1f, 1)
    s1, z1 = qparams(y1.min(), y1.max())
    y2 = conv2d(y1, w2f, b2f, 0)
    s2, z2 = qparams(y2.min(), y2.max())
    r = y1 + y2
    s3, z3 = qparams(r.min(), r.max())
    b1q = np.rint(b1f / (xs * w1s)).astype(np.int32)
    b2q = np.rint(b2f / (s1 * w2s)).astype(np.int32)

    inits = [
        ("xs", np.array(xs, np.float32)), ("xz", np.array(xz, np.uint8)),
        ("w1q", w1q), ("w1s", w1s), ("w1z", np.zeros(32, np.int8)),
        ("b1q", b1q), ("b1s", (xs * w1s).astype(np.float32)),
        ("s1", np.array(s1, np.float32)), ("z1", np.array(z1, np.uint8)),
        ("w2q", w2q), ("w2s", np.array(w2s, np.float32)), ("w2z", np.array(0, np.int8)),
        ("b2q", b2q), ("b2s", np.array(s1 * w2s, np.float32)),
        ("s2", np.array(s2, np.float32)), ("z2", np.array(z2, np.uint8)),
        ("s3", np.array(s3, np.float32)), ("z3", np.array(z3, np.uint8)),
    ]
    dq, q = "DequantizeLinear", "QuantizeLinear"
    nodes = [
        helper.make_node(q, ["x", "xs", "xz"], ["x_q"], name="x_q"),
        helper.make_node(dq, ["x_q", "xs", "xz"], ["x_dq"], name="x_dq"),
        helper.make_node(dq, ["w1q", "w1s", "w1z"], ["w1"], name="w1_dq", axis=0),
        helper.make_node(dq, ["b1q", "b1s"], ["b1"], name="b1_dq", axis=0),
        helper.make_node("Conv", ["x_dq", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node(q, ["c1", "s1", "z1"], ["c1_q"], name="c1_q"),
        helper.make_node(dq, ["c1_q", "s1", "z1"], ["c1_dq"], name="c1_dq"),
        helper.make_node(dq, ["w2q", "w2s", "w2z"], ["w2"], name="w2_dq"),
        helper.make_node(dq, ["b2q", "b2s"], ["b2"], name="b2_dq"),
        helper.make_node("Conv", ["c1_dq", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node(q, ["c2", "s2", "z2"], ["c2_q"], name="c2_q"),
        helper.make_node(dq, ["c2_q", "s2", "z2"], ["c2_dq"], name="c2_dq"),
        helper.make_node(dq, ["c1_q", "s1", "z1"], ["c1_dq2"], name="c1_dq2"),
        helper.make_node("Add", ["c1_dq2", "c2_dq"], ["sum"], name="add"),
        helper.make_node(q, ["sum", "s3", "z3"], ["sum_q"], name="sum_q"),
        helper.make_node(dq, ["sum_q", "s3", "z3"], ["sum_dq"], name="sum_dq"),
        helper.make_node("MaxPool", ["sum_dq"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(q, ["pool", "s3", "z3"], ["y"], name="y_q"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        # The model with a placeholder output, run by ONNX Runtime.
        placeholder = np.zeros((1, 32, 12, 12), np.uint8)
        case_writer.write_case(tmp, "loom tests/onnx/ort_qdq/make_case.py", "m", 13, nodes,
                               [("x", x)], [("y", placeholder)], inits)
        write_npy(os.path.join(tmp, "x.npy"), x)
        env = dict(os.environ, ORT_REPEAT="1", ORT_WARMUP="0", ORT_THREADS="1")
        subprocess.run(["node", bench, os.path.join(tmp, "m", "model.onnx"), os.path.join(tmp, "out"),
                        "x=" + os.path.join(tmp, "x.npy")], check=True, env=env, stdout=subprocess.DEVNULL)
        y = np.load(os.path.join(tmp, "out", "y.npy"))
    assert y.dtype == np.uint8 and y.shape == (1, 32, 12, 12), (y.dtype, y.shape)
    # Not a degenerate answer: most bytes away from the ends.
    inside = float(np.mean((y > 0) & (y < 255)))
    assert inside > 0.5, f"only {inside:.2f} of the output inside (0, 255)"
    case_writer.write_case(HERE, "loom tests/onnx/ort_qdq/make_case.py (expected: ONNX Runtime)",
                           "test_ort_qdq_cnn", 13, nodes, [("x", x)], [("y", y)], inits)
    print(f"wrote {os.path.join(HERE, 'test_ort_qdq_cnn')}: {y.size} bytes from ONNX Runtime, "
          f"{inside:.2f} inside (0, 255)")


if __name__ == "__main__":
    main()
