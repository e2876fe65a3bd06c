#!/usr/bin/env python3
"""Open shapes: one Loom program compiled with open dimensions, run at many
sizes, against a program compiled for each size alone and against ONNX
Runtime at the same size and thread count. Prints one Markdown table (also
written to OUT/open_shapes_table.md, raw figures in OUT/open_shapes_results.json,
every command's output in OUT/logs/):

  /usr/bin/python3 benchmarks/models/open_shapes_bench.py [--out DIR] [--loom PATH]
      [--threads 1,2] [--budget-s S] [--first-runs K] [--ort-repeat N] [--cases a,b]

Needs a python3 with onnx and numpy (Debian: python3-onnx python3-numpy; it
runs make_zoo.py itself into OUT/models) and, for the ONNX Runtime columns,
node and npm (the peer ../shared/peers/ort beside the repository).

Cases (the model's input, with what the open program leaves open):
- detector, compiled once with --input-shape input=1,3,?,? and run at
  256², 320², 384², 448², 512², 320x480 and 480x320 (H x W); every program
  and ONNX Runtime read detector_hw.onnx, the zoo's detector with its declared
  320x320 made symbolic (see relax_detector);
- text_encoder, compiled once with --input-shape input=1,?,64 and run at
  T = 16, 32, 64, 128, 256;
- resnet18, compiled once with --input-shape input=?,3,224,224 and run at
  batch 1, 2, 4, 8.
Each size also gets a fixed program (--input-shape with every dimension).

What is measured, per (case, size, threads):
- first run: `loom run --repeat 2 --json`'s first_run_us in a fresh process,
  --first-runs times (default 3), median. For the open program it includes
  the specialization at the new binding (shape inference, plugin compile,
  load; its "specialize" trace span is reported beside it) and the first
  execution's own one-time work (cpu-simd packs weights on the first run),
  which the fixed program's first run has too: both are shown;
- steady state: `loom run --repeat R` with R runs fitting --budget-s (3 to
  --max-repeat), median after one warm-up, for the open and the fixed program;
- ONNX Runtime: the peer's ort_bench.js (intra-op threads = threads, all
  graph optimizations, 10 warm-ups, --ort-repeat timed runs), median;
- max rel diff: max|Loom open - ORT| / (max(ORT) - min(ORT));
- a new size in a warm process (issue 25's "first run at a new size"
  without the process's own start-up, which a fixed program pays too): one
  process per (case, threads) loads the open program through the Python API
  (build/python), runs it at a warm-up size that is not measured
  (WARMUP_SIZE), then at each size in turn times the first run (the new
  binding) and the median of the runs after it (up to --budget-s / sizes).
Exit status 1 when a run fails or a difference exceeds --tol.
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from zoo_bench import fmt, load_outputs, machine, rel_diff  # noqa: E402

# case -> (open --input-shape, sizes as full input shapes, label of a size)
CASES = {
    "detector": ("1,3,?,?",
                 [(1, 3, s, s) for s in (256, 320, 384, 448, 512)] + [(1, 3, 320, 480),
                                                                        (1, 3, 480, 320)],
                 lambda s: f"{s[2]}x{s[3]}"),
    "text_encoder": ("1,?,64", [(1, t, 64) for t in (16, 32, 64, 128, 256)],
                     lambda s: f"T={s[1]}"),
    "resnet18": ("?,3,224,224", [(n, 3, 224, 224) for n in (1, 2, 4, 8)],
                 lambda s: f"N={s[0]}"),
}

MODEL_FILE = {"detector": "detector_hw.onnx"}  # see relax_detector

# case -> a size the warm-process measurement runs first and does not report
WARMUP_SIZE = {"detector": (1, 3, 192, 192), "text_encoder": (1, 8, 64), "resnet18": (3, 3, 224, 224)}


def warm_worker(prog, threads, budget_s, npys):
    """--warm-worker: in this process, the open program at each input file
    in turn (the first one is the warm-up); prints one JSON list of
    {"first_ms", "ms", "runs"}, one per file after the first."""
    import loom
    session = loom.Runtime(threads=threads).load(prog).session()
    xs = [np.load(f) for f in npys]
    for _ in range(2):
        session.run({"input": xs[0]})
    out = []
    per_size = budget_s / max(1, len(xs) - 1)
    for x in xs[1:]:
        t0 = time.perf_counter()
        session.run({"input": x})
        first = time.perf_counter() - t0
        times, start = [], time.perf_counter()
        while len(times) < 3 or (time.perf_counter() - start < per_size and len(times) < 200):
            t0 = time.perf_counter()
            session.run({"input": x})
            times.append(time.perf_counter() - t0)
        out.append({"first_ms": first * 1e3, "ms": statistics.median(times) * 1e3, "runs": len(times)})
    print(json.dumps(out))


def sh(cmd, log, env=None, timeout=None):
    """Runs cmd; stdout and stderr go to log. Returns (exit code, stdout text)."""
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=f, env=env, timeout=timeout,
                               text=True)
            rc, out = p.returncode, p.stdout
        except subprocess.TimeoutExpired as e:
            rc, out = 124, e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            f.write(f"\nopen_shapes_bench: error: killed after {timeout:.0f} s\n")
        f.write(out)
    return rc, out


def ms(v):
    """Milliseconds to three significant figures or so."""
    return "-" if v is None else f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 100 else f"{v:.0f}"


def why(log, rc):
    with open(log) as f:
        lines = [l.strip() for l in f if l.strip()]
    errs = [l for l in lines if "error" in l.lower()]
    return (errs[-1] if errs else lines[-1] if lines else "?")[:200] + f" (exit {rc})"


def loom_json(out):
    try:
        return json.loads(out)
    except ValueError:
        return {}


def specialize_ms(trace_file):
    try:
        with open(trace_file) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    events = d["traceEvents"] if isinstance(d, dict) else d
    spans = [e["dur"] / 1e3 for e in events if e.get("cat") == "specialize" and "dur" in e]
    return sum(spans) if spans else None


class Bench:
    def __init__(self, a):
        self.a = a
        self.logs = os.path.join(a.out, "logs")
        os.makedirs(self.logs, exist_ok=True)

    def log(self, name):
        return os.path.join(self.logs, re.sub(r"[^A-Za-z0-9._=-]", "_", name) + ".log")

    def compile(self, onnx_file, shape, prog):
        cmd = [self.a.loom, "compile", onnx_file, "-o", prog, "--target", "cpu-simd",
               "--input-shape", f"input={shape}"]
        log = self.log("compile." + os.path.basename(prog))
        rc, _ = sh(cmd, log, timeout=self.a.timeout_s)
        return None if rc == 0 else why(log, rc)

    def loom(self, prog, npy, nt, tag, outdir):
        """First runs in fresh processes, then a timed run. Returns a dict."""
        base = [self.a.loom, "run", prog, "--input", f"input={npy}", "--threads", str(nt),
                "--timeout", "0", "--json"]
        firsts, specs, est = [], [], []
        for k in range(self.a.first_runs):
            trace = os.path.join(self.a.out, "traces", f"{tag}.{k}.json")
            os.makedirs(os.path.dirname(trace), exist_ok=True)
            extra = ["--output-dir", outdir] if k == 0 else []
            log = self.log(f"first.{tag}.{k}")
            rc, out = sh(base + ["--repeat", "2", "--trace", trace] + extra, log,
                         timeout=self.a.timeout_s)
            d = loom_json(out)
            if rc != 0 or "first_run_us" not in d:
                return {"error": why(log, rc)}
            firsts.append(d["first_run_us"] / 1e3)
            est.append(d["latency_us"]["median"] / 1e3)
            s = specialize_ms(trace)
            if s is not None:
                specs.append(s)
        res = {"first_ms": statistics.median(firsts), "first_all_ms": firsts,
               "specialize_ms": statistics.median(specs) if specs else None}
        reps = int(min(self.a.max_repeat, max(3, self.a.budget_s * 1e3 / min(est))))
        log = self.log(f"time.{tag}")
        rc, out = sh(base + ["--repeat", str(reps)], log, timeout=self.a.timeout_s)
        d = loom_json(out)
        if rc != 0 or "latency_us" not in d:
            return dict(res, error=why(log, rc))
        res.update(ms=d["latency_us"]["median"] / 1e3, runs=d["latency_us"]["runs"],
                   timed_first_ms=d.get("first_run_us", 0) / 1e3)
        return res

    def warm(self, prog, npys, nt, tag):
        """warm_worker in a child process; a list of dicts, or one error dict."""
        env = dict(os.environ)
        pydir = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(self.a.loom))), "python")
        env["PYTHONPATH"] = pydir + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        cmd = [sys.executable, os.path.abspath(__file__), "--warm-worker", prog, str(nt),
               str(self.a.budget_s)] + npys
        log = self.log("warm." + tag)
        rc, out = sh(cmd, log, env=env, timeout=self.a.timeout_s)
        try:
            got = json.loads(out.strip().splitlines()[-1]) if rc == 0 else None
        except (ValueError, IndexError):
            got = None
        if not isinstance(got, list) or len(got) != len(npys) - 1:
            return {"error": "warm process: " + why(log, rc)}
        return got

    def ort(self, onnx_file, npy, nt, tag, outdir):
        if not self.a.ort_dir:
            return {}
        env = dict(os.environ, ORT_THREADS=str(nt), ORT_REPEAT=str(self.a.ort_repeat))
        log = self.log(f"ort.{tag}")
        rc, out = sh(["node", os.path.join(self.a.ort_dir, "ort_bench.js"), onnx_file, outdir,
                      f"input={npy}"], log, env=env, timeout=self.a.timeout_s)
        js = [l for l in out.splitlines() if l.startswith("{")]
        if rc != 0 or not js:
            return {"error": why(log, rc)}
        r = json.loads(js[-1])
        return {"ms": r["median_us"] / 1e3, "runs": r["runs"], "runtime": r.get("runtime")}


def setup(a):
    """The zoo (make_zoo.py) and the ONNX Runtime peer."""
    zoo = os.path.join(a.out, "models")
    print(f"[open] building the models in {zoo}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(HERE, "make_zoo.py"), zoo], check=True,
                   stdout=sys.stderr)
    relax_detector(zoo)
    if a.ort_dir is None:
        peer = os.path.join(REPO, "..", "shared", "peers", "ort", "setup.sh")
        if not os.path.exists(peer):
            print(f"open_shapes_bench: ONNX Runtime peer MISSING ({peer}); the ORT columns "
                  "stay empty", file=sys.stderr)
        else:
            p = subprocess.run(["bash", peer], stdout=subprocess.PIPE, text=True, check=True)
            a.ort_dir = p.stdout.strip().splitlines()[-1]
    return zoo


def relax_detector(zoo):
    """zoo/detector_hw.onnx: the zoo's detector with its declared height and
    width made symbolic ('H', 'W'; the output's anchor count 'A'), nothing
    else changed. The zoo's model declares 320x320: ONNX Runtime refuses other
    sizes and `loom compile` refuses to fix them to another number, while
    `--input-shape input=1,3,?,?` opens them either way."""
    import onnx
    m = onnx.load(os.path.join(zoo, "detector.onnx"))
    for d, name in zip(m.graph.input[0].type.tensor_type.shape.dim[2:], ("H", "W")):
        d.ClearField("dim_value")
        d.dim_param = name
    last = m.graph.output[0].type.tensor_type.shape.dim[2]
    last.ClearField("dim_value")
    last.dim_param = "A"
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, os.path.join(zoo, "detector_hw.onnx"))


def device_line(loom):
    p = subprocess.run([loom, "devices"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    m = re.search(r"cpu-simd://0\s+cpu\s+(.*)", p.stdout)
    return m.group(1).strip() if m else "cpu-simd device not found"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "build", "open_shapes"))
    ap.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(REPO, "build", "bin", "loom")))
    ap.add_argument("--ort-dir", help="folder with ort_bench.js and node_modules (default: run the peer's setup.sh)")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--budget-s", type=float, default=3.0, help="seconds of timed runs per Loom row")
    ap.add_argument("--max-repeat", type=int, default=200)
    ap.add_argument("--first-runs", type=int, default=3, help="fresh processes per first-run figure")
    ap.add_argument("--ort-repeat", type=int, default=50)
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per command")
    ap.add_argument("--tol", type=float, default=1e-4)
    a = ap.parse_args()
    a.out = os.path.abspath(a.out)
    t_start = time.monotonic()
    zoo = setup(a)
    with open(os.path.join(zoo, "zoo.json")) as fh:
        zoo_outputs = {m["name"]: m["outputs"] for m in json.load(fh)["models"]}
    threads = [int(t) for t in a.threads.split(",") if t]
    b = Bench(a)
    cpu, _, ncpu = machine()
    dev = device_line(a.loom)
    ort_version, rows, failed = None, [], False

    for case in a.cases.split(","):
        open_shape, sizes, label = CASES[case]
        onnx_file = os.path.join(zoo, MODEL_FILE.get(case, f"{case}.onnx"))
        progs = os.path.join(a.out, "programs")
        os.makedirs(progs, exist_ok=True)
        open_prog = os.path.join(progs, f"{case}.open.loom")
        outputs = zoo_outputs[case]
        open_err = b.compile(onnx_file, open_shape, open_prog)
        case_rows = len(rows)
        warm_npy = os.path.join(a.out, "inputs", f"{case}.warmup.npy")
        os.makedirs(os.path.dirname(warm_npy), exist_ok=True)
        np.save(warm_npy, np.random.default_rng(499).standard_normal(WARMUP_SIZE[case]).astype(np.float32))
        size_npys = []
        for si, shape in enumerate(sizes):
            lab = label(shape)
            npy = os.path.join(a.out, "inputs", f"{case}.{lab}.npy")
            os.makedirs(os.path.dirname(npy), exist_ok=True)
            x = np.random.default_rng(500 + si).standard_normal(shape).astype(np.float32)
            np.save(npy, x)
            size_npys.append(npy)
            fixed_prog = os.path.join(progs, f"{case}.{lab}.loom")
            fixed_err = b.compile(onnx_file, ",".join(map(str, shape)), fixed_prog)
            for nt in threads:
                tag = f"{case}.{lab}.t{nt}"
                row = {"model": case, "size": lab, "shape": list(shape), "threads": nt,
                       "open_shape": open_shape}
                row["open"] = ({"error": "compile: " + open_err} if open_err else
                               b.loom(open_prog, npy, nt, "open." + tag,
                                      os.path.join(a.out, "loom", "open." + tag)))
                row["fixed"] = ({"error": "compile: " + fixed_err} if fixed_err else
                                b.loom(fixed_prog, npy, nt, "fixed." + tag,
                                       os.path.join(a.out, "loom", "fixed." + tag)))
                odir = os.path.join(a.out, "ort", tag)
                row["ort"] = b.ort(onnx_file, npy, nt, tag, odir)
                ort_version = row["ort"].get("runtime", ort_version)
                got = load_outputs(os.path.join(a.out, "loom", "open." + tag), outputs)
                ref = load_outputs(odir, outputs) if "ms" in row["ort"] else None
                if got is not None and ref is not None:
                    row["diff"] = rel_diff(got, ref)
                    failed |= not row["diff"] <= a.tol
                failed |= any("error" in row[k] for k in ("open", "fixed", "ort"))
                rows.append(row)
                o, f, r = row["open"], row["fixed"], row["ort"]
                print(f"[open] {tag}: open first {fmt(o.get('first_ms'), '.1f')} ms "
                      f"(specialize {fmt(o.get('specialize_ms'), '.1f')}), steady "
                      f"{fmt(o.get('ms'), '.2f')}; fixed {fmt(f.get('ms'), '.2f')}; "
                      f"ORT {fmt(r.get('ms'), '.2f')} ms", file=sys.stderr, flush=True)
        # Each size as a new binding in one warm process per thread count.
        for nt in threads:
            warm = ({"error": "compile: " + open_err} if open_err else
                    b.warm(open_prog, [warm_npy] + size_npys, nt, f"{case}.t{nt}"))
            mine = [row for row in rows[case_rows:] if row["threads"] == nt]
            for i, row in enumerate(mine):
                row["warm"] = warm if isinstance(warm, dict) else warm[i]
                failed |= "error" in row["warm"]
                w = row["warm"]
                print(f"[open] {case}.{row['size']}.t{nt}: warm process, new size first "
                      f"{fmt(w.get('first_ms'), '.2f')} ms, then {fmt(w.get('ms'), '.2f')} ms",
                      file=sys.stderr, flush=True)

    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    cmd = "/usr/bin/python3 benchmarks/models/open_shapes_bench.py " + " ".join(sys.argv[1:])
    lines = [f"`{cmd.strip()}`", "",
             f"{when}; nproc {ncpu}, {cpu}; cpu-simd://0 {dev}; "
             f"{ort_version or 'ONNX Runtime not run'}; "
             f"{a.first_runs} fresh processes per first run, timed runs fitting {a.budget_s:g} s, "
             f"ORT {a.ort_repeat} runs; whole run {time.monotonic() - t_start:.0f} s", "",
             "| model | size | threads | open: first run ms | of which specialize ms "
             "| open ms (median) | fixed ms (median) | open/fixed | open first/steady "
             "| fixed: first run ms | warm process: new size first run ms | warm: then ms (median) "
             "| warm new/steady | ORT ms (median) | open/ORT | max rel diff open vs ORT "
             "| runs open/fixed/ORT |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        o, f, r, w = row["open"], row["fixed"], row["ort"], row.get("warm", {})
        ratio = lambda x, y: x / y if x and y else None  # noqa: E731
        diff = row.get("diff")
        dtxt = "-" if diff is None else f"{diff:.1e}" + ("" if diff <= a.tol else " (over tol)")
        lines.append(
            f"| {row['model']} | {row['size']} | {row['threads']} | {ms(o.get('first_ms'))} "
            f"| {ms(o.get('specialize_ms'))} | {ms(o.get('ms'))} "
            f"| {ms(f.get('ms'))} | {fmt(ratio(o.get('ms'), f.get('ms')), '.3f')} "
            f"| {fmt(ratio(o.get('first_ms'), o.get('ms')), '.1f')} "
            f"| {ms(f.get('first_ms'))} | {ms(w.get('first_ms'))} | {ms(w.get('ms'))} "
            f"| {fmt(ratio(w.get('first_ms'), w.get('ms')), '.2f')} | {ms(r.get('ms'))} "
            f"| {fmt(ratio(o.get('ms'), r.get('ms')), '.2f')} | {dtxt} "
            f"| {o.get('runs', '-')}/{f.get('runs', '-')}/{r.get('runs', '-')} |")
    ok = [row for row in rows if row["open"].get("ms") and row["fixed"].get("ms")]
    if ok:
        within = sum(row["open"]["ms"] <= 1.05 * row["fixed"]["ms"] for row in ok)
        cheap = sum(row["open"]["first_ms"] <= 2 * row["open"]["ms"] for row in ok)
        warm_ok = [row for row in ok if row.get("warm", {}).get("ms")]
        new_cheap = sum(row["warm"]["first_ms"] <= 2 * row["warm"]["ms"] for row in warm_ok)
        lines += ["", f"open within 5% of fixed: {within} of {len(ok)} rows; "
                      f"open first run at most 2x its steady state: {cheap} of {len(ok)} rows "
                      f"(fresh processes), {new_cheap} of {len(warm_ok)} rows (a new size in a "
                      "warm process)"]
    errors = [f"- {row['model']} {row['size']} t{row['threads']} {k}: {row[k]['error']}"
              for row in rows for k in ("open", "fixed", "ort", "warm") if row.get(k, {}).get("error")]
    if errors:
        lines += ["", "Failures:"] + errors
    table = "\n".join(lines) + "\n"
    sys.stdout.write(table)
    with open(os.path.join(a.out, "open_shapes_table.md"), "w") as fh:
        fh.write(table)
    with open(os.path.join(a.out, "open_shapes_results.json"), "w") as fh:
        json.dump({"date": when, "cpu": cpu, "nproc": ncpu, "device": dev, "ort": ort_version,
                   "command": cmd, "rows": rows}, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--warm-worker":
        warm_worker(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5:])
        sys.exit(0)
    sys.exit(main())
