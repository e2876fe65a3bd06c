#!/usr/bin/python3
"""Writes a small quantized CNN in QDQ form (QuantizeLinear/DequantizeLinear
around every convolution and the classifier) with random int8 weights and
activation scales calibrated on random inputs, plus one input as .npy; and
a second CNN in ONNX Runtime's QOperator form: QLinearConv, MaxPool and
Flatten of u8, QLinearMatMul and the com.microsoft contrib operators
(QLinearAdd, QLinearMul, QLinearLeakyRelu, QLinearAveragePool,
QLinearGlobalAveragePool, QLinearSigmoid, QLinearConcat).

Usage: make_qdq_cnn.py OUT_DIR   (writes qdq_cnn.onnx, qop_cnn.onnx and input.npy)

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261123)


def conv2d(x, w, b, pad):
    n, c, h, wd = x.shape
    m, _, k, _ = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    cols = np.stack([xp[:, :, i:i + oh, j:j + ow] for i in range(k) for j in range(k)], axis=2)
    y = np.einsum("nckhw,mck->nmhw", cols, w.reshape(m, c, k * k))
    return y + b.reshape(1, m, 1, 1)


def maxpool2(x):
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def quant_params(values):
    """Symmetric-range u8 scale and zero point covering the calibration data."""
    lo, hi = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    scale = (hi - lo) / 255.0 or 1.0
    zero = int(np.clip(round(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zero)


def int8_weights(shape):
    w = RNG.normal(0.0, 0.3, size=shape).astype(np.float32)
    scale = np.float32(np.abs(w).max() / 127.0)
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, scale, q.astype(np.float32) * scale


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    w1q, w1s, w1 = int8_weights((8, 3, 3, 3))
    w2q, w2s, w2 = int8_weights((8, 8, 3, 3))
    fcq, fcs, fc = int8_weights((8, 10))
    b1 = RNG.normal(0, 0.1, 8).astype(np.float32)
    b2 = RNG.normal(0, 0.1, 8).astype(np.float32)
    bfc = RNG.normal(0, 0.1, 10).astype(np.float32)

    # Calibration: the float model on random inputs gives each activation's range.
    calib = RNG.uniform(-1, 1, size=(16, 3, 8, 8)).astype(np.float32)
    a1 = np.maximum(conv2d(calib, w1, b1, 1), 0)
    p1 = maxpool2(a1)
    a2 = np.maximum(conv2d(p1, w2, b2, 1), 0)
    g = a2.mean(axis=(2, 3))
    scales = {"x": quant_params(calib), "a1": quant_params(a1), "a2": quant_params(a2), "g": quant_params(g)}

    inits = [
        numpy_helper.from_array(w1q, "w1_q"), numpy_helper.from_array(np.array(w1s), "w1_scale"),
        numpy_helper.from_array(w2q, "w2_q"), numpy_helper.from_array(np.array(w2s), "w2_scale"),
        numpy_helper.from_array(fcq, "fc_q"), numpy_helper.from_array(np.array(fcs), "fc_scale"),
        numpy_helper.from_array(np.int8(0).reshape(()), "w_zero"),
        numpy_helper.from_array(b1, "b1"), numpy_helper.from_array(b2, "b2"), numpy_helper.from_array(bfc, "bfc"),
    ]
    for name, (s, z) in scales.items():
        inits.append(numpy_helper.from_array(np.array(s), name + "_scale"))
        inits.append(numpy_helper.from_array(np.array(z), name + "_zero"))

    def qdq(src, name):
        return [helper.make_node("QuantizeLinear", [src, name + "_scale", name + "_zero"], [name + "_q"]),
                helper.make_node("DequantizeLinear", [name + "_q", name + "_scale", name + "_zero"], [name + "_dq"])]

    nodes = []
    nodes += qdq("x", "x")
    nodes.append(helper.make_node("DequantizeLinear", ["w1_q", "w1_scale", "w_zero"], ["w1"]))
    nodes.append(helper.make_node("Conv", ["x_dq", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    nodes += qdq("r1", "a1")
    nodes.append(helper.make_node("MaxPool", ["a1_dq"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]))
    nodes.append(helper.make_node("DequantizeLinear", ["w2_q", "w2_scale", "w_zero"], ["w2"]))
    nodes.append(helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c2"], ["r2"]))
    nodes += qdq("r2", "a2")
    nodes.append(helper.make_node("GlobalAveragePool", ["a2_dq"], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    nodes += qdq("flat", "g")
    nodes.append(helper.make_node("DequantizeLinear", ["fc_q", "fc_scale", "w_zero"], ["fc"]))
    nodes.append(helper.make_node("MatMul", ["g_dq", "fc"], ["mm"]))
    nodes.append(helper.make_node("Add", ["mm", "bfc"], ["logits"]))
    nodes.append(helper.make_node("Softmax", ["logits"], ["probs"], axis=1))
    graph = helper.make_graph(
        nodes, "qdq_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom-test")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, "qdq_cnn.onnx"))
    np.save(os.path.join(out_dir, "input.npy"), RNG.uniform(-1, 1, size=(1, 3, 8, 8)).astype(np.float32))
    write_qoperator(out_dir, calib, (w1q, w1s, w1, b1), (w2q, w2s, w2, b2), (fcq, fcs, fc))


def write_qoperator(out_dir, calib, conv1, conv2, fc):
    """x -> QuantizeLinear -> QLinearConv 3x3 (ReLU folded into its range) ->
    MaxPool 2x2 (u8) -> QLinearConv 3x3 -> QLinearAdd (residual) ->
    QLinearLeakyRelu -> QLinearAveragePool 2x2 -> QLinearMul (square) ->
    QLinearGlobalAveragePool -> Flatten (u8) -> QLinearMatMul ->
    QLinearConcat(itself, QLinearSigmoid of it) -> DequantizeLinear."""
    w1q, w1s, w1, b1 = conv1
    w2q, w2s, w2, b2 = conv2
    fcq, fcs, fcw = fc
    # The float model on the calibration inputs gives each tensor's range.
    f = {"x": calib}
    f["c1"] = np.maximum(conv2d(calib, w1, b1, 1), 0)
    f["p1"] = maxpool2(f["c1"])
    f["c2"] = conv2d(f["p1"], w2, b2, 1)
    f["r"] = f["c2"] + f["p1"]
    f["l"] = np.where(f["r"] < 0, 0.1 * f["r"], f["r"])
    f["a"] = f["l"].reshape(16, 8, 2, 2, 2, 2).mean(axis=(3, 5))
    f["m"] = f["a"] * f["a"]
    f["g"] = f["m"].mean(axis=(2, 3), keepdims=True)
    f["mm"] = f["g"].reshape(16, 8) @ fcw
    f["s"] = 1 / (1 + np.exp(-f["mm"]))
    f["cat"] = np.concatenate([f["mm"], f["s"]], axis=1)
    params = {name: quant_params(v) for name, v in f.items()}
    params["p1"] = params["c1"]  # MaxPool keeps its input's scale
    inits = [
        numpy_helper.from_array(w1q, "w1_q"), numpy_helper.from_array(np.array(w1s), "w1_scale"),
        numpy_helper.from_array(w2q, "w2_q"), numpy_helper.from_array(np.array(w2s), "w2_scale"),
        numpy_helper.from_array(fcq, "fc_q"), numpy_helper.from_array(np.array(fcs), "fc_scale"),
        numpy_helper.from_array(np.int8(0).reshape(()), "w_zero"),
    ]
    for name, (s, z) in params.items():
        inits.append(numpy_helper.from_array(np.array(s), name + "_scale"))
        inits.append(numpy_helper.from_array(np.array(z), name + "_zero"))
    for name, b, ws, src in (("b1", b1, w1s, "x"), ("b2", b2, w2s, "p1")):
        inits.append(numpy_helper.from_array(
            np.round(b / (params[src][0] * ws)).astype(np.int32), name + "_q"))

    def q(name):
        return [name, name + "_scale", name + "_zero"]

    def contrib(op, inputs, output, **attrs):
        return helper.make_node(op, inputs, [output], domain="com.microsoft", name=op + "_" + output, **attrs)

    nodes = [
        helper.make_node("QuantizeLinear", ["x_f", "x_scale", "x_zero"], ["x"]),
        helper.make_node("QLinearConv", q("x") + ["w1_q", "w1_scale", "w_zero"] + q("c1")[1:] + ["b1_q"], ["c1"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearConv", q("p1") + ["w2_q", "w2_scale", "w_zero"] + q("c2")[1:] + ["b2_q"], ["c2"],
                         pads=[1, 1, 1, 1]),
        contrib("QLinearAdd", q("c2") + q("p1") + q("r")[1:], "r"),
        contrib("QLinearLeakyRelu", q("r") + q("l")[1:], "l", alpha=0.1),
        contrib("QLinearAveragePool", q("l") + q("a")[1:], "a", kernel_shape=[2, 2], strides=[2, 2]),
        contrib("QLinearMul", q("a") + q("a") + q("m")[1:], "m"),
        contrib("QLinearGlobalAveragePool", q("m") + q("g")[1:], "g"),
        helper.make_node("Flatten", ["g"], ["gf"]),
        helper.make_node("QLinearMatMul", ["gf", "g_scale", "g_zero", "fc_q", "fc_scale", "w_zero"] + q("mm")[1:],
                         ["mm"]),
        contrib("QLinearSigmoid", q("mm") + q("s")[1:], "s"),
        contrib("QLinearConcat", q("cat")[1:] + q("mm") + q("s"), "cat", axis=1),
        helper.make_node("DequantizeLinear", q("cat"), ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "qop_cnn", [helper.make_tensor_value_info("x_f", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 20])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)],
                              producer_name="loom-test")
    onnx.save(model, os.path.join(out_dir, "qop_cnn.onnx"))


if __name__ == "__main__":
    main()
