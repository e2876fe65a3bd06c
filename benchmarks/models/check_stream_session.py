#!/usr/bin/python3
"""Runs a streaming model's chunks again and again in ONE Loom session (the
Python package), each chunk's state outputs fed back, and checks every chunk
against ONNX Runtime's outputs that run_lstm_stream.sh saved (DATA/ort<k>).
A staged program specializes its parts and branches on first use; from the
second round on each run hits the session's cache, so this checks the steady
state that `loom run` (one run per process) cannot.

usage: check_stream_session.py PROGRAM.loom DATA ROUNDS   (PYTHONPATH: Loom's build/python)
"""
import os
import sys

import numpy as np

import loom


def main():
    program_path, data, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rt = loom.Runtime(threads=1, plugin_options={"loom.threads": "1"})
    session = rt.load(program_path, "cpu-simd://0").session()
    chunks = 0
    while os.path.exists(f"{data}/x{chunks}.npy"):
        chunks += 1
    if chunks == 0:
        sys.exit(f"{data}: no chunk inputs x0.npy, ...")
    worst = 0.0
    for _ in range(rounds):
        h, c = np.load(f"{data}/h0.npy"), np.load(f"{data}/c0.npy")
        for k in range(chunks):
            feeds = {"x": np.load(f"{data}/x{k}.npy"), "h_in": h, "c_in": c}
            if os.path.exists(f"{data}/reset{k}.npy"):
                feeds["reset"] = np.load(f"{data}/reset{k}.npy")
            out = session.run(feeds)
            ort = f"{data}/ort{k}"
            for name in sorted(f[:-4] for f in os.listdir(ort) if f.endswith(".npy")):
                want = np.load(f"{ort}/{name}.npy")
                if out[name].shape != want.shape:
                    sys.exit(f"chunk {k}: output '{name}' is {out[name].shape} in the session, {want.shape} in ONNX Runtime")
                worst = max(worst, float(np.max(np.abs(out[name] - want))))
            h, c = out["h_out"], out["c_out"]
    print(f"{os.path.basename(program_path)} in one session, {rounds} rounds of {chunks} chunks: "
          f"largest difference from ONNX Runtime {worst:.2e}")
    sys.exit(0 if worst <= 1e-4 else 1)


if __name__ == "__main__":
    main()
