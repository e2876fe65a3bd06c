#!/usr/bin/env bash
# Loom's GPU checks, for a machine with a GPU (issue 30's "GPU goals"):
#   1. backend_ops_bench's vulkan-compute cases (GEMM 256..2048, Add, Conv,
#      depthwise Conv, one call's round trip and GEMM under each vulkan.wait
#      mode), medians of 3;
#   2. the fp32 GEMM peer: torch.matmul (cuBLAS, TF32 off) at the same sizes,
#      when python3 has torch;
#   3. the model zoo (make_zoo.py, with that machine's python3, onnx and
#      numpy) compiled for vulkan-compute,cpu-simd and for cpu-simd alone,
#      each timed with `loom run --repeat`, outputs compared.
#   4. benchmarks/models/estimate_accuracy.py when it exists (policy:fastest).
#   5. (asked for) the zoo's per-op profile on vulkan-compute.
#   6. (asked for) the int8 convolutions: make_qlinear_cnn.py's QLinearConv
#      CNN on vulkan-compute with integer dot products, with them hidden, and
#      on cpu-simd; then the quantized zoo (quantize_zoo.py; QZOO_MODELS,
#      default resnet18,mobilenetv3_small) on vulkan-compute against its f32
#      model there and against cpu-simd; latencies and outputs compared.
# Writes what it prints to OUT/checks.log and the tables to OUT/*.md.
#
# usage: benchmarks/gpu/run_checks.sh PACK OUT [STEPS]
#   PACK   what benchmarks/gpu/pack.sh made (bin/, lib/loom/plugins/, deps/)
#   OUT    results folder
#   STEPS  which steps, e.g. "1 3" (default "1 2 3 4")
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
pack=$(cd "$1" && pwd)
out=$2
steps=${3:-1 2 3 4}
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee -a "$out/checks.log") 2>&1

[ -f "$pack/deps/libdnnl.so.2" ] || xz -dk "$pack/deps/libdnnl.so.2.xz"
export LD_LIBRARY_PATH=$pack/deps${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The Vulkan driver: the loader's usual folders, else NVIDIA's under /usr/local/nvidia.
if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  icd=$(find /usr/local/nvidia /usr/share /etc -name 'nvidia_icd*.json' 2>/dev/null | head -1)
  [ -n "$icd" ] && export VK_DRIVER_FILES=$icd VK_ICD_FILENAMES=$icd
fi
echo "== $(date -u +%FT%TZ) $(uname -m) $(nproc) cores; VK_DRIVER_FILES=${VK_DRIVER_FILES:-}"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv 2>&1 | head -3
lscpu | grep -E "Model name|Flags" | sed 's/\(Flags:.\{0,0\}\).*\(avx512f\).*/\1 ... avx512f .../' | head -2
loom=$pack/bin/loom
if ! "$loom" devices 2>&1 | grep -q "device vulkan-compute://"; then
  echo "-- no vulkan-compute device; the loader says:"
  [ -n "${VK_DRIVER_FILES:-}" ] && cat "$VK_DRIVER_FILES"
  VK_LOADER_DEBUG=error,warn,driver "$loom" devices 2>&1 | grep -v "^  " | head -40
fi
"$loom" devices 2>&1 | grep -E "^plugin|device " | head -12

export LOOM_BENCH_CPU_SIMD_PLUGIN=$pack/lib/loom/plugins/libloom_cpu-simd.so
export LOOM_BENCH_VULKAN_PLUGIN=$pack/lib/loom/plugins/libloom_vulkan-compute.so

if [[ " $steps " == *" 1 "* ]]; then
  echo "== 1. backend_ops_bench (vulkan-compute)"
  timeout 240 "$pack/bin/backend_ops_bench" --benchmark_filter='Vulkan' \
    --benchmark_min_time=0.3 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_counters_tabular=true 2>&1 | grep -v "_mean\|_stddev\|_cv" | tee "$out/ops.txt"
fi

if [[ " $steps " == *" 2 "* ]]; then
  echo "== 2. cuBLAS fp32 peer (torch.matmul, TF32 off)"
  timeout 90 python3 - <<'PY' 2>&1 | tee "$out/cublas.txt"
import statistics, time
try:
    import torch
except ImportError:
    print("no torch: peer skipped"); raise SystemExit(0)
torch.backends.cuda.matmul.allow_tf32 = False
for n in (256, 512, 1024, 2048, 4096):
    a = torch.randn(n, n, device="cuda"); b = torch.randn(n, n, device="cuda")
    for _ in range(3): torch.matmul(a, b)
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        t0 = time.perf_counter(); torch.matmul(a, b); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
    t = statistics.median(ts)
    print(f"cuBLAS fp32 {n}^3: {t*1e3:.3f} ms, {2*n**3/t/1e12:.1f} TFLOP/s")
PY
fi

if [[ " $steps " == *" 3 "* ]]; then
  echo "== 3. zoo: vulkan-compute(+cpu-simd) vs cpu-simd alone"
  zoo=$out/zoo
  timeout 180 python3 "$repo/benchmarks/models/make_zoo.py" "$zoo" >/dev/null || echo "make_zoo failed"
  echo "| model | vulkan-compute (+cpu-simd) ms | cpu-simd alone ms ($(nproc) threads) | speedup | max abs diff / output range | placements |" > "$out/zoo.md"
  echo "|---|---|---|---|---|---|" >> "$out/zoo.md"
  python3 - "$zoo/zoo.json" > "$out/zoo_list.txt" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1]))["models"]:
    print(m["name"], ",".join(map(str, m["shape"])), m["npy"])
PY
  while read -r name shape npy; do
    for t in gpu cpu; do
      target=cpu-simd; [ $t = gpu ] && target=vulkan-compute,cpu-simd
      timeout 120 "$loom" compile "$zoo/$name.onnx" --input-shape "input=$shape" --target "$target" \
        -o "$out/$name.$t.loom" > "$out/$name.$t.compile.txt" 2>&1 || echo "$name: compile for $target failed: $(tail -1 "$out/$name.$t.compile.txt")"
      repeat=30; [ "$name" = vit_tiny ] || [ "$name" = detector ] && repeat=10
      timeout 150 "$loom" run "$out/$name.$t.loom" --input "input=$zoo/$npy" --repeat $repeat --json \
        --output-dir "$out/o_${t}_$name" > "$out/$name.$t.json" 2>"$out/$name.$t.err" || echo "$name: run ($t) failed: $(tail -2 "$out/$name.$t.err")"
    done
    python3 - "$out" "$name" >> "$out/zoo.md" <<'PY'
import glob, json, os, sys
import numpy as np
out, name = sys.argv[1], sys.argv[2]
def load(t):
    try:
        return json.load(open(f"{out}/{name}.{t}.json"))
    except Exception:
        return {}
g, c = load("gpu"), load("cpu")
def ms(d):
    return d.get("latency_us", {}).get("median", 0) / 1000
diff = "—"
try:
    worst = 0.0
    for f in sorted(glob.glob(f"{out}/o_cpu_{name}/*.npy")):
        a = np.load(f); b = np.load(f.replace("o_cpu_", "o_gpu_"))
        rng = float(a.max() - a.min()) or 1.0
        worst = max(worst, float(np.abs(a.astype(np.float64) - b).max()) / rng)
    diff = f"{worst:.1e}"
except Exception as e:
    diff = f"no outputs ({type(e).__name__})"
places = ", ".join(sorted({p["device"] for p in g.get("placements", [])}))
gm, cm = ms(g), ms(c)
speed = f"{cm / gm:.1f}x" if gm and cm else "—"
print(f"| {name} | {gm:.3f} | {cm:.3f} | {speed} | {diff} | {places} |")
PY
  done < "$out/zoo_list.txt"
  cat "$out/zoo.md"
fi

if [[ " $steps " == *" 4 "* ]] && [ -f "$repo/benchmarks/models/estimate_accuracy.py" ]; then
  echo "== 4. estimate accuracy (policy:fastest)"
  [ -f "$out/zoo/zoo.json" ] || timeout 180 python3 "$repo/benchmarks/models/make_zoo.py" "$out/zoo" >/dev/null
  LOOM_DEVICE_MODEL_DIR=$out/device-models LOOM="$loom" timeout 300 python3 \
    "$repo/benchmarks/models/estimate_accuracy.py" --loom "$loom" --zoo "$out/zoo" \
    --out "$out/estimates" --devices "${ESTIMATE_DEVICES:-cpu-simd,vulkan-compute}" --budget-s 2 \
    --markdown "$out/estimates.md" 2>&1 | tail -60
  cat "$out"/device-models/* 2>/dev/null | head -40
fi
if [[ " $steps " == *" 5 "* ]]; then
  echo "== 5. per-op profile of the zoo on vulkan-compute (loom run --profile)"
  [ -f "$out/zoo/zoo.json" ] || timeout 180 python3 "$repo/benchmarks/models/make_zoo.py" "$out/zoo" >/dev/null
  for name in ${PROFILE_MODELS:-resnet18 mobilenetv3_small}; do
    shape=$(python3 -c 'import json,sys; print(",".join(map(str, [m for m in json.load(open(sys.argv[1]))["models"] if m["name"] == sys.argv[2]][0]["shape"])))' "$out/zoo/zoo.json" "$name")
    [ -f "$out/$name.gpu.loom" ] || "$loom" compile "$out/zoo/$name.onnx" --input-shape "input=$shape" \
      --target vulkan-compute,cpu-simd -o "$out/$name.gpu.loom" > /dev/null
    timeout 120 "$loom" run "$out/$name.gpu.loom" --input "input=$out/zoo/${name}_input.npy" --repeat 20 \
      --profile 2>&1 | tee "$out/profile_$name.txt" | head -70
  done
fi
if [[ " $steps " == *" 6 "* ]]; then
  echo "== 6. int8 convolutions on vulkan-compute: integer dot products (qconv_dot) against plain multiply-adds (qconv) and cpu-simd"
  timeout 120 python3 "$repo/benchmarks/models/make_qlinear_cnn.py" "$out/qlinear" --size "${QLINEAR_SIZE:-112}" \
    --channels "${QLINEAR_CHANNELS:-64}" --depth 4 > /dev/null
  "$loom" compile "$out/qlinear/qlinear_cnn.onnx" --target vulkan-compute -o "$out/qlinear/vk.loom" > /dev/null
  for form in dot plain cpu; do
    case $form in
      dot) extra=() ;;
      plain) extra=(--plugin-option vulkan.hide_features=shaderIntegerDotProduct) ;;
      cpu) extra=(--device cpu-simd) ;;
    esac
    file=$out/qlinear/vk.loom
    [ "$form" = cpu ] && file=$out/qlinear/qlinear_cnn.onnx
    timeout 120 "$loom" run "$file" "${extra[@]}" --input "x=$out/qlinear/qlinear_cnn_input.npy" --repeat 20 \
      --output "y=$out/qlinear/y_$form.npy" 2>&1 | grep -E "latency|error" | sed "s/^/$form: /"
  done
  timeout 60 "$loom" run "$out/qlinear/vk.loom" --input "x=$out/qlinear/qlinear_cnn_input.npy" --repeat 5 \
    --profile 2>&1 | grep -E "QConv" | head -8
  python3 - "$out/qlinear" <<'PY'
import sys
import numpy as np
d = sys.argv[1]
ys = {f: np.load(f"{d}/y_{f}.npy") for f in ("dot", "plain", "cpu")}
print("int8 outputs differing from cpu-simd's: dot", int((ys["dot"] != ys["cpu"]).sum()),
      "plain", int((ys["plain"] != ys["cpu"]).sum()), "of", ys["cpu"].size)
PY
  # The quantized zoo (QDQ, quantize_zoo.py calibrating on cpu-simd) on
  # vulkan-compute (its Convs and Gemms fused into qconv_dot) against the
  # f32 model on vulkan-compute and the quantized one on cpu-simd.
  [ -f "$out/zoo/zoo.json" ] || timeout 180 python3 "$repo/benchmarks/models/make_zoo.py" "$out/zoo" >/dev/null
  timeout 300 python3 "$repo/benchmarks/models/quantize_zoo.py" "$out/zoo" "$out/qzoo" --loom "$loom" \
    --models "${QZOO_MODELS:-resnet18,mobilenetv3_small}" > "$out/qzoo.log" 2>&1 || tail -5 "$out/qzoo.log"
  for name in $(echo "${QZOO_MODELS:-resnet18,mobilenetv3_small}" | tr ',' ' '); do
    shape=$(python3 -c 'import json,sys; print("x".join(map(str, [m for m in json.load(open(sys.argv[1]))["models"] if m["name"] == sys.argv[2]][0]["shape"])))' "$out/zoo/zoo.json" "$name")
    for form in vk_int8 vk_f32 cpu_int8; do
      case $form in
        vk_int8) model=$out/qzoo/${name}_qdq.onnx target=vulkan-compute ;;
        vk_f32) model=$out/zoo/$name.onnx target=vulkan-compute ;;
        cpu_int8) model=$out/qzoo/${name}_qdq.onnx target=cpu-simd ;;
      esac
      "$loom" compile "$model" --target "$target" --input-shape "input=$shape" -o "$out/qzoo/$name.$form.loom" \
        > "$out/qzoo/$name.$form.compile.txt" 2>&1 || { echo "$name $form: compile failed"; continue; }
      timeout 120 "$loom" run "$out/qzoo/$name.$form.loom" --input "input=$out/zoo/${name}_input.npy" --repeat 20 \
        --output "logits=$out/qzoo/$name.$form.npy" 2>&1 | grep -E "latency|error" | sed "s/^/$name $form: /"
    done
    python3 - "$out/qzoo" "$name" <<'PY'
import sys
import numpy as np
d, name = sys.argv[1], sys.argv[2]
a, b = np.load(f"{d}/{name}.vk_int8.npy"), np.load(f"{d}/{name}.cpu_int8.npy")
print(f"{name}: vulkan-compute int8 logits differing from cpu-simd's: {int((a != b).sum())} of {a.size}")
PY
  done
fi
echo "== done $(date -u +%FT%TZ)"
