#!/usr/bin/env bash
# The load benchmark of `loom serve` (docs/serving.md): two models served on
# cpu-simd, N concurrent clients sending a fixed number of requests over gRPC
# and REST (binary tensors), with and without dynamic batching, and
# Session::run on the same program in one process as the baseline of the
# server's overhead. Every response is checked (its id, and its values
# against the client's first answer), so a lost, duplicated or crossed
# response fails the run. Prints a Markdown table (also OUT/serve_table.md).
#
# usage: benchmarks/serve/run_serve_bench.sh [--out DIR] [--clients 1,4,16]
#            [--tiny-requests N] [--cnn-requests N]
#   models: `add` (tests/serve/make_models.py: FP32 [1,4] + [1,4], the "small
#   tensors" case) and the zoo's mobilenetv3_small (benchmarks/models/make_zoo.py,
#   [1,3,224,224]); both compiled for cpu-simd with the batch dimension open.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$repo/build/serve-bench
loom=${LOOM:-$repo/build/bin/loom}
load=${SERVE_LOAD:-$repo/build/bin/serve_load}
clients=1,4,16 tiny_requests=4000 cnn_requests=300
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    --tiny-requests) tiny_requests=$2; shift 2 ;;
    --cnn-requests) cnn_requests=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "run_serve_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for tool in "$loom" "$load"; do
  [ -x "$tool" ] || { echo "run_serve_bench: $tool is not built (cmake --build build --target loom serve_load)" >&2; exit 1; }
done
mkdir -p "$out"
py=/usr/bin/python3
$py "$repo/tests/serve/make_models.py" "$out" >/dev/null
$py "$repo/benchmarks/models/make_zoo.py" "$out" --only mobilenetv3_small >/dev/null
$py - "$out" <<'PY'
import sys, numpy as np
out = sys.argv[1]
rng = np.random.default_rng(11)
np.save(f"{out}/add_x.npy", rng.standard_normal((1, 4)).astype(np.float32))
np.save(f"{out}/add_y.npy", rng.standard_normal((1, 4)).astype(np.float32))
PY
"$loom" compile "$out/add.onnx" --target cpu-simd -o "$out/add.loom" >/dev/null
"$loom" compile "$out/mobilenetv3_small.onnx" --target cpu-simd -o "$out/cnn.loom" >/dev/null
tiny_inputs=(--input "x=$out/add_x.npy" --input "y=$out/add_y.npy")
cnn_inputs=(--input "input=$out/mobilenetv3_small_input.npy")

results=$out/results.jsonl
: > "$results"
record() {  # record CONFIG LINE
  echo "$2" | $py -c 'import json,sys; d=json.loads(sys.stdin.read()); d["config"]=sys.argv[1]; print(json.dumps(d))' "$1" >> "$results"
}

# The baseline: Session::run in this process, one thread.
record "in-process" "$("$load" --model add --in-process "$out/add.loom" --device cpu-simd "${tiny_inputs[@]}" --requests "$tiny_requests")"
record "in-process" "$("$load" --model cnn --in-process "$out/cnn.loom" --device cpu-simd "${cnn_inputs[@]}" --requests "$cnn_requests")"

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap stop_server EXIT
start_server() {  # start_server EXTRA...
  "$loom" serve --host 127.0.0.1 --http-port 0 --grpc-port 0 --model "add=$out/add.loom" \
      --model "cnn=$out/cnn.loom" --device cpu-simd --instances 2 "$@" > "$out/serve.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do
    grep -q "^loom serve: ready" "$out/serve.log" && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$out/serve.log" >&2; exit 1; }
    sleep 0.1
  done
  http=$(sed -n 's|^loom serve: REST on http://\(.*\)$|\1|p' "$out/serve.log")
  grpc=$(sed -n 's|^loom serve: gRPC on \(.*\)$|\1|p' "$out/serve.log")
}

for config in "unbatched" "batched"; do
  if [ "$config" = batched ]; then
    start_server --max-batch 16 --batch-delay-us 1000
  else
    start_server
  fi
  for proto in grpc http; do
    addr=$grpc; [ "$proto" = http ] && addr=$http
    [ "$config" = unbatched ] && record "$config" "$("$load" --model add "--$proto" "$addr" "${tiny_inputs[@]}" --ping --requests "$tiny_requests")"
    for n in ${clients//,/ }; do
      record "$config" "$("$load" --model add "--$proto" "$addr" "${tiny_inputs[@]}" --clients "$n" --requests "$tiny_requests")"
      record "$config" "$("$load" --model cnn "--$proto" "$addr" "${cnn_inputs[@]}" --clients "$n" --requests "$cnn_requests")"
    done
  done
  stop_server
done

$py - "$results" "$out/serve_table.md" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base = {r["model"]: r for r in rows if r["config"] == "in-process"}
ping = {r["mode"]: r for r in rows if r["mode"].endswith("-ping")}
lines = ["| model | server | protocol | clients | requests/s | p50 µs | p99 µs | p50 over Session::run µs | of which the protocol's round trip µs | checked |",
         "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
for r in rows:
    if r["mode"].endswith("-ping"):
        lines.append(f'| (none: {"ServerLive" if r["mode"].startswith("grpc") else "GET /v2/health/live"}) | '
                     f'{r["config"]} | {r["mode"][:-5]} | 1 | {r["throughput_rps"]:.0f} | {r["p50_us"]:.0f} | '
                     f'{r["p99_us"]:.0f} | | | |')
        continue
    over = "" if r["config"] == "in-process" or r["clients"] != 1 else f'{r["p50_us"] - base[r["model"]]["p50_us"]:.0f}'
    floor = ping.get(r["mode"] + "-ping")
    floor = f'{floor["p50_us"]:.0f}' if over and floor else ""
    ok = "all" if r["errors"] == r["wrong_ids"] == r["mismatches"] == 0 and r["answered"] == r["requests"] else \
        f'{r["errors"]} errors, {r["wrong_ids"]} wrong ids, {r["mismatches"]} mismatches'
    lines.append(f'| {r["model"]} | {r["config"]} | {r["mode"]} | {r["clients"]} | {r["throughput_rps"]:.0f} | '
                 f'{r["p50_us"]:.0f} | {r["p99_us"]:.0f} | {over} | {floor} | {ok} |')
text = "\n".join(lines) + "\n"
open(sys.argv[2], "w").write(text)
print(text)
PY
