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


def main():
    qdq_qlinearconv()
    axis_quantize_convinteger_matmul()


if __name__ == "__main__":
    main()
