#!/usr/bin/env python3
"""Writes the hand-made int8 ONNX cases of this folder for vulkan-compute.

The ONNX backend test data feeds every scale and zero point of the
quantized node tests as a graph input; vulkan-compute folds them into tables
at compile time and so declines those nodes (they pass on the reference
kernels). These cases keep scales, zero points, biases and weights as
initializers, as quantized models do, so that every node runs on the device
(tests/onnx/CMakeLists.txt, onnx_conformance_vulkan_compute_placed). Their
expected outputs are computed here with numpy, with the reference kernels'
arithmetic (core/src/kernels: QuantizeLinear nearbyint(x / scale) + zero
point in f32; requantization float(acc + bias) * float(x_scale * w_scale /
y_scale) in f32, widened to double, plus the zero point, rounded half to
even), not by any ONNX runtime. Layout of the ONNX backend test data
(model.onnx, test_data_set_0/input_<i>.pb, output_<i>.pb). Run from anywhere:

    /usr/bin/python3 tests/onnx/vulkan_int8/make_cases.py

The files it writes are checked in; rerunning it rewrites them identically.
"""
import os
import sys

import numpy as np
from onnx import helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import case_writer  # noqa: E402  (tests/onnx/case_writer.py)
RNG = np.random.default_rng(27)

def write_case(name, opset, nodes, inputs, outputs, initializers=()):
    """inputs/outputs/initializers: lists of (name, numpy array)."""
    case_writer.write_case(HERE, "loom tests/onnx/vulkan_int8/make_cases.py", name, opset, nodes, inputs, outputs, initializers)


def saturate(v, dtype):
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


def quantize(x, scale, zero, axis=1):
    """QuantizeLinear in f32: nearbyint(x / scale) + zero point, saturated."""
    shape = [1] * x.ndim
    if np.ndim(scale) == 1:
        shape[axis] = -1
    s = np.reshape(np.asarray(scale, np.float32), shape)
    z = np.reshape(np.asarray(zero), shape).astype(np.float32)
    v = np.rint(x / s) + z
    return saturate(v, np.asarray(zero).dtype)


def requantize(acc, multiplier, zero, dtype):
    """float(acc) * multiplier in f32, widened to double, plus the zero
    point, rounded half to even and saturated."""
    scaled = (acc.astype(np.float32) * multiplier.astype(np.float32)).astype(np.float32)
    return saturate(np.rint(scaled.astype(np.float64) + float(zero)), dtype)


def requantize_round_first(acc, multiplier, zero, dtype):
    """The fused QDQ form's requantization: float(acc) * multiplier in f32,
    rounded half to even, then the zero point added (QuantizeLinear's
    order), saturated."""
    scaled = (acc.astype(np.float32) * multiplier.astype(np.float32)).astype(np.float32)
    return saturate(np.rint(scaled.astype(np.float64)) + float(zero), dtype)


def conv_acc(xq, xz, w, wz, pads, strides, group=1):
    """The i32 accumulator of a 2-D convolution of `group` groups, zero
    points subtracted, padding contributing nothing."""
    n, c, h, wd = xq.shape
    m, _, kh, kw = w.shape
    xi = xq.astype(np.int64) - int(xz)
    xi = np.pad(xi, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    wi = w.astype(np.int64) - np.reshape(np.asarray(wz, np.int64), (-1, 1, 1, 1))
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - kw) // strides[1] + 1
    acc = np.zeros((n, m, oh, ow), np.int64)
    cg, mg = c // group, m // group
    for g in range(group):
        for i in range(oh):
            for j in range(ow):
                patch = xi[:, g * cg:(g + 1) * cg, i * strides[0]:i * strides[0] + kh, j * strides[1]:j * strides[1] + kw]
                acc[:, g * mg:(g + 1) * mg, i, j] = np.einsum("nchw,mchw->nm", patch, wi[g * mg:(g + 1) * mg])
    return acc.astype(np.int32)


def qdq_qlinearconv():
    """f32 x -> QuantizeLinear (u8) -> QLinearConv (u8 x, i8 w per channel,
    a bias, pads, stride 2) -> DequantizeLinear; outputs the u8 tensor too."""
    x = (RNG.standard_normal((1, 3, 7, 7)) * 2).astype(np.float32)
    x.flat[:6] = [0.125, 0.375, -0.125, 6.5, -6.5, 100.0]  # ties at scale 0.25, saturation
    xs, xz = np.float32(0.25), np.uint8(129)
    w = RNG.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    ws = np.array([0.01, 0.02, 0.005, 0.03], np.float32)
    wz = np.array([0, 1, -1, 3], np.int8)
    ys, yz = np.float32(0.05), np.uint8(127)
    b = np.array([-300, 0, 77, 1001], np.int32)
    pads, strides = (1, 1, 1, 1), (2, 2)
    xq = quantize(x, xs, xz)
    acc = conv_acc(xq, xz, w, wz, pads, strides).astype(np.int64) + b.reshape(1, -1, 1, 1)
    multiplier = (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1)
    yq = requantize(acc, multiplier, yz, np.uint8)
    y = ((yq.astype(np.int32) - int(yz)).astype(np.float32) * ys).astype(np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["yq"],
                         pads=list(pads), strides=list(strides)),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    write_case("test_vulkan_int8_qdq_qlinearconv", 13, nodes, [("x", x)], [("yq", yq), ("y", y)],
               [("xs", xs), ("xz", xz), ("w", w), ("ws", ws), ("wz", wz), ("ys", ys), ("yz", yz), ("b", b)])


def axis_quantize_convinteger_matmul():
    """QuantizeLinear per axis (i8, odd zero points) -> ConvInteger (i8 w,
    depthwise) -> i32; and QuantizeLinear (u8) -> QLinearMatMul (constant
    i8 B, per-column scales and zero points) -> u8."""
    x = (RNG.standard_normal((1, 2, 5, 5)) * 3).astype(np.float32)
    s = np.array([0.05, 0.5], np.float32)
    z = np.array([-3, 5], np.int8)
    xq = quantize(x, s, z)
    w = RNG.integers(-128, 128, (2, 1, 3, 3)).astype(np.int8)
    cz = np.int8(1)
    acc = conv_acc(xq, cz, w, np.zeros(2, np.int8), (1, 1, 1, 1), (1, 1), group=2)
    a = (RNG.standard_normal((4, 6)) * 2).astype(np.float32)
    a_s, a_z = np.float32(0.02), np.uint8(128)
    aq = quantize(a, a_s, a_z)
    bm = RNG.integers(-128, 128, (6, 3)).astype(np.int8)
    bs = np.array([0.01, 0.04, 0.002], np.float32)
    bz = np.array([0, 2, -1], np.int8)
    ys, yz = np.float32(0.01), np.uint8(131)
    mm = (aq.astype(np.int64) - int(a_z)) @ (bm.astype(np.int64) - bz.astype(np.int64))
    multiplier = (a_s * bs / ys).astype(np.float32).reshape(1, -1)
    mq = requantize(mm.astype(np.int32), multiplier, yz, np.uint8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], axis=1),
        helper.make_node("ConvInteger", ["xq", "w", "cz"], ["acc"], group=2, pads=[1, 1, 1, 1]),
        helper.make_node("QuantizeLinear", ["a", "a_s", "a_z"], ["aq"]),
        helper.make_node("QLinearMatMul", ["aq", "a_s", "a_z", "bm", "bs", "bz", "ys", "yz"], ["mq"]),
    ]
    write_case("test_vulkan_int8_axis_convinteger_qlinearmatmul", 13, nodes, [("x", x), ("a", a)],
               [("xq", xq), ("acc", acc), ("mq", mq)],
               [("s", s), ("z", z), ("w", w), ("cz", cz), ("a_s", a_s), ("a_z", a_z), ("bm", bm), ("bs", bs),
                ("bz", bz), ("ys", ys), ("yz", yz)])


def qdq_conv_fused():
    """The QDQ form quantizers write, which vulkan-compute fuses into one int8
    convolution: f32 x -> QuantizeLinear (u8) -> DequantizeLinear, i8
    weights per output channel and an i32 bias at x_scale * w_scale each
    through a DequantizeLinear -> Conv (pads, stride 2, two groups) ->
    QuantizeLinear (u8) -> DequantizeLinear; outputs the u8 tensor too. The
    expected bytes are the fused arithmetic's: QLinearConv's requantization
    of the exact sum, but rounded before the zero point is added, as
    QuantizeLinear does (the unfused f32 steps meet it within 1 unit)."""
    x = (RNG.standard_normal((1, 4, 9, 9)) * 2).astype(np.float32)
    xs, xz = np.float32(0.05), np.uint8(131)
    w = RNG.integers(-127, 128, (6, 2, 3, 3)).astype(np.int8)
    ws = np.array([0.004, 0.01, 0.002, 0.008, 0.02, 0.006], np.float32)
    ys, yz = np.float32(0.04), np.uint8(120)
    b = RNG.integers(-3000, 3000, 6).astype(np.int32)
    bs = (xs * ws).astype(np.float32)
    pads, strides = (1, 1, 1, 1), (2, 2)
    xq = quantize(x, xs, xz)
    acc = conv_acc(xq, xz, w, np.zeros(6, np.int8), pads, strides, group=2).astype(np.int64) + b.reshape(1, -1, 1, 1)
    multiplier = (xs * ws / ys).astype(np.float32).reshape(1, -1, 1, 1)
    yq = requantize_round_first(acc, multiplier, yz, np.uint8)
    y = ((yq.astype(np.int32) - int(yz)).astype(np.float32) * ys).astype(np.float32)
    # A second branch where the order shows: a 1x1 convolution with weights 1
    # and -1 of x2 at scale 0.5, into y_scale 1 and the odd zero point 33,
    # so that every odd quantized x2 is an exact .5 tie. QLinearConv adds the
    # zero point before rounding half to even, QuantizeLinear after: the
    # fused form must round as the QDQ graph does (a QLinearConv's order
    # gives 24 of the 48 values 1 off).
    x2 = (np.arange(-12, 12, dtype=np.float32) * 0.5).reshape(1, 1, 4, 6)
    x2s, x2z, w2s = np.float32(0.5), np.uint8(128), np.array([1.0, 1.0], np.float32)
    w2 = np.array([1, -1], np.int8).reshape(2, 1, 1, 1)
    y2s, y2z = np.float32(1.0), np.uint8(33)
    x2q = quantize(x2, x2s, x2z)
    acc2 = conv_acc(x2q, x2z, w2, np.zeros(2, np.int8), (0, 0, 0, 0), (1, 1)).astype(np.int64)
    y2q = requantize_round_first(acc2, (x2s * w2s / y2s).astype(np.float32).reshape(1, -1, 1, 1), y2z, np.uint8)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wf"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "bs"], ["bf"], axis=0),
        helper.make_node("Conv", ["xf", "wf", "bf"], ["yf"], pads=list(pads), strides=list(strides), group=2),
        helper.make_node("QuantizeLinear", ["yf", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
        helper.make_node("QuantizeLinear", ["x2", "x2s", "x2z"], ["x2q"]),
        helper.make_node("DequantizeLinear", ["x2q", "x2s", "x2z"], ["x2f"]),
        helper.make_node("DequantizeLinear", ["w2", "w2s", "w2z"], ["w2f"], axis=0),
        helper.make_node("Conv", ["x2f", "w2f"], ["y2f"]),
        helper.make_node("QuantizeLinear", ["y2f", "y2s", "y2z"], ["y2q"]),
    ]
    write_case("test_vulkan_int8_qdq_conv_fused", 13, nodes, [("x", x), ("x2", x2)],
               [("yq", yq), ("y", y), ("y2q", y2q)],
               [("xs", xs), ("xz", xz), ("w", w), ("ws", ws), ("wz", np.zeros(6, np.int8)), ("b", b), ("bs", bs),
                ("ys", ys), ("yz", yz), ("x2s", x2s), ("x2z", x2z), ("w2", w2), ("w2s", w2s),
                ("w2z", np.zeros(2, np.int8)), ("y2s", y2s), ("y2z", y2z)])


def main():
    qdq_qlinearconv()
    axis_quantize_convinteger_matmul()
    qdq_conv_fused()


if __name__ == "__main__":
    main()
