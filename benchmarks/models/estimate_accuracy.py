#!/usr/bin/python3
"""How well the plugins' estimates (ABI 1.1 executable_estimate, what
policy:fastest ranks devices by) predict measured run times.

For each model of the zoo (make_zoo.py) and each device on this machine, the
model is compiled for that device alone (`loom compile --target PLUGIN`), its
estimate read with `loom estimate --json` (the device's sum over the
program's delegates) and its run time measured with `loom run --repeat N`
(median). Prints the estimate/measured ratio per case and its distribution,
and, for every model and pair of devices whose measured times differ by more
than --min-gap (default 20%), whether the estimates order the two the same
way: the share of those pairs ordered right is how often policy:fastest
picks the faster device.

Drives only the `loom` CLI (and make_zoo.py, which needs onnx and numpy, when
--zoo holds no zoo.json yet), so it runs with any python3 >= 3.8.

usage: /usr/bin/python3 benchmarks/models/estimate_accuracy.py [--loom build/bin/loom]
           [--zoo DIR] [--out DIR] [--models a,b] [--devices cpu-simd,vulkan-compute]
           [--threads N] [--budget-s S] [--min-gap 0.2] [--markdown FILE]
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

UNITS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def sh(cmd, timeout=900):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


def median_ms(text):
    m = re.search(r"latency over (\d+) runs.*?median ([0-9.]+) (ns|us|ms|s)\b", text)
    return float(m.group(2)) * UNITS[m.group(3)] if m else None


def first_json(text):
    start = text.find("{")
    return json.loads(text[start:]) if start >= 0 else None


def isa_line(loom):
    flags, model = set(), platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key.strip() == "flags" and not flags:
                    flags = set(val.split())
                elif key.strip() == "model name" and model == platform.machine():
                    model = val.strip()
    except OSError:
        pass
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else platform.machine()
    return f"{model}, {isa}, {os.cpu_count()} cores"


def devices(loom):
    rc, out = sh([loom, "devices", "--json"])
    doc = first_json(out) if rc == 0 else None
    found = []
    for p in (doc or {}).get("plugins", []):
        for d in p.get("devices", []):
            found.append((p.get("name") or d.get("plugin"), d["uri"], d.get("name", "")))
    return found


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loom", default=os.environ.get("LOOM", os.path.join(repo, "build/bin/loom")))
    ap.add_argument("--zoo", default=os.path.join(repo, "build/zoo/models"))
    ap.add_argument("--out", default=os.path.join(repo, "build/estimate_accuracy"))
    ap.add_argument("--models", help="comma-separated model names (default: all)")
    ap.add_argument("--devices", help="comma-separated plugin names (default: every device)")
    ap.add_argument("--threads", type=int, default=0, help="loom --threads (0: all cores)")
    ap.add_argument("--budget-s", type=float, default=3.0, help="measuring time per case")
    ap.add_argument("--min-gap", type=float, default=0.2,
                    help="pairs whose measured times differ by more than this are scored")
    ap.add_argument("--markdown", help="also write the tables to this file")
    a = ap.parse_args()

    if not os.path.exists(os.path.join(a.zoo, "zoo.json")):
        print(f"[estimate] building the zoo in {a.zoo}", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(here, "make_zoo.py"), a.zoo], check=True)
    with open(os.path.join(a.zoo, "zoo.json")) as f:
        zoo = json.load(f)["models"]
    if a.models:
        keep = set(a.models.split(","))
        zoo = [m for m in zoo if m["name"] in keep]
    devs = devices(a.loom)
    if a.devices:
        keep = set(a.devices.split(","))
        devs = [d for d in devs if d[0] in keep]
    if not devs:
        sys.exit("estimate_accuracy: `loom devices --json` lists no device")
    os.makedirs(a.out, exist_ok=True)
    threads = ["--threads", str(a.threads)] if a.threads else []

    rows = []
    for m in zoo:
        shape = ",".join(str(d) for d in m["shape"])
        onnx = os.path.join(a.zoo, m["file"])
        npy = os.path.join(a.zoo, m["npy"])
        for plugin, uri, _ in devs:
            row = {"model": m["name"], "device": uri, "plugin": plugin}
            rows.append(row)
            prog = os.path.join(a.out, f"{m['name']}.{plugin}.loom")
            rc, out = sh([a.loom, "compile", onnx, "-o", prog, "--target", plugin,
                          "--input-shape", f"{m['input']}={shape}", "--json"])
            report = first_json(out) if rc == 0 else None
            if report is None:
                row["error"] = "compile failed"
                print(f"[estimate] {m['name']} {plugin}: compile failed", file=sys.stderr)
                continue
            on_device = sum(t["nodes"] for t in report["targets"] if t["plugin"] == plugin)
            row["coverage"] = f"{on_device}/{on_device + report['reference']['nodes']}"
            rc, out = sh([a.loom, "estimate", prog, "--json"] + threads)
            doc = first_json(out)
            est = None
            for d in (doc or {}).get("devices", []):
                if d["device"] == uri and d["delegates_estimated"] == d["delegates"] and d["delegates"]:
                    est = d["estimate_ns"] / 1e6
            row["estimate_ms"] = est
            base = [a.loom, "run", prog, "--device", uri, "--input", f"{m['input']}={npy}"] + threads
            rc, out = sh(base + ["--repeat", "3"])
            ms = median_ms(out) if rc == 0 else None
            if ms is not None and ms > 0:
                n = int(max(3, min(100, a.budget_s * 1e3 / ms)))
                if n > 3:
                    rc, out = sh(base + ["--repeat", str(n)])
                    ms = median_ms(out) if rc == 0 else ms
            row["measured_ms"] = ms
            if ms is None:
                row["error"] = "run failed"
            ratio = est / ms if est and ms else None
            row["ratio"] = ratio
            print(f"[estimate] {m['name']:18s} {uri:20s} estimate {est if est else float('nan'):10.3f} ms"
                  f"  measured {ms if ms else float('nan'):10.3f} ms  ratio "
                  f"{ratio if ratio else float('nan'):.2f}", file=sys.stderr, flush=True)

    lines = []
    lines.append(f"`{' '.join(['estimate_accuracy.py'] + sys.argv[1:])}` on {isa_line(a.loom)}, "
                 f"{time.strftime('%Y-%m-%d', time.gmtime())}; devices: "
                 + ", ".join(f"{u} ({n})" for _, u, n in devs))
    lines.append("")
    lines.append("| model | device | nodes on it | estimate ms | measured ms | estimate/measured |")
    lines.append("|---|---|---|---|---|---|")
    for r in rows:
        f = lambda v, s: "-" if v is None else format(v, s)
        lines.append(f"| {r['model']} | {r['device']} | {r.get('coverage', '-')} | "
                     f"{f(r.get('estimate_ms'), '.3f')} | {f(r.get('measured_ms'), '.3f')} | "
                     f"{f(r.get('ratio'), '.2f')} |")
    ratios = sorted(r["ratio"] for r in rows if r.get("ratio"))
    if ratios:
        q = lambda p: ratios[min(len(ratios) - 1, int(p * (len(ratios) - 1) + 0.5))]
        gmean = statistics.geometric_mean(ratios)
        within2 = sum(1 for x in ratios if 0.5 <= x <= 2) / len(ratios)
        lines.append("")
        lines.append(f"estimate/measured over {len(ratios)} cases: min {ratios[0]:.2f}, p25 {q(0.25):.2f}, "
                     f"median {q(0.5):.2f}, p75 {q(0.75):.2f}, max {ratios[-1]:.2f}, geometric mean "
                     f"{gmean:.2f}; within 2x: {100 * within2:.0f}%")

    lines.append("")
    lines.append(f"| model | faster (measured) | slower | measured ratio | estimates agree |")
    lines.append("|---|---|---|---|---|")
    scored = right = 0
    per_pair = {}  # (plugin, plugin) -> [scored, right]
    by_model = {}
    for r in rows:
        if r.get("estimate_ms") and r.get("measured_ms"):
            by_model.setdefault(r["model"], []).append(r)
    for model, rs in by_model.items():
        for i in range(len(rs)):
            for j in range(i + 1, len(rs)):
                x, y = sorted((rs[i], rs[j]), key=lambda r: r["measured_ms"])
                gap = y["measured_ms"] / x["measured_ms"]
                if gap <= 1 + a.min_gap:
                    continue
                ok = x["estimate_ms"] < y["estimate_ms"]
                scored += 1
                right += ok
                pair = per_pair.setdefault(tuple(sorted((x["plugin"], y["plugin"]))), [0, 0])
                pair[0] += 1
                pair[1] += ok
                lines.append(f"| {model} | {x['device']} | {y['device']} | {gap:.2f} | "
                             f"{'yes' if ok else 'NO'} |")
    lines.append("")
    if scored:
        lines.append(f"pairs whose measured times differ by more than {100 * a.min_gap:.0f}%: {scored}; "
                     f"ordered right by the estimates: {right} ({100 * right / scored:.0f}%)")
        for (p, q), (n, ok) in sorted(per_pair.items()):
            lines.append(f"- {p} vs {q}: {ok} of {n} ({100 * ok / n:.0f}%)")
    else:
        lines.append("no pair of devices differs enough to score")
    text = "\n".join(lines)
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
