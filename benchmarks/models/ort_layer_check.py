#!/usr/bin/env python3
"""Runs each zoo model twice with the same Python code, once through ONNX
Runtime and once through Loom's InferenceSession-compatible layer
(`loom.onnxruntime`), and compares the outputs.

usage: python3 benchmarks/models/ort_layer_check.py ZOO_DIR ORT_PEER_DIR [PROVIDER]

ZOO_DIR: what make_zoo.py wrote (zoo.json, the models, one input each).
ORT_PEER_DIR: ONNX Runtime's npm package as ../shared/peers/ort/setup.sh
installs it; Debian has no Python onnxruntime, so its side runs in node
(ort_bench.js, one run) and hands the outputs back as .npy files.
PROVIDER: the provider list given to both (default CPUExecutionProvider).
Needs loom's Python module on PYTHONPATH (build/python). Prints one line per
model with the largest difference relative to the output's largest magnitude;
exits 1 when any model's outputs differ by more than 1e-3 of it.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

import loom.onnxruntime as loom_ort


def run_ort(peer, model, input_name, npy, out_dir):
    env = dict(os.environ, ORT_REPEAT="1", ORT_WARMUP="0")
    subprocess.run(["node", os.path.join(peer, "ort_bench.js"), model, out_dir, f"{input_name}={npy}"],
                   check=True, env=env, stdout=subprocess.DEVNULL, cwd=peer)
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".npy")}


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    zoo, peer = argv[1], argv[2]
    providers = [argv[3] if len(argv) > 3 else "CPUExecutionProvider"]
    worst_all = 0.0
    with open(os.path.join(zoo, "zoo.json")) as f:
        models = json.load(f)["models"]
    for m in models:
        path = os.path.join(zoo, m["file"])
        x = np.load(os.path.join(zoo, m["npy"]))
        # What an ONNX Runtime user writes, with loom.onnxruntime imported as ort.
        sess = loom_ort.InferenceSession(path, providers=providers)
        name = sess.get_inputs()[0].name
        outputs = sess.run(None, {name: x})
        got = dict(zip([o.name for o in sess.get_outputs()], outputs))
        with tempfile.TemporaryDirectory() as tmp:
            want = run_ort(peer, path, name, os.path.join(zoo, m["npy"]), tmp)
        for out_name, w in want.items():
            g = got[out_name]
            assert g.shape == w.shape and g.dtype == w.dtype, (out_name, g.shape, w.shape, g.dtype, w.dtype)
            scale = float(np.max(np.abs(w))) or 1.0
            rel = float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64)))) / scale
            worst_all = max(worst_all, rel)
            print(f"{m['name']:<18} {out_name:<10} {str(list(w.shape)):<14} providers {sess.get_providers()}: "
                  f"max |loom - ort| / max |ort| = {rel:.2e}")
    return 0 if worst_all <= 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
