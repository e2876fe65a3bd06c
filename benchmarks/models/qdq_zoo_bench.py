#!/usr/bin/python3
"""Checks and times the quantized zoo (quantize_zoo.py) on cpu-simd against
ONNX Runtime on the same QDQ file, and against Loom's f32 program of the
zoo's model.

usage: qdq_zoo_bench.py ZOO_DIR QZOO_DIR --ort-dir DIR [--loom PATH]
           [--models a,b] [--bits 8,7] [--threads 1,2] [--tries 3]
           [--repeat 20] [--layers] [--out DIR]
(OUT defaults to QZOO_DIR/bench)

ZOO_DIR: make_zoo.py's output (the f32 models and their inputs); QZOO_DIR:
quantize_zoo.py's (qdq_zoo.json for 8-bit weights, qdq_zoo7.json for 7-bit).
--ort-dir: the ONNX Runtime peer (ort_bench.js there; ../shared/peers/ort/
setup.sh prints it).

Numerics: each QDQ model runs once in Loom (`loom run P.loom --threads 1`) and
once in ONNX Runtime on the zoo's input; the largest difference of the final
output is printed in units of its last DequantizeLinear's scale (the bound
of issue 27 is 1). --layers also makes every QuantizeLinear output a graph
output (in a copy of the model) and prints, per quantized tensor in node
order, how many u8 values differ and by how much (the first tensor that
differs shows where the two runtimes part; a tensor whose quantized inputs
are all equal is marked as a place where they part), and checks the first
convolution against an exact integer emulation in numpy (exact_first_conv).

Timing: for each try, each thread count and each model, in turn: Loom's QDQ
program (`loom run P.loom --repeat N --threads T`), ONNX Runtime on the QDQ
file (ORT_THREADS=T ORT_REPEAT=N node ort_bench.js) and Loom's f32 program
of the zoo's model, each run twice, with 5 and with 5 + N timed runs: the
CPU time per run is the difference of the two processes' CPU times (user +
sys, from getrusage) over N (start-up, compilation and weight packing
cancel; on a loaded machine it is steadier than wall-clock time), and the
wall-clock latency is the longer run's median. Each cell gives
"CPU ms / wall ms (smallest wall ms)", medians over the tries; the ratio is
of CPU times for 1 thread and of wall-clock medians for more (CPU time
then counts every thread). Prints a Markdown table (also
OUT/qdq_zoo_table.md).

Run with Debian's /usr/bin/python3 (python3-onnx, python3-numpy)."""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def fail(msg):
    print(f"qdq_zoo_bench.py: {msg}", file=sys.stderr)
    sys.exit(1)


def sh(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed ({r.returncode}): {(r.stderr or r.stdout).strip()[-400:]}")
    return r.stdout + r.stderr


def file_name(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def loom_median(out):
    m = re.search(r"median ([0-9.]+) us", out)
    if not m:
        fail(f"no latency in loom's output: {out[-300:]}")
    return float(m.group(1)) / 1000.0


def ort_run(a, model, outdir, feed, threads, repeat, warmup):
    env = dict(os.environ, ORT_THREADS=str(threads), ORT_REPEAT=str(repeat), ORT_WARMUP=str(warmup))
    out = sh(["node", os.path.join(a.ort_dir, "ort_bench.js"), model, outdir, feed], env)
    # the figures: the last JSON line (ONNX Runtime's warnings on stderr, such
    # as unused initializers of an exported model, come with it)
    lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
    if not lines:
        fail(f"no figures in ort_bench.js's output: {out[-300:]}")
    return json.loads(lines[-1])


def expose_quantized(src, dst):
    """Writes a copy of src with every QuantizeLinear output a graph output;
    returns those names and, for each, the quantized tensors it is computed
    from (through DequantizeLinear and the f32 nodes between) and the
    operator types on the way."""
    m = onnx.load(src)
    have = {o.name for o in m.graph.output}
    producer = {o: n for n in m.graph.node for o in n.output}
    names, sources = [], {}
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and n.output[0] not in have:
            m.graph.output.append(helper.make_tensor_value_info(n.output[0], TensorProto.UINT8, None))
            names.append(n.output[0])
            srcs, ops, todo, seen = set(), [], [n.input[0]], set()
            while todo:
                t = todo.pop()
                p = producer.get(t)
                if p is None or t in seen:
                    continue
                seen.add(t)
                if p.op_type == "DequantizeLinear":
                    srcs.add(p.input[0])
                    continue
                ops.append(p.op_type)
                todo.extend(p.input)
            sources[n.output[0]] = (srcs, sorted(set(ops)))
    onnx.save(m, dst)
    return names, sources


def exact_first_conv(model_path, loom_dir, ort_dir):
    """The first fused convolution (DQ(x) -> Conv -> Q) as exact integers in numpy
    (QLinearConv: integer accumulators, then float(acc + bias) * float(x_scale *
    w_scale / y_scale)), from the u8 input Loom wrote, against both runtimes'
    u8 outputs; rounded half to even both before the zero point is added
    (QuantizeLinear's order) and after (ONNX's QLinearConv reference)."""
    m = onnx.load(model_path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    prod = {o: n for n in m.graph.node for o in n.output}
    conv = next(n for n in m.graph.node if n.op_type == "Conv")
    attrs = {a.name: (list(a.ints) if a.ints else a.i) for a in conv.attribute}
    if attrs.get("group", 1) != 1:
        return
    dqx, dqw, dqb = (prod[i] for i in conv.input[:3])
    q = next(n for n in m.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == conv.output[0])
    x = np.load(os.path.join(loom_dir, file_name(dqx.input[0]) + ".npy")).astype(np.int64)
    x = x - int(inits[dqx.input[2]])
    w = inits[dqw.input[0]].astype(np.int64)
    k, st, p = attrs["kernel_shape"], attrs["strides"], attrs["pads"]
    _, _, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    oh, ow = (h + p[0] + p[2] - k[0]) // st[0] + 1, (wd + p[1] + p[3] - k[1]) // st[1] + 1
    acc = np.zeros((w.shape[0], oh, ow), np.int64)
    for i in range(k[0]):
        for j in range(k[1]):
            acc += np.einsum("chw,mc->mhw", xp[0, :, i:i + st[0] * oh:st[0], j:j + st[1] * ow:st[1]], w[:, :, i, j])
    acc += inits[dqb.input[0]].astype(np.int64).reshape(-1, 1, 1)
    mult = (np.float32(inits[dqx.input[1]]) * inits[dqw.input[1]].astype(np.float32) /
            np.float32(inits[q.input[1]])).astype(np.float32).reshape(-1, 1, 1)
    val = (acc.astype(np.float32) * mult).astype(np.float32).astype(np.float64)
    yz = int(inits[q.input[2]])
    first = np.clip(np.rint(val) + yz, 0, 255)
    after = np.clip(np.rint(val + yz), 0, 255)
    for who, d in (("Loom", loom_dir), ("ONNX Runtime", ort_dir)):
        y = np.load(os.path.join(d, file_name(q.output[0]) + ".npy")).astype(np.int64)[0]
        print(f"  first convolution ({conv.name}), exact integer emulation vs {who}: "
              f"{int((y != first).sum())} of {y.size} values differ (largest {int(np.abs(y - first).max())}) "
              f"rounding before the zero point, {int((y != after).sum())} rounding after")


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1])
    ap.add_argument("zoo")
    ap.add_argument("qzoo")
    ap.add_argument("--ort-dir", required=True)
    ap.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "bin", "loom")))
    ap.add_argument("--models", default="mobilenetv3_small,resnet18,detector")
    ap.add_argument("--bits", default="8,7")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--layers", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out = a.out or os.path.join(a.qzoo, "bench")
    os.makedirs(out, exist_ok=True)
    if not os.path.isfile(os.path.join(a.ort_dir, "ort_bench.js")):
        fail(f"--ort-dir {a.ort_dir}: no ort_bench.js there")
    threads = [int(t) for t in a.threads.split(",")]
    progs = []   # (model, label, kind, path, entry)
    for bits in a.bits.split(","):
        index = os.path.join(a.qzoo, "qdq_zoo.json" if bits == "8" else "qdq_zoo7.json")
        if bits not in ("8", "7"):
            fail(f"--bits: {bits} is neither 8 nor 7")
        try:
            with open(index) as f:
                entries = {e["name"]: e for e in json.load(f)["models"]}
        except (OSError, ValueError, KeyError) as e:
            fail(f"{index}: {e} (run quantize_zoo.py{' --reduce-range' if bits == '7' else ''} first)")
        for name in a.models.split(","):
            if name not in entries:
                fail(f"{index} has no model '{name}'")
            progs.append((name, bits, entries[name]))

    shape_arg = lambda e: f"{e['input']}={','.join(map(str, e['shape']))}"
    rows = []
    for name, bits, e in progs:
        q = os.path.join(a.qzoo, e["file"])
        feed = f"{e['input']}={os.path.join(a.zoo, name + '_input.npy')}"
        qp = os.path.join(out, f"{name}_qdq{bits}.loom")
        compiled = sh([a.loom, "compile", q, "-o", qp, "--target", "cpu-simd", "--input-shape", shape_arg(e)])
        ref = re.search(r"^reference\s+\S+\s+(\d+)", compiled, re.M)
        placed = json.loads(sh([a.loom, "run", qp, "--input", feed, "--threads", "1", "--json",
                                "--output-dir", os.path.join(out, f"loom_{name}{bits}")]))
        devices = sorted({p["device"] for p in placed["placements"]})
        ort_run(a, q, os.path.join(out, f"ort_{name}{bits}"), feed, 1, 1, 0)
        o = file_name(e["output"]) + ".npy"
        x = np.load(os.path.join(out, f"loom_{name}{bits}", o))
        y = np.load(os.path.join(out, f"ort_{name}{bits}", o))
        d = np.abs(x.astype(np.float64) - y) / e["output_scale"]
        print(f"{name}, {bits}-bit weights: delegates on {', '.join(devices)}, "
              f"{ref.group(1) if ref else '?'} nodes on the reference kernels; Loom vs ONNX Runtime: largest "
              f"difference {d.max():.3f} output units, {int((d > 0.5).sum())} of {d.size} values differ")
        if a.layers:
            lq = os.path.join(out, f"{name}_qdq{bits}_layers.onnx")
            names, sources = expose_quantized(q, lq)
            lp = lq[:-5] + ".loom"
            sh([a.loom, "compile", lq, "-o", lp, "--target", "cpu-simd", "--input-shape", shape_arg(e)])
            ld, od = os.path.join(out, f"loom_{name}{bits}_l"), os.path.join(out, f"ort_{name}{bits}_l")
            sh([a.loom, "run", lp, "--input", feed, "--threads", "1", "--output-dir", ld])
            ort_run(a, lq, od, feed, 1, 1, 0)
            differ, starts, bad = 0, 0, set()
            for t in names:
                u = np.load(os.path.join(ld, file_name(t) + ".npy")).astype(np.int64)
                v = np.load(os.path.join(od, file_name(t) + ".npy")).astype(np.int64)
                dd = np.abs(u - v)
                if dd.max() > 0:
                    differ += 1
                    bad.add(t)
                    srcs, ops = sources[t]
                    # Where the runtimes part: its quantized inputs agree.
                    origin = not (srcs & bad)
                    starts += origin
                    print(f"  {t} ({', '.join(ops)}): {int((dd > 0).sum())} of {dd.size} values differ, by up to "
                          f"{int(dd.max())}" + ("; its quantized inputs are equal: the runtimes part here" if origin
                                                else ""))
            print(f"  {differ} of {len(names)} quantized tensors differ, {starts} of them from equal inputs")
            exact_first_conv(q, ld, od)
        rows.append((name, bits, e, q, qp, feed))

    f32 = {}
    for name, _, e, _, _, feed in rows:
        if name not in f32:
            p = os.path.join(out, f"{name}_f32.loom")
            sh([a.loom, "compile", os.path.join(a.zoo, name + ".onnx"), "-o", p, "--target", "cpu-simd",
                "--input-shape", shape_arg(e)])
            f32[name] = p

    def cpu_now():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def timed(run):
        """run(repeat) -> median ms; returns (median ms of the long run, CPU ms per run:
        (CPU of repeat 5 + R) - (CPU of repeat 5), over R, start-up and packing cancelled)."""
        c0 = cpu_now()
        run(5)
        c1 = cpu_now()
        wall = run(5 + a.repeat)
        c2 = cpu_now()
        return wall, ((c2 - c1) - (c1 - c0)) * 1000.0 / a.repeat

    def loom_timed(prog, feed, th):
        return timed(lambda r: loom_median(sh([a.loom, "run", prog, "--input", feed, "--repeat", str(r),
                                               "--threads", str(th)])))

    def ort_timed(q, feed, th):
        return timed(lambda r: ort_run(a, q, os.path.join(out, "ort_timing"), feed, th, r, 3)["median_us"] / 1000.0)

    times = {}
    for t in range(a.tries):
        for th in threads:
            timed_f32 = set()
            for name, bits, e, q, qp, feed in rows:
                for key, value in (("loom", loom_timed(qp, feed, th)), ("ort", ort_timed(q, feed, th))):
                    times.setdefault((name, bits, th, key), []).append(value)
                if name not in timed_f32:
                    timed_f32.add(name)
                    times.setdefault((name, "f32", th, "f32"), []).append(loom_timed(f32[name], feed, th))
            print(f"[try {t + 1}/{a.tries}, {th} thread(s) done]", file=sys.stderr)

    def cell(k):
        v = times.get(k)
        walls, cpus = [w for w, _ in v], [c for _, c in v]
        return f"{statistics.median(cpus):.1f} / {statistics.median(walls):.1f} ({min(walls):.1f})"

    lines = ["| model | weights | threads | Loom QDQ, cpu-simd | ONNX Runtime, same QDQ file | "
             "Loom / ORT | Loom f32 program, cpu-simd |", "|---|---|---|---|---|---|---|"]
    for name, bits, *_ in rows:
        for th in threads:
            lq, oq = times[(name, bits, th, "loom")], times[(name, bits, th, "ort")]
            # one thread: the ratio of CPU times; more: of wall-clock medians
            pick = 1 if th == 1 else 0
            ratio = statistics.median(v[pick] for v in lq) / statistics.median(v[pick] for v in oq)
            lines.append(f"| {name} | {bits}-bit | {th} | {cell((name, bits, th, 'loom'))} | "
                         f"{cell((name, bits, th, 'ort'))} | {ratio:.2f} | {cell((name, 'f32', th, 'f32'))} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(out, "qdq_zoo_table.md"), "w") as f:
        f.write(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
