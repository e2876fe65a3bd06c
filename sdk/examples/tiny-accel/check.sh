#!/usr/bin/env bash
# End-to-end check of the tiny-accel example against an installed Loom:
# compiles a small ONNX model for tiny-accel with `loom compile`, runs it on
# tiny-accel://0 with `loom run`, compares the result with the same model
# compiled for Loom's reference kernels, and runs `loom conformance` on the
# plugin (JSON, JUnit and Markdown reports in <build-dir>/check), and
# records the run and replays it as an upgrade gate. Prints "PASS" and exits 0, or says
# what failed and exits 1.
#
# Usage: check.sh <prefix> <build-dir>
#   <prefix>     where Loom is installed (<prefix>/bin/loom); $LOOM, when set,
#                is the loom program to use instead
#   <build-dir>  the example's build folder (the plugin is in <build-dir>/plugins);
#                scratch files go to <build-dir>/check
# Needs /usr/bin/python3 with numpy and onnx (Debian: python3-numpy,
# python3-onnx) to write the model and compare the results.
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 <prefix> <build-dir>" >&2
  exit 2
fi
prefix="$1" build="$2"
loom="${LOOM:-$prefix/bin/loom}"
here=$(cd "$(dirname "$0")" && pwd)
dir="$build/check"
rm -rf "$dir" && mkdir -p "$dir"
export LOOM_PLUGIN_PATH="$build/plugins${LOOM_PLUGIN_PATH:+:$LOOM_PLUGIN_PATH}"

fail() { echo "FAIL: $*" >&2; exit 1; }
# step <name> <regex> <command...>: runs the command, which must succeed and
# print a line matching <regex>.
step() {
  local name="$1" want="$2"
  shift 2
  if ! "$@" >"$dir/out" 2>"$dir/err"; then
    fail "$name: exit $? ($*): $(cat "$dir/err")"
  fi
  grep -q -- "$want" "$dir/out" || fail "$name: no line matching '$want' in: $(cat "$dir/out")"
  echo "ok: $name"
}

[ -x "$(command -v "$loom")" ] || fail "no loom program at $loom"
[ -f "$build/plugins/tiny-accel.loom-plugin.json" ] || fail "no tiny-accel manifest in $build/plugins (build the example first)"
/usr/bin/python3 "$here/make_model.py" "$dir" 2>"$dir/err" ||
  fail "make_model.py: $(cat "$dir/err") (Debian: python3-onnx, python3-numpy)"

step "loom devices lists tiny-accel://0" "tiny-accel://0" "$loom" devices
# tiny-accel takes the five nodes it supports; Softmax stays on the reference kernels.
step "compile for tiny-accel" "^tiny-accel  *1  *5 " \
  "$loom" compile "$dir/mlp.onnx" -o "$dir/accel.loom" --target tiny-accel
step "compile for the reference kernels" "^reference " \
  "$loom" compile "$dir/mlp.onnx" -o "$dir/ref.loom" --target none
step "run on tiny-accel://0" "delegate tiny-accel_0 -> tiny-accel://0" \
  "$loom" run "$dir/accel.loom" --device tiny-accel://0 --explain \
  --input "x=$dir/x.npy" --output "y=$dir/accel.npy"
step "run on the reference kernels" "^y: f32\[2, 4\]" \
  "$loom" run "$dir/ref.loom" --input "x=$dir/x.npy" --output "y=$dir/ref.npy"
/usr/bin/python3 - "$dir/accel.npy" "$dir/ref.npy" >"$dir/out" 2>&1 <<'PY' || fail "tiny-accel differs from the reference: $(cat "$dir/out")"
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
diff = float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
print(f"shapes {a.shape} and {b.shape}, max |tiny-accel - reference| = {diff}")
sys.exit(0 if diff <= 1e-5 else 1)
PY
echo "ok: results match the reference ($(cat "$dir/out"))"
# The upgrade gate (docs/plugin-guide.md, "Recording and replaying"): a
# capture of the run, in a folder with an expectations file for this plugin,
# replayed against the plugin's build by one command. A vendor records the
# captures once with the build it trusts and commits them with the
# expectations; here the capture is made in the same run, so the gate shows
# the mechanics (and that replay reproduces the run bit for bit).
mkdir -p "$dir/captures"
step "record the run" "delegate tiny-accel_0 -> tiny-accel://0" \
  "$loom" run "$dir/accel.loom" --device tiny-accel://0 --input "x=$dir/x.npy" \
  --record "$dir/captures/mlp.loomcap"
printf '{"tiny-accel://0": {"mlp.loomcap": "exact"}}\n' >"$dir/captures/tiny-accel.expectations.json"
step "replay gate" "0 failed, 0 skipped" \
  "$loom" replay "$dir/captures" --plugin "$build/plugins/tiny-accel.loom-plugin.json" \
  --junit "$dir/replay.xml"
# The conformance suite, with its three reports: every check must pass.
step "loom conformance" " 0 failed" \
  "$loom" conformance "$build/plugins/tiny-accel.loom-plugin.json" \
  --report "$dir/conformance.json" --junit "$dir/conformance.xml" --markdown "$dir/conformance.md"
for r in conformance.json conformance.xml conformance.md; do
  [ -s "$dir/$r" ] || fail "loom conformance wrote no $r"
done
echo PASS
