#!/usr/bin/env bash
# The NMS detector check (issue 26): runs make_nms_detector.py's model on
# each image with Loom (one staged program: the backbone on the device,
# NonMaxSuppression on the host, the kept boxes gathered on the device) and
# with ONNX Runtime, requires the same selected boxes (exactly) with the same
# coordinates and scores (within 1e-5, relative to values over 1: the box sizes
# come from exp and reach hundreds of pixels), then times one image with each.
# usage: run_nms_detector.sh LOOM DIR ORT_PEER_DIR [DEVICE] [REPEAT]
#   DIR: make_nms_detector.py's OUT; ORT_PEER_DIR: holds node_modules and ort_bench.js
set -eu
loom="$1" dir="$2" peer="$3" device="${4:-cpu-simd://0}" repeat="${5:-200}"
model="$dir/nms_detector.onnx" prog="$dir/nms_detector.loom"
"$loom" compile "$model" -o "$prog" --target "${device%%://*}" >/dev/null
k=0
while [ -f "$dir/image$k.npy" ]; do
  out="$dir/loom$k" ort="$dir/ort$k"
  "$loom" run "$prog" --device "$device" --input image="$dir/image$k.npy" --output-dir "$out" >/dev/null
  ORT_REPEAT=1 ORT_WARMUP=0 node "$peer/ort_bench.js" "$model" "$ort" image="$dir/image$k.npy" >/dev/null
  /usr/bin/python3 - "$out" "$ort" "image $k" <<'PY'
import sys, numpy as np
a, b, what = sys.argv[1:]
sel_a, sel_b = np.load(f"{a}/selected.npy"), np.load(f"{b}/selected.npy")
if sel_a.shape != sel_b.shape or not np.array_equal(sel_a, sel_b):
    print(f"{what}: selected boxes differ: Loom {sel_a.shape} {sel_a[:, 2].tolist()}, ONNX Runtime {sel_b.shape} {sel_b[:, 2].tolist()}")
    sys.exit(1)
def rel(n):
    x, y = np.load(f"{a}/{n}.npy"), np.load(f"{b}/{n}.npy")
    return float(np.max(np.abs(x - y) / np.maximum(np.abs(y), 1.0), initial=0))
worst = max(rel("kept_boxes"), rel("kept_scores"))
print(f"{what}: {sel_a.shape[0]} boxes kept, the same as ONNX Runtime's; largest coordinate/score difference {worst:.2e} (relative, or absolute under 1)")
sys.exit(0 if worst <= 1e-5 else 1)
PY
  k=$((k + 1))
done
echo "loom $device: $("$loom" run "$prog" --device "$device" --input image="$dir/image0.npy" --repeat "$repeat" \
  --plugin-option loom.threads=1 | grep -i latency)"
echo "onnxruntime: $(ORT_THREADS=1 ORT_REPEAT="$repeat" node "$peer/ort_bench.js" "$model" "$dir/ort_t" image="$dir/image0.npy")"
