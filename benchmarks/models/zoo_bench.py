#!/usr/bin/env python3
"""Runs the model zoo (make_zoo.py's output) in Loom and in ONNX Runtime and
prints one Markdown table: latency (median), their ratio, peak resident
memory of each process, and the largest output difference relative to the
output's range. Called by run_zoo.sh; usable alone:

  python3 zoo_bench.py --zoo DIR --out DIR --loom build/bin/loom \
      [--ort-dir DIR] [--target T ...] [--threads 1,2] [--budget-s S] [--models a,b]

--target takes what `loom compile --target` takes (`cpu-simd`,
`vulkan-compute,cpu-simd`, ...), or `reference` for no plugin at all; give it
several times for several rows per model. Each Loom program runs once with
--repeat 2 (outputs written and compared), then, when that run took less than
a third of --budget-s, again with as many repeats as fit in the budget; the
median of the longest run is reported. ONNX Runtime runs through the peer's
ort_bench.js (intra-op threads from ORT_THREADS, all graph optimizations).
Peak memory is each process's maximum resident set size from GNU time -v;
for ONNX Runtime the peak of a bare Node.js process is subtracted, and that
baseline is printed.
Exit status 1 when any model fails or differs by more than --tol.
"""
import argparse
import datetime
import json
import os
import platform
import re
import signal
import subprocess
import sys
import time

import numpy as np


TIME = "/usr/bin/time"


def run(cmd, log, env=None, timeout=None):
    """Runs cmd under GNU time with stdout+stderr to log.

    Returns (exit code, peak RSS in MB or None, output text, seconds). GNU time
    rather than wait4() here: a child forked from this Python process carries
    the interpreter's resident pages until exec, and ru_maxrss would count them.
    """
    t0 = time.monotonic()
    tfile = log + ".time"
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.Popen([TIME, "-v", "-o", tfile] + cmd, stdout=f, stderr=subprocess.STDOUT,
                             env=env, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = 124
            f.write(f"\nzoo_bench: error: killed after {timeout:.0f} s\n")
    with open(log) as f:
        text = f.read()
    peak = None
    try:
        with open(tfile) as f:
            m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", f.read())
            peak = int(m.group(1)) / 1024.0 if m else None
    except OSError:
        pass
    return rc, peak, text, time.monotonic() - t0


def error_line(text, rc):
    lines = [l for l in text.splitlines() if "error" in l.lower()]
    return (lines[-1] if lines else (text.strip().splitlines() or ["?"])[-1]) + f" (exit {rc})"


UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def loom_median_ms(text):
    m = re.search(r"latency over (\d+) runs.*?median ([0-9.]+) (ns|us|ms|s)\b", text)
    return (float(m.group(2)) * UNITS[m.group(3)], int(m.group(1))) if m else (None, 0)


def rel_diff(got, ref):
    """max |got - ref| over the range of ref (max - min), over all outputs."""
    worst = 0.0
    for a, b in zip(got, ref):
        if a.shape != b.shape:
            return float("inf")
        span = float(b.max() - b.min()) if b.size else 0.0
        if span == 0.0:
            span = max(float(np.abs(b).max()) if b.size else 0.0, 1.0)
        worst = max(worst, float(np.abs(a.astype(np.float64) - b).max()) / span)
    return worst


def load_outputs(folder, names):
    files = [os.path.join(folder, re.sub(r"[^A-Za-z0-9._-]", "_", n) + ".npy") for n in names]
    if not all(os.path.exists(f) for f in files):
        return None
    return [np.load(f) for f in files]


def machine():
    flags, model = set(), platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() == "flags" and not flags:
                    flags = set(val.split())
                elif key.strip() == "model name" and model == (platform.processor() or platform.machine()):
                    model = val.strip()
    except OSError:
        pass
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else platform.machine()
    return model, isa, os.cpu_count()


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    global TIME
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", required=True, help="folder written by make_zoo.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--loom", required=True, help="the loom CLI")
    ap.add_argument("--ort-dir", help="folder with ort_bench.js and node_modules (setup.sh's)")
    ap.add_argument("--target", action="append", help="loom compile --target value, or 'reference'")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--models", help="comma-separated subset")
    ap.add_argument("--budget-s", type=float, default=10.0,
                    help="seconds of timed Loom runs to aim for per row (default 10)")
    ap.add_argument("--max-repeat", type=int, default=200)
    ap.add_argument("--ort-repeat", type=int, default=50)
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="per command")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--plugin-option", action="append", default=[],
                    help="KEY=VALUE for loom run's plugins (cpu.isa=avx2 caps cpu-simd's instruction set)")
    ap.add_argument("--time", default=TIME, help="GNU time (Debian package 'time')")
    ap.add_argument("--command", help="the command line to record in the table's header")
    a = ap.parse_args()
    TIME = a.time

    targets = a.target or ["cpu-simd"]
    threads = [int(t) for t in a.threads.split(",") if t]
    with open(os.path.join(a.zoo, "zoo.json")) as f:
        zoo = json.load(f)["models"]
    if a.models:
        keep = a.models.split(",")
        zoo = [m for m in zoo if m["name"] in keep]
    logs = os.path.join(a.out, "logs")
    os.makedirs(logs, exist_ok=True)
    model_name, isa, ncpu = machine()
    for opt in a.plugin_option:
        if opt.startswith("cpu.isa="):
            isa = opt.split("=", 1)[1] + " (cpu.isa)"

    ort_version, node_mb = None, None
    if a.ort_dir:
        rc, node_mb, _, _ = run(["node", "-e", "0"], os.path.join(logs, "node_baseline.log"))
        if rc != 0:
            node_mb = None

    ort_cache, rows, failed = {}, [], False
    for m in zoo:
        name, onnx_file = m["name"], os.path.join(a.zoo, m["file"])
        npy = os.path.join(a.zoo, m["npy"])
        shape = ",".join(map(str, m["shape"]))
        for target in targets:
            slug = target.replace(",", "+")
            prog = os.path.join(a.out, "programs", f"{name}.{slug}.loom")
            os.makedirs(os.path.dirname(prog), exist_ok=True)
            cmd = [a.loom, "compile", onnx_file, "-o", prog, "--input-shape", f"{m['input']}={shape}"]
            cmd += ["--target", "none" if target == "reference" else target]
            rc, _, text, secs = run(cmd, os.path.join(logs, f"compile.{name}.{slug}.log"),
                                    timeout=a.timeout_s)
            print(f"[zoo] compile {name} for {target}: "
                  f"{'ok' if rc == 0 else 'FAILED'} ({secs:.1f} s)", file=sys.stderr, flush=True)
            compile_err = None if rc == 0 else error_line(text, rc)
            ref_nodes = None
            mref = re.search(r"^reference\s+\S+\s+(\d+)", text, re.M)
            if mref:
                ref_nodes = int(mref.group(1))
            for nt in threads:
                row = {"model": name, "target": target, "threads": nt, "ref_nodes": ref_nodes,
                       "opset": m.get("opset")}
                # ONNX Runtime, once per model and thread count
                if a.ort_dir and (name, nt) not in ort_cache:
                    odir = os.path.join(a.out, "ort", f"{name}.t{nt}")
                    env = dict(os.environ, ORT_THREADS=str(nt), ORT_REPEAT=str(a.ort_repeat))
                    rc, mb, text, secs = run(
                        ["node", os.path.join(a.ort_dir, "ort_bench.js"), onnx_file, odir,
                         f"{m['input']}={npy}"], os.path.join(logs, f"ort.{name}.t{nt}.log"),
                        env=env, timeout=a.timeout_s)
                    res = {"dir": odir}
                    js = [l for l in text.splitlines() if l.startswith("{")]
                    if rc == 0 and js:
                        r = json.loads(js[-1])
                        ort_version = r.get("runtime", ort_version)
                        res.update(ms=r["median_us"] / 1e3, mb=mb, runs=r["runs"])
                    else:
                        res["error"] = error_line(text, rc)
                    print(f"[zoo] ORT {name} threads {nt}: "
                          f"{fmt(res.get('ms'), '.2f')} ms ({secs:.1f} s)", file=sys.stderr, flush=True)
                    ort_cache[(name, nt)] = res
                ort = ort_cache.get((name, nt), {})
                row["ort_ms"], row["ort_mb"] = ort.get("ms"), ort.get("mb")
                if ort.get("error"):
                    row["error"] = "ORT: " + ort["error"]
                    failed = True
                if compile_err:
                    row["error"] = "compile: " + compile_err
                    rows.append(row)
                    failed = True
                    continue
                # Loom: one run that writes the outputs, then a timed one if time allows
                ldir = os.path.join(a.out, "loom", f"{name}.{slug}.t{nt}")
                base = [a.loom, "run", prog, "--input", f"{m['input']}={npy}",
                        "--threads", str(nt), "--timeout", "0"]
                for opt in a.plugin_option:
                    base += ["--plugin-option", opt]
                rc, mb, text, secs = run(base + ["--output-dir", ldir, "--repeat", "2"],
                                         os.path.join(logs, f"run.{name}.{slug}.t{nt}.log"),
                                         timeout=a.timeout_s)
                if rc != 0:
                    row["error"] = "run: " + error_line(text, rc)
                    print(f"[zoo] loom {name} {target}: FAILED", file=sys.stderr, flush=True)
                    rows.append(row)
                    failed = True
                    continue
                ms, runs = loom_median_ms(text)
                peak = mb or 0.0
                reps = min(a.max_repeat, int(a.budget_s * 1e3 / ms)) if ms else 0
                if ms and ms * 3 < a.budget_s * 1e3 and reps >= 3:
                    rc, mb, text, _ = run(base + ["--repeat", str(reps)],
                                          os.path.join(logs, f"time.{name}.{slug}.t{nt}.log"),
                                          timeout=a.timeout_s)
                    if rc == 0:
                        ms, runs = loom_median_ms(text)
                        peak = max(peak, mb or 0.0)
                row.update(loom_ms=ms, loom_mb=peak, loom_runs=runs, ort_runs=ort.get("runs"))
                print(f"[zoo] loom {name} {target} threads {nt}: {fmt(ms, '.2f')} ms "
                      f"({runs} runs)", file=sys.stderr, flush=True)
                got = load_outputs(ldir, m["outputs"])
                ref = load_outputs(ort["dir"], m["outputs"]) if ort.get("ms") is not None else None
                if got is not None and ref is not None:
                    row["diff"] = rel_diff(got, ref)
                    if not row["diff"] <= a.tol:
                        failed = True
                rows.append(row)

    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [f"{when}; {ncpu} CPUs, {model_name}, ISA {isa}; "
             f"{ort_version or 'ONNX Runtime not run'}"
             + (f"; Node.js alone peaks at {node_mb:.0f} MB" if node_mb else ""),
             ""]
    if a.command:
        lines[1:1] = ["", f"`{a.command}`"]
    lines += ["| model | target | threads | Loom ms (median) | ORT ms (median) | Loom/ORT "
              "| Loom peak MB | ORT peak MB (net of Node) | max rel diff | ISA | nodes on reference | runs Loom/ORT |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = r["loom_ms"] / r["ort_ms"] if r.get("loom_ms") and r.get("ort_ms") else None
        ort_net = r["ort_mb"] - node_mb if r.get("ort_mb") and node_mb else r.get("ort_mb")
        diff = r.get("diff")
        dtxt = "-" if diff is None else f"{diff:.1e}" + ("" if diff <= a.tol else " (over tol)")
        if r.get("error"):
            dtxt = "error"
        lines.append(
            f"| {r['model']} | {r['target']} | {r['threads']} | {fmt(r.get('loom_ms'), '.2f')} "
            f"| {fmt(r.get('ort_ms'), '.2f')} | {fmt(ratio, '.1f')} | {fmt(r.get('loom_mb'), '.0f')} "
            f"| {fmt(ort_net, '.0f')} | {dtxt} | {isa} | {fmt(r.get('ref_nodes'), 'd')} "
            f"| {r.get('loom_runs', '-')}/{r.get('ort_runs') or '-'} |")
    errors = [f"- {r['model']} ({r['target']}): {r['error']}" for r in rows if r.get("error")]
    if errors:
        lines += ["", "Failures:"] + errors
    table = "\n".join(lines) + "\n"
    sys.stdout.write(table)
    with open(os.path.join(a.out, "zoo_table.md"), "w") as f:
        f.write(table)
    with open(os.path.join(a.out, "zoo_results.json"), "w") as f:
        json.dump({"date": when, "cpu": model_name, "isa": isa, "nproc": ncpu,
                   "ort": ort_version, "node_baseline_mb": node_mb, "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
