#!/usr/bin/env bash
# One command for the whole-model benchmark: builds the model zoo, installs
# ONNX Runtime (the peer under ../shared/peers/ort, relative to the
# repository), compiles every model with `loom compile`, runs it in Loom and in
# ONNX Runtime on the same input, checks the outputs against each other and
# prints a Markdown table (also written to OUT/zoo_table.md).
#
# usage: benchmarks/models/run_zoo.sh [--target T]... [--threads 1,2] [--out DIR]
#            [--loom PATH] [--models a,b] [--budget-s S] [--ort-repeat N] [--tol X]
#            [--plugin-option KEY=VALUE]... (handed to loom run, e.g. cpu.isa=avx2)
#   --target   what `loom compile --target` takes (cpu-simd, vulkan-compute,
#              vulkan-compute,cpu-simd) or `reference`; repeat for several (default cpu-simd)
#   --threads  comma-separated thread counts, for Loom (--threads) and ORT (intra-op)
#   --out      results folder (default build/zoo)
#   --loom     the loom CLI (default: $LOOM, else build/bin/loom)
# Needs python3 with onnx and numpy (Debian: python3-onnx python3-numpy) and,
# for the ONNX Runtime columns, node and npm (Debian: nodejs npm).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$repo/build/zoo
loom=${LOOM:-$repo/build/bin/loom}
targets=() threads=1 extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --target) targets+=(--target "$2"); shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --loom) loom=$2; shift 2 ;;
    --models|--budget-s|--ort-repeat|--tol|--max-repeat|--timeout-s|--plugin-option) extra+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "run_zoo: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=(--target cpu-simd)
[ -x "$loom" ] || { echo "run_zoo: no loom CLI at $loom (build it, or pass --loom PATH / set LOOM)" >&2; exit 1; }
mkdir -p "$out"
out=$(cd "$out" && pwd)

# A python3 that has onnx and numpy: the one on PATH, else Debian's.
py=
for c in python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null && "$c" -c 'import onnx, numpy' 2>/dev/null; then py=$c; break; fi
done
[ -n "$py" ] || { echo "run_zoo: needs python3 with onnx and numpy (apt-get install python3-onnx python3-numpy)" >&2; exit 1; }

# GNU time measures each process's peak resident memory.
if [ ! -x /usr/bin/time ]; then
  echo "[zoo] installing Debian package 'time' (for /usr/bin/time -v)" >&2
  sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get install -y --no-install-recommends time >&2
fi

echo "[zoo] building the models in $out/models" >&2
"$py" "$here/make_zoo.py" "$out/models" >&2

ort_args=()
peer=$repo/../shared/peers/ort
if [ ! -f "$peer/setup.sh" ]; then
  echo "run_zoo: ONNX Runtime peer MISSING: no $peer/setup.sh (expected at ../shared/peers/ort beside the repository); the ORT columns stay empty" >&2
elif ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "run_zoo: node and npm are needed for ONNX Runtime (apt-get install nodejs npm); the ORT columns stay empty" >&2
else
  echo "[zoo] installing ONNX Runtime with $(cd "$peer" && pwd)/setup.sh" >&2
  ort_dir=$(bash "$peer/setup.sh" | tail -n 1)
  ort_args=(--ort-dir "$ort_dir")
fi

cmd="benchmarks/models/run_zoo.sh ${targets[*]} --threads $threads${extra[*]:+ ${extra[*]}}"
exec "$py" "$here/zoo_bench.py" --zoo "$out/models" --out "$out" --loom "$loom" \
  "${targets[@]}" --threads "$threads" "${ort_args[@]}" "${extra[@]}" --command "$cmd"
