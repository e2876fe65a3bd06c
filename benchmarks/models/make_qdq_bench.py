#!/usr/bin/python3
"""Writes a QDQ CNN for timing cpu-simd's quantized path, in the form ONNX
Runtime's static quantizer writes (QuantizeLinear/DequantizeLinear on every
activation, per-channel s8 weights, i32 biases at x_scale * w_scale), plus the
f32 model with the same (dequantized) weights and one input as .npy:

  x [1, 3, S, S] -> Conv 3x3 (3 -> C) + Relu -> DEPTH x (Conv 3x3 (C -> C) + Relu)
    -> GlobalAveragePool -> Flatten -> Gemm (transB, C -> 10)

Activation scales are calibrated on random inputs with a numpy forward pass.

Usage: make_qdq_bench.py OUT_DIR [--size S] [--channels C] [--depth DEPTH] [--reduce-range]
  (writes qdq_bench.onnx, f32_bench.onnx, input.npy; input name "x")
  --reduce-range: 7-bit weights in [-64, 64], as ONNX Runtime's quantizer
  writes them with reduce_range=True (its advice for CPUs without VNNI)

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261127)


def conv3x3(x, w, b):
    """Conv with pads 1, stride 1 (im2col and one matrix product)."""
    n, c, h, wd = x.shape
    m = w.shape[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + wd] for i in range(3) for j in range(3)], axis=2)
    y = np.einsum("nckhw,mck->nmhw", cols, w.reshape(m, c, 9), optimize=True)
    return y + b.reshape(1, m, 1, 1)


def act_params(values):
    lo, hi = min(float(values.min()), 0.0), max(float(values.max()), 0.0)
    scale = np.float32((hi - lo) / 255.0 or 1.0)
    return scale, np.uint8(np.clip(round(-lo / float(scale)), 0, 255))


def weights(shape, axis, qmax=127):
    w = RNG.normal(0.0, (2.0 / np.prod(shape[1:])) ** 0.5, size=shape).astype(np.float32)
    red = tuple(i for i in range(len(shape)) if i != axis)
    scale = (np.abs(w).max(axis=red) / float(qmax)).astype(np.float32)
    bshape = [1] * len(shape)
    bshape[axis] = -1
    q = np.clip(np.round(w / scale.reshape(bshape)), -qmax, qmax).astype(np.int8)
    return q, scale, q.astype(np.float32) * scale.reshape(bshape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--channels", type=int, default=64)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--reduce-range", action="store_true")
    a = ap.parse_args()
    qmax = 64 if a.reduce_range else 127
    os.makedirs(a.out, exist_ok=True)
    c = a.channels
    layers = [weights((c, 3, 3, 3), 0, qmax)] + [weights((c, c, 3, 3), 0, qmax) for _ in range(a.depth)]
    biases = [RNG.normal(0, 0.05, c).astype(np.float32) for _ in layers]
    fcq, fcs, fc = weights((10, c), 0, qmax)
    bfc = RNG.normal(0, 0.05, 10).astype(np.float32)

    calib = RNG.uniform(-1, 1, size=(2, 3, a.size, a.size)).astype(np.float32)
    acts = [act_params(calib)]
    h = calib
    for (_, _, w), b in zip(layers, biases):
        h = np.maximum(conv3x3(h, w, b), 0)
        acts.append(act_params(h))
    g = h.mean(axis=(2, 3))
    acts.append(act_params(g))
    acts.append(act_params(g @ fc.T + bfc))

    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def q_dq(src, i):
        s, z = acts[i]
        const(f"a{i}_s", s)
        const(f"a{i}_z", z)
        nodes.append(helper.make_node("QuantizeLinear", [src, f"a{i}_s", f"a{i}_z"], [f"a{i}_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [f"a{i}_q", f"a{i}_s", f"a{i}_z"], [f"a{i}_dq"]))
        return f"a{i}_dq"

    def dq_weight(name, q, s, bias, x_scale):
        const(name + "_q", q)
        const(name + "_s", s)
        const(name + "_z", np.zeros(s.shape, np.int8))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_s", name + "_z"], [name], axis=0))
        bs = (x_scale * s).astype(np.float32)
        const(name + "_bq", np.round(bias / bs).astype(np.int32))
        const(name + "_bs", bs)
        const(name + "_bz", np.zeros(s.shape, np.int32))
        nodes.append(helper.make_node("DequantizeLinear", [name + "_bq", name + "_bs", name + "_bz"], [name + "_b"],
                                      axis=0))
        return name, name + "_b"

    x = q_dq("x", 0)
    for i, ((q, s, _), b) in enumerate(zip(layers, biases)):
        w, bias = dq_weight(f"w{i}", q, s, b, acts[i][0])
        nodes.append(helper.make_node("Conv", [x, w, bias], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x = q_dq(f"r{i}", i + 1)
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    x = q_dq("flat", len(layers) + 1)
    w, bias = dq_weight("fc", fcq, fcs, bfc, acts[len(layers) + 1][0])
    nodes.append(helper.make_node("Gemm", [x, w, bias], ["logits_f"], transB=1))
    q_dq("logits_f", len(layers) + 2)
    nodes.append(helper.make_node("Identity", [f"a{len(layers) + 2}_dq"], ["logits"]))
    shape = [1, 3, a.size, a.size]
    graph = helper.make_graph(nodes, "qdq_bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom-bench")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(a.out, "qdq_bench.onnx"))

    # The f32 model: the same dequantized weights, no QuantizeLinear/DequantizeLinear.
    inits, nodes = [], []
    x = "x"
    for i, ((_, _, w), b) in enumerate(zip(layers, biases)):
        const(f"w{i}", w)
        const(f"b{i}", b)
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x = f"r{i}"
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"]))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"]))
    const("fc", fc)
    const("bfc", bfc)
    nodes.append(helper.make_node("Gemm", ["flat", "fc", "bfc"], ["logits"], transB=1))
    graph = helper.make_graph(nodes, "f32_bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom-bench")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(a.out, "f32_bench.onnx"))
    np.save(os.path.join(a.out, "input.npy"), RNG.uniform(-1, 1, size=shape).astype(np.float32))


if __name__ == "__main__":
    main()
