#!/usr/bin/env python3
"""Checks ONNX Runtime's quantized contrib operators (com.microsoft
QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat) on Loom against
ONNX Runtime itself: one single-node model per operator and 8-bit type, fed
every byte value (and random ones), run by `loom run` on a device and by
ONNX Runtime (its npm package, through ort_bench.js); prints the largest
difference in units of the output and exits 1 when one exceeds 1.

usage: python3 benchmarks/models/check_contrib_ort.py ORT_PEER_DIR [--loom LOOM] [--target cpu-simd]

ORT_PEER_DIR: what ../shared/peers/ort/setup.sh installs (node_modules and
ort_bench.js). Needs python3-onnx and python3-numpy.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(27)


def model(op, dtype, attrs, shape_a, shape_b, shape_y, two):
    """One contrib node over graph inputs a (and b), scales and zero points
    as initializers."""
    onnx_type = TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT8
    info = np.iinfo(dtype)
    inits, inputs = [], []

    def param(name, scale):
        inits.append(numpy_helper.from_array(np.array(scale, np.float32), name + "_s"))
        inits.append(numpy_helper.from_array(np.array(RNG.integers(info.min // 2, info.max // 2 + 1), dtype), name + "_z"))
        return [name + "_s", name + "_z"]

    if op == "QLinearConcat":
        inputs = param("y", 0.045) + ["a"] + param("a", 0.05) + ["b"] + param("b", 0.03)
    else:
        inputs = ["a"] + param("a", 0.05)
        if two:
            inputs += ["b"] + param("b", 0.03)
        inputs += param("y", 0.07 if op != "QLinearSigmoid" else 1 / 256)
    node = helper.make_node(op, inputs, ["y"], domain="com.microsoft", **attrs)
    graph_inputs = [helper.make_tensor_value_info("a", onnx_type, shape_a)]
    if two or op == "QLinearConcat":
        graph_inputs.append(helper.make_tensor_value_info("b", onnx_type, shape_b))
    g = helper.make_graph([node], op, graph_inputs, [helper.make_tensor_value_info("y", onnx_type, shape_y)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])


CASES = [
    ("QLinearAdd", {}, [1, 8, 16, 16], [1, 8, 16, 16], [1, 8, 16, 16], True),
    ("QLinearAdd", {}, [1, 8, 16, 16], [1, 8, 1, 1], [1, 8, 16, 16], True),
    ("QLinearMul", {}, [1, 8, 16, 16], [1, 8, 16, 16], [1, 8, 16, 16], True),
    ("QLinearSigmoid", {}, [1, 8, 16, 16], None, [1, 8, 16, 16], False),
    ("QLinearLeakyRelu", {"alpha": 0.1}, [1, 8, 16, 16], None, [1, 8, 16, 16], False),
    ("QLinearGlobalAveragePool", {}, [1, 8, 16, 16], None, [1, 8, 1, 1], False),
    ("QLinearAveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
     [1, 8, 16, 16], None, [1, 8, 8, 8], False),
    ("QLinearConcat", {"axis": 1}, [1, 8, 16, 16], [1, 4, 16, 16], [1, 12, 16, 16], False),
]


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[2])
    ap.add_argument("peer")
    ap.add_argument("--loom", default=os.path.join(os.path.dirname(__file__), "../../build/bin/loom"))
    ap.add_argument("--target", default="cpu-simd")
    args = ap.parse_args()
    worst_all = 0
    with tempfile.TemporaryDirectory() as tmp:
        for dtype in (np.uint8, np.int8):
            for op, attrs, sa, sb, sy, two in CASES:
                m = model(op, dtype, attrs, sa, sb, sy, two)
                path = os.path.join(tmp, "m.onnx")
                onnx.save(m, path)
                feeds = {"a": sa}
                if sb is not None:
                    feeds["b"] = sb
                specs = []
                for name, shape in feeds.items():
                    v = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max + 1, size=shape).astype(dtype)
                    v.reshape(-1)[:256] = np.arange(256).astype(np.uint8).view(dtype)[: min(256, v.size)]
                    np.save(os.path.join(tmp, name + ".npy"), v)
                    specs.append(f"{name}={os.path.join(tmp, name + '.npy')}")
                subprocess.run(["node", os.path.join(args.peer, "ort_bench.js"), path, os.path.join(tmp, "ort")] + specs,
                               check=True, env=dict(os.environ, ORT_REPEAT="1", ORT_WARMUP="0"),
                               stdout=subprocess.DEVNULL, cwd=args.peer)
                program = os.path.join(tmp, "m.loom")
                subprocess.run([args.loom, "compile", path, "-o", program, "--target", args.target], check=True,
                               stdout=subprocess.DEVNULL)
                run = subprocess.run([args.loom, "run", program, "--output", f"y={tmp}/loom.npy"] +
                                     [a for s in specs for a in ("--input", s)], check=True, capture_output=True,
                                     text=True)
                want = np.load(os.path.join(tmp, "ort", "y.npy")).astype(np.int64)
                got = np.load(os.path.join(tmp, "loom.npy")).astype(np.int64)
                worst = int(np.abs(got - want).max())
                differ = int((got != want).sum())
                worst_all = max(worst_all, worst)
                place = "on " + args.target if f"-> {args.target}" in run.stdout + run.stderr else "placement unknown"
                print(f"{op:<26} {np.dtype(dtype).name:<5} {str(sy):<16} worst {worst} unit(s), "
                      f"{differ} of {got.size} differ ({place})")
    print(f"worst over all: {worst_all} unit(s)")
    return 0 if worst_all <= 1 else 1


if __name__ == "__main__":
    sys.exit(main())
