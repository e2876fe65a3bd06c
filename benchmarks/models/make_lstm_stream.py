#!/usr/bin/python3
"""Writes a streaming LSTM model for the recurrent benchmark (issue 26).

usage: make_lstm_stream.py OUT [--hidden 256] [--input 64] [--seq 1 16] [--chunks 4]

For each sequence length T, OUT/lstm_stream_T<T>.onnx: one forward LSTM
(opset 14, hidden H, input size I, batch 1) whose state is carried by the
caller: inputs x [T, 1, I], h_in [1, 1, H], c_in [1, 1, H]; outputs y
[T, 1, 1, H], h_out [1, 1, H], c_out [1, 1, H] (feed h_out / c_out back as the
next chunk's h_in / c_in). Weights W [1, 4H, I], R [1, 4H, H], B [1, 8H] are
initializers drawn from a fixed seed (uniform, +-1/sqrt(H), as PyTorch
initializes them). Also writes OUT/T<T>/x<k>.npy for k < chunks (chunk
inputs) and OUT/T<T>/h0.npy, c0.npy (zeros), for the chunk-by-chunk check
against ONNX Runtime (benchmarks/models/run_lstm_stream.sh).
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(seq, hidden, inp, rng):
    bound = 1.0 / np.sqrt(hidden)
    w = rng.uniform(-bound, bound, (1, 4 * hidden, inp)).astype(np.float32)
    r = rng.uniform(-bound, bound, (1, 4 * hidden, hidden)).astype(np.float32)
    b = rng.uniform(-bound, bound, (1, 8 * hidden)).astype(np.float32)
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h_in", "c_in"], ["y", "h_out", "c_out"],
                            hidden_size=hidden, direction="forward")
    graph = helper.make_graph(
        [node], "lstm_stream",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp]),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, [1, 1, hidden]),
         helper.make_tensor_value_info("c_in", TensorProto.FLOAT, [1, 1, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [seq, 1, 1, hidden]),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, [1, 1, hidden]),
         helper.make_tensor_value_info("c_out", TensorProto.FLOAT, [1, 1, hidden])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R"), numpy_helper.from_array(b, "B")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="loom-bench")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--input", type=int, default=64)
    ap.add_argument("--seq", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--chunks", type=int, default=4)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for seq in a.seq:
        rng = np.random.default_rng(26 + seq)
        onnx.save(model(seq, a.hidden, a.input, rng), os.path.join(a.out, f"lstm_stream_T{seq}.onnx"))
        d = os.path.join(a.out, f"T{seq}")
        os.makedirs(d, exist_ok=True)
        for k in range(a.chunks):
            np.save(os.path.join(d, f"x{k}.npy"), rng.standard_normal((seq, 1, a.input)).astype(np.float32))
        np.save(os.path.join(d, "h0.npy"), np.zeros((1, 1, a.hidden), np.float32))
        np.save(os.path.join(d, "c0.npy"), np.zeros((1, 1, a.hidden), np.float32))
    print(f"wrote {len(a.seq)} models to {a.out}")


if __name__ == "__main__":
    main()
