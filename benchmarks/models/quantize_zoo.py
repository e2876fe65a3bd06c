#!/usr/bin/python3
"""Static QDQ quantization of the model zoo's CNNs (make_zoo.py), laid out the
way ONNX Runtime's quantize_static(quant_format=QuantFormat.QDQ) lays them out
with its defaults (per_channel=True, u8 activations, s8 weights), written for
Loom from the rules below (no code from ONNX Runtime's quantizer).

usage: quantize_zoo.py ZOO_DIR OUT_DIR [--models a,b] [--reduce-range]
           [--loom PATH] [--calib N] [--size S] [--keep-calib]

ZOO_DIR holds make_zoo.py's output (<name>.onnx, zoo.json); OUT_DIR gets
<name>_qdq.onnx (or <name>_qdq7.onnx with --reduce-range), <name>_f32fold.onnx
(the f32 model with BatchNormalization folded, what was calibrated) and
qdq_zoo.json (qdq_zoo7.json with --reduce-range: file, input, shape, the
output's scale and zero point; entries of other models already there are
kept). --size S calibrates at [1, 3, S, S] instead
of the zoo's input size and writes the models with that input size
(mobilenetv3_small and resnet18 end in global pooling, so any multiple of 32
runs; tests use it to stay small). Models:
mobilenetv3_small, resnet18, detector (default: all three), and ppocr_det,
PaddleOCR's trained text detector, once add_ppocr_det.py has added it to
ZOO_DIR (its zoo.json entry says "calib": "text_pages": it calibrates on
text_pages.py's synthetic pages, seeds 1000 + i, instead of noise).

Steps:
0. Constant nodes that only feed weights, biases and BatchNormalization
   parameters become initializers (paddle2onnx writes every weight so).
1. Convert models below opset 13 to 13 (onnx.version_converter: a
   per-channel DequantizeLinear, its axis, needs 13). Fold every BatchNormalization that follows a Conv (whose output nothing
   else reads) into that Conv's weight and bias (in float64, stored f32).
2. Calibrate (MinMax): a fixed calibration set of N inputs (default 8;
   standard normal, numpy seeds 1000 + i, the zoo input's shape) runs through
   the folded f32 model with every f32 intermediate made a graph output, on
   Loom itself: `loom compile --target cpu-simd --input-shape ...` then
   `loom run --threads 1 --output-dir` per input; the range of each tensor is
   [min(0, lowest), max(0, highest)] over the set.
3. Quantize, in node order:
   - Conv, ConvTranspose, Gemm, MatMul with a constant weight: the activation
     input and the output get Q/DQ; the weight becomes s8, symmetric, per
     output channel (Conv axis 0, ConvTranspose axis 1, Gemm axis 0 with
     transB else 1, MatMul axis 1): scale = max|w| / 127 (range [-127, 127]),
     or / 64 with --reduce-range (7-bit, [-64, 64], ONNX Runtime's advice for
     CPUs without VNNI); the bias becomes i32 at scale x_scale * w_scale[c]
     (the product in f32), round half to even; a bias that does not fit i32
     at that scale (a channel whose weights are all near 0) stays f32, so
     that Conv runs in f32 between its DQs and Q.
   - Relu or Clip right after a node whose output nothing else reads (and is
     no graph output) is removed: the upstream node writes the activation's
     output, whose calibrated range (from 0) does the clamping when quantized.
   - Add, Mul, Concat, GlobalAveragePool, Sigmoid: every f32 input and the
     output get Q/DQ, each with its own range; one with a constant operand
     (a learned scale) stays f32.
   - MaxPool, AveragePool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze,
     Resize, Slice: only when the data input is already quantized; the output
     then gets Q/DQ with the input's scale and zero point (the values pass
     through unchanged).
   - anything else (HardSwish, HardSigmoid, the Shape/Gather/Concat chains on
     int64, ...) stays f32, between the DQ of its input and the Q of the next
     quantized consumer.
   Activations: u8, asymmetric: scale = (hi - lo) / 255 (f32), zero point =
   round(-lo / scale) (1 and 0 when hi == lo). A quantized tensor gets one
   QuantizeLinear and one DequantizeLinear that all its readers share; a graph
   output keeps its name on the DequantizeLinear's output.

Deterministic: the same inputs give the same bytes (Loom's f32 run is on one
thread). Needs /usr/bin/python3 (python3-onnx, python3-numpy) and a loom CLI
with cpu-simd (default build/bin/loom, or $LOOM)."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.version_converter
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import text_pages  # noqa: E402

CNNS = ("mobilenetv3_small", "resnet18", "detector", "ppocr_det")
WEIGHTED = {"Conv", "ConvTranspose", "Gemm", "MatMul"}
ALL_IO = {"Add", "Mul", "Concat", "GlobalAveragePool", "Sigmoid"}
PASS_THROUGH = {"MaxPool", "AveragePool", "Reshape", "Flatten", "Transpose", "Squeeze",
                "Unsqueeze", "Resize", "Slice"}
REMOVABLE = {"Relu", "Clip"}


def fail(msg):
    print(f"quantize_zoo.py: {msg}", file=sys.stderr)
    sys.exit(1)


def readers_of(graph):
    readers = {}
    for n in graph.node:
        for i in n.input:
            if i:
                readers.setdefault(i, []).append(n)
    return readers


def constants_to_initializers(model):
    """Moves the tensor of each Constant node that only weighted nodes and
    BatchNormalization read as a parameter (input 1 or later) into the
    initializers; returns the count."""
    g = model.graph
    readers = readers_of(g)
    param_of = ("Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization")

    def weight_only(t):
        rs = readers.get(t, [])
        return bool(rs) and all(r.op_type in param_of and list(r.input).index(t) >= 1 for r in rs)

    keep, moved = [], 0
    for n in g.node:
        if (n.op_type == "Constant" and len(n.attribute) == 1 and n.attribute[0].name == "value" and
                weight_only(n.output[0])):
            t = onnx.TensorProto()
            t.CopyFrom(n.attribute[0].t)
            t.name = n.output[0]
            g.initializer.append(t)
            moved += 1
        else:
            keep.append(n)
    del g.node[:]
    g.node.extend(keep)
    return moved


def fold_batchnorm(model):
    """Folds Conv -> BatchNormalization pairs; returns the number folded."""
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    readers = readers_of(g)
    outputs = {o.name for o in g.output}
    producer = {o: n for n in g.node for o in n.output}
    drop, folded = [], 0
    for bn in g.node:
        if bn.op_type != "BatchNormalization":
            continue
        conv = producer.get(bn.input[0])
        if (conv is None or conv.op_type != "Conv" or len(readers[bn.input[0]]) != 1
                or bn.input[0] in outputs or any(i not in inits for i in bn.input[1:5])
                or conv.input[1] not in inits or len(readers[conv.input[1]]) != 1):
            continue
        eps = next((a.f for a in bn.attribute if a.name == "epsilon"), 1e-5)
        gamma, beta, mean, var = (numpy_helper.to_array(inits[i]).astype(np.float64)
                                  for i in bn.input[1:5])
        w = numpy_helper.to_array(inits[conv.input[1]]).astype(np.float64)
        factor = gamma / np.sqrt(var + eps)
        b = np.zeros(w.shape[0])
        if len(conv.input) > 2 and conv.input[2]:
            b = numpy_helper.to_array(inits[conv.input[2]]).astype(np.float64)
        w = w * factor.reshape(-1, *([1] * (w.ndim - 1)))
        b = (b - mean) * factor + beta
        inits[conv.input[1]].CopyFrom(numpy_helper.from_array(w.astype(np.float32), conv.input[1]))
        bias_name = bn.input[2] + "_folded"
        g.initializer.append(numpy_helper.from_array(b.astype(np.float32), bias_name))
        while len(conv.input) < 3:
            conv.input.append("")
        conv.input[2] = bias_name
        conv.output[0] = bn.output[0]
        drop.append(bn)
        folded += 1
    for n in drop:
        g.node.remove(n)
    used = {i for n in g.node for i in n.input}
    for t in [t for t in g.initializer if t.name not in used]:
        g.initializer.remove(t)
    return folded


def float_tensors(model):
    """Names of the f32 values the nodes write, in node order."""
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type.tensor_type.elem_type for v in
             list(inferred.graph.value_info) + list(inferred.graph.output) + list(inferred.graph.input)}
    names = [model.graph.input[0].name]
    for n in model.graph.node:
        if n.op_type == "Constant":
            continue
        names += [o for o in n.output if o and types.get(o) == TensorProto.FLOAT]
    return names


def file_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def calibrate(model, shape, loom, n_inputs, work, pages=False):
    """Per-tensor [lo, hi] over the calibration set, run on Loom (cpu-simd, 1 thread);
    `pages`: text_pages.py's pages instead of standard normal inputs."""
    names = float_tensors(model)
    if len({file_name(n) for n in names}) != len(names):
        fail("two tensor names map to one .npy file name; cannot calibrate")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have and n != m.graph.input[0].name:
            m.graph.output.append(helper.make_tensor_value_info(n, TensorProto.FLOAT, None))
    # the input itself: an Identity makes it an output too
    ident = m.graph.input[0].name + "_calib_copy"
    m.graph.node.append(helper.make_node("Identity", [m.graph.input[0].name], [ident]))
    m.graph.output.append(helper.make_tensor_value_info(ident, TensorProto.FLOAT, None))
    src, prog = os.path.join(work, "calib.onnx"), os.path.join(work, "calib.loom")
    onnx.save(m, src)
    in_name = model.graph.input[0].name
    shape_arg = f"{in_name}={','.join(map(str, shape))}"
    run([loom, "compile", src, "-o", prog, "--target", "cpu-simd", "--input-shape", shape_arg])
    ranges = {}
    for i in range(n_inputs):
        if pages:
            x = text_pages.page(1000 + i, shape[2])
        else:
            x = np.random.default_rng(1000 + i).standard_normal(shape).astype(np.float32)
        xin, out = os.path.join(work, f"x{i}.npy"), os.path.join(work, f"out{i}")
        np.save(xin, x)
        run([loom, "run", prog, "--input", f"{in_name}={xin}", "--threads", "1", "--output-dir", out])
        for n in names:
            v = np.load(os.path.join(out, file_name(ident if n == in_name else n) + ".npy"))
            lo, hi = float(v.min()), float(v.max())
            if n in ranges:
                lo, hi = min(lo, ranges[n][0]), max(hi, ranges[n][1])
            ranges[n] = (lo, hi)
        shutil.rmtree(out)
    return ranges


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}")


def act_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi == lo:
        return np.float32(1.0), np.uint8(0)
    scale = np.float32((hi - lo) / 255.0)
    return scale, np.uint8(np.clip(np.round(-lo / float(scale)), 0, 255))


class Quantizer:
    def __init__(self, model, ranges, qmax):
        self.model = model
        self.g = model.graph
        self.ranges = ranges
        self.qmax = qmax
        self.inits = {t.name: t for t in self.g.initializer}
        self.constants = {n.output[0] for n in self.g.node if n.op_type == "Constant"}
        self.params = {}        # f32 tensor -> (scale, zero point): gets Q/DQ
        self.weights = {}       # initializer -> (axis,)
        self.biases = {}        # (initializer, x tensor, weight) -> the DQ output the node reads
        self.new_inits = []

    def want(self, name, params=None):
        if name in self.inits or not name:
            return
        if name not in self.params:
            if params is None:
                if name not in self.ranges:
                    fail(f"tensor '{name}' has no calibrated range")
                params = act_params(*self.ranges[name])
            self.params[name] = params

    def remove_activations(self):
        """Relu / Clip after a node whose output nothing else reads: the node writes
        the activation's output instead."""
        readers = readers_of(self.g)
        outputs = {o.name for o in self.g.output}
        producer = {o: n for n in self.g.node for o in n.output}
        drop = []
        for n in self.g.node:
            if n.op_type not in REMOVABLE:
                continue
            up = producer.get(n.input[0])
            if (up is None or len(readers[n.input[0]]) != 1 or n.input[0] in outputs
                    or n.output[0] not in self.ranges or up.op_type in REMOVABLE):
                continue
            up.output[list(up.output).index(n.input[0])] = n.output[0]
            drop.append(n)
        for n in drop:
            self.g.node.remove(n)

    def plan(self):
        for n in self.g.node:
            op = n.op_type
            if op in WEIGHTED and len(n.input) > 1 and n.input[1] in self.inits:
                w = numpy_helper.to_array(self.inits[n.input[1]])
                if op == "Conv":
                    axis = 0
                elif op == "ConvTranspose":
                    axis = 1
                elif op == "Gemm":
                    attrs = {a.name: a.i for a in n.attribute}
                    if attrs.get("transA", 0):
                        continue
                    axis = 0 if attrs.get("transB", 0) else 1
                else:
                    if w.ndim != 2:
                        continue
                    axis = 1
                self.want(n.input[0])
                self.weights[n.input[1]] = axis
                if len(n.input) > 2 and n.input[2]:
                    if n.input[2] not in self.inits:
                        fail(f"node '{n.name}': bias '{n.input[2]}' is not a constant")
                    key = (n.input[2], n.input[0], n.input[1])
                    if key not in self.biases:   # a bias shared by convs of other inputs: one each
                        k = sum(1 for b in self.biases if b[0] == n.input[2])
                        self.biases[key] = n.input[2] + (f"_{k}" if k else "") + "_dq"
                    n.input[2] = self.biases[key]
                self.want(n.output[0])
            elif op in ALL_IO:
                if n.output[0] not in self.ranges:
                    continue        # not f32 (a Concat of shape parts)
                if any(i in self.inits or i in self.constants for i in n.input):
                    continue        # a constant operand (a learned scale): stays f32
                for i in n.input:
                    self.want(i)
                self.want(n.output[0])
            elif op in PASS_THROUGH:
                if n.input[0] in self.params:
                    self.want(n.output[0], self.params[n.input[0]])

    def weight_tensor(self, name, axis):
        w = numpy_helper.to_array(self.inits[name]).astype(np.float32)
        red = tuple(i for i in range(w.ndim) if i != axis)
        absmax = np.abs(w).max(axis=red).astype(np.float32)
        scale = (absmax / np.float32(self.qmax)).astype(np.float32)
        scale[scale == 0] = np.float32(1.0)
        shape = [1] * w.ndim
        shape[axis] = -1
        q = np.clip(np.rint(w / scale.reshape(shape)), -self.qmax, self.qmax).astype(np.int8)
        return q, scale

    def emit(self):
        nodes = []
        dq_name = {t: t + "_dq" for t in self.params}
        outputs = {o.name for o in self.g.output}
        # graph outputs keep their names on the DQ: the producer writes <name>_f
        renamed = {t: t + "_f" for t in self.params if t in outputs}
        for t in renamed:
            dq_name[t] = t
        wscale, wq = {}, {}
        for name, axis in self.weights.items():
            q, s = self.weight_tensor(name, axis)
            wscale[name] = s
            self.new_inits += [numpy_helper.from_array(q, name + "_quantized"),
                               numpy_helper.from_array(s, name + "_scale"),
                               numpy_helper.from_array(np.zeros(s.shape, np.int8), name + "_zero_point")]
            nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale",
                                                               name + "_zero_point"], [name + "_dq"],
                                          name=name + "_DequantizeLinear", axis=axis))
            dq_name[name] = name + "_dq"
        for (bias, x, w), dq in self.biases.items():
            name = dq[:-3]
            if x not in self.params:
                fail(f"bias '{name}': its activation '{x}' is not quantized")
            bs = (np.float32(self.params[x][0]) * wscale[w]).astype(np.float32)
            b = numpy_helper.to_array(self.inits[bias]).astype(np.float64)
            q = np.rint(b / bs.astype(np.float64))
            if np.abs(q).max() >= 2 ** 31:
                # stays f32 under the name the Conv reads
                self.new_inits.append(numpy_helper.from_array(b.astype(np.float32), dq))
                continue
            self.new_inits += [numpy_helper.from_array(q.astype(np.int32), name + "_quantized"),
                               numpy_helper.from_array(bs, name + "_scale"),
                               numpy_helper.from_array(np.zeros(bs.shape, np.int32), name + "_zero_point")]
            nodes.append(helper.make_node("DequantizeLinear", [name + "_quantized", name + "_scale",
                                                               name + "_zero_point"], [dq],
                                          name=name + "_DequantizeLinear", axis=0))

        def qdq(t):
            s, z = self.params[t]
            src = renamed.get(t, t)
            self.new_inits += [numpy_helper.from_array(np.array(s, np.float32), t + "_scale"),
                               numpy_helper.from_array(np.array(z, np.uint8), t + "_zero_point")]
            return [helper.make_node("QuantizeLinear", [src, t + "_scale", t + "_zero_point"],
                                     [t + "_quantized"], name=t + "_QuantizeLinear"),
                    helper.make_node("DequantizeLinear", [t + "_quantized", t + "_scale", t + "_zero_point"],
                                     [dq_name[t]], name=t + "_DequantizeLinear")]

        if self.g.input[0].name in self.params:
            nodes += qdq(self.g.input[0].name)
        for n in self.g.node:
            for k, i in enumerate(n.input):
                if i in dq_name:
                    n.input[k] = dq_name[i]
            for k, o in enumerate(n.output):
                if o in renamed:
                    n.output[k] = renamed[o]
            nodes.append(n)
            for o in list(n.output):
                base = next((t for t, r in renamed.items() if r == o), o)
                if base in self.params:
                    nodes += qdq(base)
        used = set(self.weights) | {b[0] for b in self.biases}
        keep = [t for t in self.g.initializer if t.name not in used]
        del self.g.initializer[:]
        self.g.initializer.extend(keep + self.new_inits)
        del self.g.node[:]
        self.g.node.extend(nodes)
        del self.g.value_info[:]


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("zoo")
    ap.add_argument("out")
    ap.add_argument("--models", default=",".join(CNNS[:3]))
    ap.add_argument("--reduce-range", action="store_true")
    ap.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin", "loom")))
    ap.add_argument("--calib", type=int, default=8)
    ap.add_argument("--size", type=int, default=0,
                    help="calibrate at [1, 3, S, S] (S a multiple of 32) instead of the zoo's size")
    ap.add_argument("--keep-calib", action="store_true", help="keep the calibration folder")
    a = ap.parse_args()
    if a.size and (a.size < 32 or a.size % 32):
        fail(f"--size {a.size}: needs a positive multiple of 32")
    if a.calib < 1:
        fail(f"--calib {a.calib}: needs at least one input")
    if not os.access(a.loom, os.X_OK):
        fail(f"--loom {a.loom}: no loom CLI there (build it, or pass --loom / set LOOM)")
    try:
        with open(os.path.join(a.zoo, "zoo.json")) as f:
            zoo = {e["name"]: e for e in json.load(f)["models"]}
    except (OSError, ValueError, KeyError) as e:
        fail(f"{a.zoo}/zoo.json: {e} (run make_zoo.py {a.zoo} first)")
    os.makedirs(a.out, exist_ok=True)
    suffix = "_qdq7" if a.reduce_range else "_qdq"
    entries = []
    for name in a.models.split(","):
        if name not in CNNS:
            fail(f"--models: '{name}' is not one of {', '.join(CNNS)}")
        if name not in zoo:
            fail(f"{a.zoo}/zoo.json has no model '{name}'")
        e = zoo[name]
        model = onnx.load(os.path.join(a.zoo, e["file"]))
        if a.size:
            if name in ("detector", "ppocr_det"):
                fail("--size: the detector's output size is fixed by its input size; use the zoo's")
            for d in model.graph.input[0].type.tensor_type.shape.dim[2:]:
                d.dim_value = a.size
        constants_to_initializers(model)
        folded = fold_batchnorm(model)
        if model.opset_import[0].version < 13:
            # per-channel DequantizeLinear (its axis) needs opset 13
            model = onnx.version_converter.convert_version(model, 13)
        onnx.save(model, os.path.join(a.out, f"{name}_f32fold.onnx"))
        work = tempfile.mkdtemp(prefix=f"qzoo_{name}_", dir=a.out)
        shape = [1, 3, a.size, a.size] if a.size else e["shape"]
        ranges = calibrate(model, shape, a.loom, a.calib, work, pages=e.get("calib") == "text_pages")
        if not a.keep_calib:
            shutil.rmtree(work)
        q = Quantizer(model, ranges, 64 if a.reduce_range else 127)
        q.remove_activations()
        q.plan()
        q.emit()
        model.producer_name = "loom-quantize-zoo"
        onnx.checker.check_model(model, full_check=True)
        out_file = f"{name}{suffix}.onnx"
        onnx.save(model, os.path.join(a.out, out_file))
        last = model.graph.output[0].name
        s, z = q.params[last] if last in q.params else (None, None)
        counts = {}
        for n in model.graph.node:
            counts[n.op_type] = counts.get(n.op_type, 0) + 1
        print(f"{name}: {folded} BatchNormalization folded, {len(q.params)} activations and "
              f"{len(q.weights)} weights quantized, {counts.get('QuantizeLinear', 0)} Q, "
              f"{counts.get('DequantizeLinear', 0)} DQ, {len(model.graph.node)} nodes -> {out_file}")
        entries.append({"name": name, "file": out_file, "f32": f"{name}_f32fold.onnx",
                        "input": e["input"], "shape": shape, "npy": None if a.size else e["npy"],
                        "output": last, "output_scale": None if s is None else float(s),
                        "output_zero_point": None if z is None else int(z),
                        "weight_bits": 7 if a.reduce_range else 8})
    # The index keeps the entries of models quantized by earlier runs into
    # OUT_DIR (add_ppocr_det.py's model is quantized on its own).
    index = os.path.join(a.out, f"qdq_zoo{suffix[4:]}.json")
    done = {e["name"] for e in entries}
    try:
        with open(index) as f:
            entries = [e for e in json.load(f)["models"] if e.get("name") not in done] + entries
    except (OSError, ValueError, KeyError):
        pass
    with open(index, "w") as f:
        json.dump({"models": entries}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
