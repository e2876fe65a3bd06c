"""Loom from Python: list the devices, compile an ONNX model for every plugin
found, run it with a placement policy, and print where it ran and how long
it took.

    PYTHONPATH=build/python python3 examples/python/quickstart.py model.onnx [policy]

policy: a device selector ("policy:fastest" by default; "cpu-simd", "kind:gpu", ...).
Inputs are zeros of each input's shape (open dimensions: 1).
"""

import sys
import time

import numpy as np

import loom


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    model, policy = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "policy:fastest"
    for d in loom.devices():
        print(f"device {d['uri']:<22} {d['kind']:<12} {d['name']}")
    # No targets: every plugin found that compiles, accelerators first, with a
    # variant per plugin, so that the one program runs on any of them.
    report = loom.compile(model)
    print("targets: " + ", ".join(report["target_order"]))
    for t in report["targets"]:
        print(f"compiled {t['nodes']} node(s) for {t['plugin']}")
    program = loom.load(report["program"], device=policy)
    for p in program.placements:
        print(f"placed {p['delegate']} on {p['device']}")
    session = program.session()
    numpy_dtype = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
    feeds = {}
    for i in session.inputs:
        shape = [d if d is not None else 1 for d in i["shape"]]
        feeds[i["name"]] = np.zeros(shape, dtype=numpy_dtype.get(i["dtype"], np.float32))
    session.run(feeds)  # the first run prepares what it needs
    runs = 20
    start = time.perf_counter()
    for _ in range(runs):
        outputs = session.run(feeds)
    ms = (time.perf_counter() - start) * 1000 / runs
    for name, value in outputs.items():
        print(f"output {name}: {value.dtype} {list(value.shape)}")
    print(f"{ms:.3f} ms per run ({runs} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
