#!/usr/bin/python3
"""Writes a small squeeze-excite block in the style of MobileNetV3 for
`loom compare` (CTest loom_compare_cli): Conv+Relu (cpu-simd fuses the
activation into the convolution), GlobalAveragePool, a 1x1 Conv+Relu, a 1x1
Conv, HardSigmoid with MobileNetV3's alpha 1/6 (the node the test-only
cpu-simd-broken plugin gets wrong), Mul, a 1x1 Conv and HardSigmoid with
ONNX's default alpha 0.2 (which cpu-simd-broken gets right), plus one input.

Also writes no_kernel.onnx: x -> Relu -> an op of a made-up domain that
neither a plugin nor the reference kernels run.

Usage: make_se_block.py OUT_DIR   (writes se_block.onnx, x.npy, x_wrong_shape.npy,
                                   no_kernel.onnx)

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(20261127)


def weights(name, shape, scale):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    c, s = 8, 4
    inits = [
        weights("w1", (c, 3, 3, 3), 0.3), weights("b1", (c,), 0.1),
        weights("w_sq", (s, c, 1, 1), 0.5), weights("b_sq", (s,), 0.1),
        weights("w_ex", (c, s, 1, 1), 0.5), weights("b_ex", (c,), 0.1),
        weights("w2", (c, c, 1, 1), 0.3), weights("b2", (c,), 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("GlobalAveragePool", ["r1"], ["pool"], name="se_pool"),
        helper.make_node("Conv", ["pool", "w_sq", "b_sq"], ["sq"], name="se_squeeze"),
        helper.make_node("Relu", ["sq"], ["sq_r"], name="se_relu"),
        helper.make_node("Conv", ["sq_r", "w_ex", "b_ex"], ["ex"], name="se_expand"),
        helper.make_node("HardSigmoid", ["ex"], ["gate"], name="se_gate", alpha=1.0 / 6, beta=0.5),
        helper.make_node("Mul", ["r1", "gate"], ["scaled"], name="se_scale"),
        helper.make_node("Conv", ["scaled", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("HardSigmoid", ["c2"], ["y"], name="head_act"),
    ]
    graph = helper.make_graph(
        nodes, "se_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="loom-test")
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out_dir, "se_block.onnx"))
    np.save(os.path.join(out_dir, "x.npy"), RNG.uniform(-1, 1, size=(1, 3, 8, 8)).astype(np.float32))
    np.save(os.path.join(out_dir, "x_wrong_shape.npy"), np.zeros((1, 8, 1, 1), np.float32))

    odd = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Frobnicate", ["r"], ["y"], name="odd", domain="com.example.loomtest")],
        "no_kernel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])])
    onnx.save(helper.make_model(odd, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid("com.example.loomtest", 1)]),
              os.path.join(out_dir, "no_kernel.onnx"))


if __name__ == "__main__":
    main()
