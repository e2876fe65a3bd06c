#!/usr/bin/python3
"""Writes the model check.sh compiles for tiny-accel, and an input for it.

    make_model.py <dir>   ->  <dir>/mlp.onnx, <dir>/x.npy

y = Softmax(Mul(MatMul(Relu(Add(MatMul(x, W1), b1)), W2), s)), x: [2, 64].
W1 (64x32 float32, 8192 bytes) is larger than 4096 bytes, so Loom hands it
to the plugin as a parameter (an execute input); b1, W2 and s are small
enough to arrive as inline constants in the graph. tiny-accel takes the
MatMul, Add, Relu, MatMul and Mul; Softmax, which it does not support, runs
on Loom's reference kernels. Needs Debian's python3-onnx and python3-numpy.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(7)
w1 = rng.standard_normal((64, 32)).astype(np.float32) * 0.2
b1 = rng.standard_normal((32,)).astype(np.float32) * 0.1
w2 = rng.standard_normal((32, 4)).astype(np.float32) * 0.3
s = np.array(0.5, dtype=np.float32)
nodes = [
    helper.make_node("MatMul", ["x", "W1"], ["h0"], name="fc1"),
    helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
    helper.make_node("Relu", ["h1"], ["h2"], name="relu1"),
    helper.make_node("MatMul", ["h2", "W2"], ["h3"], name="fc2"),
    helper.make_node("Mul", ["h3", "s"], ["logits"], name="scale"),
    helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "tiny_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    initializer=[numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(b1, "b1"),
                 numpy_helper.from_array(w2, "W2"), numpy_helper.from_array(s, "s")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, f"{out}/mlp.onnx")
np.save(f"{out}/x.npy", rng.standard_normal((2, 64)).astype(np.float32))
