#!/usr/bin/python3
"""Writes a CNN in QOperator form for timing the int8 convolutions of
vulkan-compute (qconv with plain multiply-adds against qconv_dot with integer
dot products) and cpu-simd:

  x u8 [1, 3, S, S] -> QLinearConv 3x3 pads 1 (3 -> C)
    -> (DEPTH - 1) x QLinearConv 3x3 pads 1 (C -> C)   (u8 activations,
       s8 weights with per-channel scales, zero point 0, i32 biases)

Random weights (numpy seed 20261128); the scales keep the outputs spread over
the u8 range. Writes OUT_DIR/qlinear_cnn.onnx (input "x", output "y") and
OUT_DIR/qlinear_cnn_input.npy.

usage: make_qlinear_cnn.py OUT_DIR [--size S] [--channels C] [--depth DEPTH]
  (defaults 56, 32, 4)

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--size", type=int, default=56)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--depth", type=int, default=4)
    a = ap.parse_args()
    if a.size < 1 or a.channels < 1 or a.depth < 1:
        ap.error("--size, --channels and --depth must be at least 1")
    rng = np.random.default_rng(20261128)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(value, name))
        return name

    x_scale, x_zero = const("x_scale", np.array(0.02, np.float32)), const("x_zero", np.array(128, np.uint8))
    prev = "x"
    for i in range(a.depth):
        cin = 3 if i == 0 else a.channels
        fan_in = cin * 9
        w = const(f"w{i}", rng.integers(-127, 128, size=(a.channels, cin, 3, 3)).astype(np.int8))
        # y = sum of fan_in products of ~N(0, 73^2) weights and ~U(-128, 127)
        # activations, times x_scale * w_scale / y_scale: scale to ~40 units.
        w_scale = (rng.uniform(0.5, 1.5, a.channels) * 40 * 0.05 / (0.02 * 73 * 74 * np.sqrt(fan_in)))
        ws = const(f"w_scale{i}", w_scale.astype(np.float32))
        wz = const(f"w_zero{i}", np.zeros(a.channels, np.int8))
        b = const(f"b{i}", rng.integers(-2000, 2000, size=a.channels).astype(np.int32))
        ys, yz = const(f"y_scale{i}", np.array(0.05, np.float32)), const(f"y_zero{i}", np.array(128, np.uint8))
        out = "y" if i == a.depth - 1 else f"a{i}"
        nodes.append(helper.make_node("QLinearConv", [prev, x_scale, x_zero, w, ws, wz, ys, yz, b], [out],
                                      name=f"qconv{i}", pads=[1, 1, 1, 1]))
        prev, x_scale, x_zero = out, ys, yz
    graph = helper.make_graph(
        nodes, "qlinear_cnn", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 3, a.size, a.size])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, a.channels, a.size, a.size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(a.out_dir, exist_ok=True)
    onnx.save(model, os.path.join(a.out_dir, "qlinear_cnn.onnx"))
    np.save(os.path.join(a.out_dir, "qlinear_cnn_input.npy"),
            rng.integers(0, 256, size=(1, 3, a.size, a.size)).astype(np.uint8))


if __name__ == "__main__":
    main()
