#!/usr/bin/env bash
# The streaming LSTM benchmark (issue 26): for each model make_lstm_stream.py
# wrote, runs its chunks one after another on cpu-simd (the state outputs fed
# back as the next chunk's inputs) and in ONNX Runtime, checks every chunk's
# outputs agree, then times one call of each with one thread.
# lstm_stream_T<T>: the LSTM alone (data in DIR/T<T>). lstm_if_stream_T<T>:
# the LSTM behind an If on a run-time `reset` flag (data in DIR/if_T<T>; the
# flag is true on some chunks), a staged program; it is timed with the flag
# false (the steady state of a stream) and true. Loom's --repeat runs one
# warm-up call first (where a staged program specializes its parts and
# branches) and times the calls after it. Each chunk is also checked in one
# session, three rounds (check_stream_session.py), where later runs hit the
# specialized parts.
# usage: run_lstm_stream.sh LOOM DIR ORT_PEER_DIR [REPEAT]
#   DIR: make_lstm_stream.py's OUT; ORT_PEER_DIR: holds node_modules and ort_bench.js
set -eu
loom="$1" dir="$2" peer="$3" repeat="${4:-300}"
for model in "$dir"/lstm_stream_T*.onnx "$dir"/lstm_if_stream_T*.onnx; do
  [ -f "$model" ] || continue
  name=$(basename "$model" .onnx)
  seq=${name##*_T}
  case "$name" in
    lstm_if_stream_*) data="$dir/if_T$seq" ;;
    *) data="$dir/T$seq" ;;
  esac
  prog="$dir/$name.loom"
  "$loom" compile "$model" -o "$prog" --target cpu-simd >/dev/null
  h="$data/h0.npy" c="$data/c0.npy" oh="$data/h0.npy" oc="$data/c0.npy"
  k=0
  while [ -f "$data/x$k.npy" ]; do
    out="$data/loom$k" ort="$data/ort$k"
    flag=() what="$name chunk $k"
    if [ -f "$data/reset$k.npy" ]; then
      flag=(reset="$data/reset$k.npy")
      what="$what (reset $(/usr/bin/python3 -c 'import sys, numpy; print(str(bool(numpy.load(sys.argv[1]))).lower())' "$data/reset$k.npy"))"
    fi
    "$loom" run "$prog" --input x="$data/x$k.npy" h_in="$h" c_in="$c" "${flag[@]}" --output-dir "$out" \
      --plugin-option loom.threads=1 >/dev/null
    ORT_REPEAT=1 ORT_WARMUP=0 node "$peer/ort_bench.js" "$model" "$ort" x="$data/x$k.npy" h_in="$oh" c_in="$oc" \
      "${flag[@]}" >/dev/null
    /usr/bin/python3 - "$out" "$ort" "$what" <<'PY'
import os, sys, numpy as np
a, b, what = sys.argv[1:]
names = sorted(f[:-4] for f in os.listdir(b) if f.endswith(".npy"))
if not names:
    sys.exit(f"{what}: ONNX Runtime wrote no outputs to {b}")
worst = 0.0
for n in names:
    got, want = np.load(f"{a}/{n}.npy"), np.load(f"{b}/{n}.npy")
    if got.shape != want.shape:
        sys.exit(f"{what}: output '{n}' is {got.shape} on Loom, {want.shape} in ONNX Runtime")
    worst = max(worst, float(np.max(np.abs(got - want))))
print(f"{what}: outputs {', '.join(names)}: largest difference from ONNX Runtime {worst:.2e}")
sys.exit(0 if worst <= 1e-4 else 1)
PY
    h="$out/h_out.npy" c="$out/c_out.npy" oh="$ort/h_out.npy" oc="$ort/c_out.npy"
    k=$((k + 1))
  done
  # The same chunks again, three rounds in one session (cache hits after the
  # first), through the Python package next to LOOM (build/bin/loom ->
  # build/python).
  pydir="$(dirname "$(dirname "$loom")")/python"
  if [ -f "$pydir/loom/__init__.py" ]; then
    PYTHONPATH="$pydir" /usr/bin/python3 "$(dirname "$0")/check_stream_session.py" "$prog" "$data" 3
  else
    echo "$name: no Python package at $pydir: the one-session check did not run"
  fi
  timed=("")
  [ -f "$data/keep.npy" ] && timed=(keep reset)
  for t in "${timed[@]}"; do
    flag=() label="$name"
    if [ -n "$t" ]; then flag=(reset="$data/$t.npy") label="$name ($t)"; fi
    echo "$label cpu-simd: $("$loom" run "$prog" --input x="$data/x0.npy" h_in="$data/h0.npy" c_in="$data/c0.npy" \
      "${flag[@]}" --repeat "$repeat" --plugin-option loom.threads=1 | grep -e '^latency' -e '^first run' | paste -sd ';')"
    echo "$label onnxruntime: $(ORT_THREADS=1 ORT_REPEAT="$repeat" node "$peer/ort_bench.js" "$model" "$data/ort_t" \
      x="$data/x0.npy" h_in="$data/h0.npy" c_in="$data/c0.npy" "${flag[@]}")"
  done
done
