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

Also, for each T, OUT/lstm_if_stream_T<T>.onnx: a streaming voice-activity
detector built around the same LSTM (the weights drawn from the same seed).
Inputs x [T, 1, I], h_in [1, 1, H], c_in [1, 1, H] and reset (bool scalar).
An `If` on reset picks the LSTM's initial state: its then_branch returns
zeros (a Constant for h, ConstantOfShape of c_in's shape for c), its
else_branch the carried h_in / c_in (outer-scope captures). After the LSTM a
linear head and a Sigmoid give one speech probability per frame. Outputs prob
[T, 1, 1], h_out [1, 1, H], c_out [1, 1, H]. Its data in OUT/if_T<T>/: x<k>.npy,
reset<k>.npy (true on every third chunk, chunk 0 included), h0.npy and
c0.npy (a stale nonzero state, so that a reset changes the result), and
keep.npy / reset.npy (false / true) for timing either branch.
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


def if_model(seq, hidden, inp, rng):
    """The LSTM of model() behind an If that resets its state, and a head."""
    base = model(seq, hidden, inp, rng)
    inits = list(base.graph.initializer)
    head_w = rng.uniform(-0.1, 0.1, (hidden, 1)).astype(np.float32)
    head_b = np.array([0.05], np.float32)
    state = [1, 1, hidden]
    then_branch = helper.make_graph(
        [helper.make_node("Constant", [], ["h_zero"],
                          value=numpy_helper.from_array(np.zeros(state, np.float32), "h_zero_value")),
         helper.make_node("Shape", ["c_in"], ["c_shape"]),
         helper.make_node("ConstantOfShape", ["c_shape"], ["c_zero"],
                          value=numpy_helper.from_array(np.zeros([1], np.float32), "c_zero_value"))],
        "reset_state", [],
        [helper.make_tensor_value_info("h_zero", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("c_zero", TensorProto.FLOAT, state)])
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["h_in"], ["h_keep"]),
         helper.make_node("Identity", ["c_in"], ["c_keep"])],
        "keep_state", [],
        [helper.make_tensor_value_info("h_keep", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("c_keep", TensorProto.FLOAT, state)])
    nodes = [
        helper.make_node("If", ["reset"], ["h_start", "c_start"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("LSTM", ["x", "W", "R", "B", "", "h_start", "c_start"], ["y", "h_out", "c_out"],
                         hidden_size=hidden, direction="forward"),
        helper.make_node("Squeeze", ["y", "squeeze_axes"], ["frames"]),
        helper.make_node("MatMul", ["frames", "head_w"], ["logit_raw"]),
        helper.make_node("Add", ["logit_raw", "head_b"], ["logit"]),
        helper.make_node("Sigmoid", ["logit"], ["prob"]),
    ]
    inits += [numpy_helper.from_array(np.array([1], np.int64), "squeeze_axes"),
              numpy_helper.from_array(head_w, "head_w"), numpy_helper.from_array(head_b, "head_b")]
    graph = helper.make_graph(
        nodes, "lstm_if_stream",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp]),
         helper.make_tensor_value_info("h_in", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("c_in", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("reset", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [seq, 1, 1]),
         helper.make_tensor_value_info("h_out", TensorProto.FLOAT, state),
         helper.make_tensor_value_info("c_out", TensorProto.FLOAT, state)],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], producer_name="loom-bench")
    m.ir_version = 7
    onnx.checker.check_model(m, full_check=True)
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
        rng = np.random.default_rng(26 + seq)
        onnx.save(if_model(seq, a.hidden, a.input, rng), os.path.join(a.out, f"lstm_if_stream_T{seq}.onnx"))
        d = os.path.join(a.out, f"if_T{seq}")
        os.makedirs(d, exist_ok=True)
        for k in range(a.chunks):
            np.save(os.path.join(d, f"x{k}.npy"), rng.standard_normal((seq, 1, a.input)).astype(np.float32))
            np.save(os.path.join(d, f"reset{k}.npy"), np.array(k % 3 == 0))
        np.save(os.path.join(d, "h0.npy"), rng.uniform(-0.5, 0.5, (1, 1, a.hidden)).astype(np.float32))
        np.save(os.path.join(d, "c0.npy"), rng.uniform(-0.5, 0.5, (1, 1, a.hidden)).astype(np.float32))
        np.save(os.path.join(d, "keep.npy"), np.array(False))
        np.save(os.path.join(d, "reset.npy"), np.array(True))
    print(f"wrote {2 * len(a.seq)} models to {a.out}")


if __name__ == "__main__":
    main()
