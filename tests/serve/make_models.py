#!/usr/bin/env python3
"""Writes the small ONNX models the serve tests serve (python3-onnx).

usage: make_models.py OUTDIR

  add.onnx     x, y: FP32 [N, 4] -> sum = x + y, prod = x * y (N open: batches)
  dtypes.onnx  for every dtype the protocol and Loom share except FP16/BF16,
               in_<T>: [N, 3] -> out_<T> = in_<T> + in_<T> (BOOL: Not)
  half.onnx    h: FP16 [2, 2] -> h2 = h + h (fixed shape: does not batch)
  slow.onnx    x: FP32 [N, 256] -> y: 64 chained MatMul + Tanh (about 8 MFLOP a
               row), for requests that stay in flight a while
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {
    "FP32": TensorProto.FLOAT, "FP64": TensorProto.DOUBLE,
    "INT8": TensorProto.INT8, "INT16": TensorProto.INT16, "INT32": TensorProto.INT32,
    "INT64": TensorProto.INT64, "UINT8": TensorProto.UINT8, "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32, "UINT64": TensorProto.UINT64, "BOOL": TensorProto.BOOL,
}


def save(graph, path, opset=17):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="loom-serve-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    s = helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["N", 4])
    p = helper.make_tensor_value_info("prod", TensorProto.FLOAT, ["N", 4])
    save(helper.make_graph([helper.make_node("Add", ["x", "y"], ["sum"]),
                            helper.make_node("Mul", ["x", "y"], ["prod"])], "add", [x, y], [s, p]),
         os.path.join(out, "add.onnx"))

    nodes, ins, outs = [], [], []
    for name, t in DTYPES.items():
        ins.append(helper.make_tensor_value_info(f"in_{name}", t, ["N", 3]))
        outs.append(helper.make_tensor_value_info(f"out_{name}", t, ["N", 3]))
        if name == "BOOL":
            nodes.append(helper.make_node("Not", [f"in_{name}"], [f"out_{name}"]))
        else:
            nodes.append(helper.make_node("Add", [f"in_{name}", f"in_{name}"], [f"out_{name}"]))
    save(helper.make_graph(nodes, "dtypes", ins, outs), os.path.join(out, "dtypes.onnx"))

    h = helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2, 2])
    h2 = helper.make_tensor_value_info("h2", TensorProto.FLOAT16, [2, 2])
    save(helper.make_graph([helper.make_node("Add", ["h", "h"], ["h2"])], "half", [h], [h2]),
         os.path.join(out, "half.onnx"))

    rng = np.random.default_rng(7)
    w = (rng.standard_normal((256, 256)) / 16).astype(np.float32)
    nodes, value = [], "x"
    for i in range(64):
        nodes.append(helper.make_node("MatMul", [value, "w"], [f"m{i}"]))
        nodes.append(helper.make_node("Tanh", [f"m{i}"], [f"t{i}" if i < 63 else "y"]))
        value = f"t{i}"
    sx = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256])
    sy = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 256])
    save(helper.make_graph(nodes, "slow", [sx], [sy], [numpy_helper.from_array(w, "w")]),
         os.path.join(out, "slow.onnx"))


if __name__ == "__main__":
    main()
