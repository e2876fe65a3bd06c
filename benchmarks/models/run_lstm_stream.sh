#!/usr/bin/env bash
# The streaming LSTM benchmark (issue 26): for each model make_lstm_stream.py
# wrote, runs its chunks one after another on cpu-simd (the state outputs fed
# back as the next chunk's inputs) and in ONNX Runtime, checks every chunk's
# outputs agree, then times one call of each with one thread.
# usage: run_lstm_stream.sh LOOM DIR ORT_PEER_DIR [REPEAT]
#   DIR: make_lstm_stream.py's OUT; ORT_PEER_DIR: holds node_modules and ort_bench.js
set -eu
loom="$1" dir="$2" peer="$3" repeat="${4:-300}"
for model in "$dir"/lstm_stream_T*.onnx; do
  name=$(basename "$model" .onnx)
  seq=${name#lstm_stream_T}
  data="$dir/T$seq"
  prog="$dir/$name.loom"
  "$loom" compile "$model" -o "$prog" --target cpu-simd >/dev/null
  h="$data/h0.npy" c="$data/c0.npy" oh="$data/h0.npy" oc="$data/c0.npy"
  k=0
  while [ -f "$data/x$k.npy" ]; do
    out="$data/loom$k" ort="$data/ort$k"
    "$loom" run "$prog" --input x="$data/x$k.npy" h_in="$h" c_in="$c" --output-dir "$out" \
      --plugin-option loom.threads=1 >/dev/null
    ORT_REPEAT=1 ORT_WARMUP=0 node "$peer/ort_bench.js" "$model" "$ort" x="$data/x$k.npy" h_in="$oh" c_in="$oc" >/dev/null
    /usr/bin/python3 - "$out" "$ort" "$name chunk $k" <<'PY'
import sys, numpy as np
a, b, what = sys.argv[1:]
worst = max(float(np.max(np.abs(np.load(f"{a}/{n}.npy") - np.load(f"{b}/{n}.npy")))) for n in ("y", "h_out", "c_out"))
print(f"{what}: largest difference from ONNX Runtime {worst:.2e}")
sys.exit(0 if worst <= 1e-4 else 1)
PY
    h="$out/h_out.npy" c="$out/c_out.npy" oh="$ort/h_out.npy" oc="$ort/c_out.npy"
    k=$((k + 1))
  done
  echo "$name cpu-simd: $("$loom" run "$prog" --input x="$data/x0.npy" h_in="$data/h0.npy" c_in="$data/c0.npy" \
    --repeat "$repeat" --plugin-option loom.threads=1 | grep -i latency)"
  echo "$name onnxruntime: $(ORT_THREADS=1 ORT_REPEAT="$repeat" node "$peer/ort_bench.js" "$model" "$data/ort_t" \
    x="$data/x0.npy" h_in="$data/h0.npy" c_in="$data/c0.npy")"
done
