#!/usr/bin/env bash
# `loom compare` (CTest loom_compare_cli) on a MobileNetV3-style
# squeeze-excite block (make_se_block.py) against the test-only
# cpu-simd-broken plugin, wrong only for HardSigmoid with alpha != 0.2: the
# good cpu-simd agrees with the reference kernels; the broken one diverges,
# first at the fused delegate, with --split-delegates at node se_gate;
# --bisect writes a one-node model that differs from the reference on the
# broken device and not on the good one; the same block compiled to a .loom
# program is compared as compiled (its delegate call against its
# loom.reference variant; node by node with --split-delegates; --bisect cuts
# the delegate call out as a program), --json reports both forms; bad input,
# and a program lacking what a mode needs, is a one-line error.
# Usage: compare_cli_test.sh <loom> <scratch dir>
# Needs LOOM_PLUGIN_PATH to hold build/tests/broken-plugins.
set -u
loom="$1" dir="$2"
rm -rf "$dir" && mkdir -p "$dir"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cli_checks.sh"

if ! /usr/bin/python3 "$here/make_se_block.py" "$dir" >"$dir/gen.log" 2>&1; then
  echo "FAIL: make_se_block.py: $(cat "$dir/gen.log") (scripts/setup.sh installs python3-onnx)"
  exit 1
fi
model="$dir/se_block.onnx"
x="x=$dir/x.npy"
good=cpu-simd://0 broken=cpu-simd-broken://0
"$loom" devices | grep -q "device $broken" ||
  { echo "FAIL: no $broken (LOOM_PLUGIN_PATH=${LOOM_PLUGIN_PATH:-}: build/tests/broken-plugins?)"; exit 1; }

# --- the good plugin agrees, at the one fused delegate and node by node
expect_ok "cpu-simd agrees with the reference kernels" "^all 1 values of 1 steps are within the tolerance" \
  "$loom" compare "$model" --device $good --input "$x"
expect_ok "and node by node" "^all 10 values of 10 steps are within the tolerance" \
  "$loom" compare "$model" --device $good --input "$x" --split-delegates

# --- the broken plugin: caught at the delegate, named with --split-delegates
expect_error "cpu-simd-broken diverges at its delegate" \
  "diverges from the reference kernels first at delegate cpu-simd-broken_0 (10 nodes: .*--split-delegates compares each node" \
  "$loom" compare "$model" --device $broken --input "$x"
expect_error "--split-delegates names the HardSigmoid node" \
  "first at node 'se_gate' (HardSigmoid): output 'gate' element .* (8 of 8 elements differ), while its inputs are within" \
  "$loom" compare "$model" --device $broken --input "$x" --split-delegates
"$loom" compare "$model" --device $broken --input "$x" --split-delegates >"$dir/split.txt" 2>/dev/null
grep -q "^  ex: max |diff| .*, within$" "$dir/split.txt" || fail "split: the node before se_gate is not within: $(cat "$dir/split.txt")"
grep -q "^  gate: max |diff| 0.0625, OUTSIDE" "$dir/split.txt" || fail "split: gate is not reported 0.0625 off: $(cat "$dir/split.txt")"
grep -q "^  scaled: .*OUTSIDE.*(its inputs already were)$" "$dir/split.txt" ||
  fail "split: the node after se_gate is not marked as following it: $(cat "$dir/split.txt")"
expect_error "a second device as the reference" "on $broken diverges from the $good first at node 'se_gate'" \
  "$loom" compare "$model" --device $broken --reference $good --input "$x" --split-delegates
expect_ok "the default alpha is right on the broken plugin too (tolerance wide enough for the gate's error)" \
  "^all 1 values of 1 steps are within the tolerance" \
  "$loom" compare "$model" --device $broken --input "$x" --atol 0.2

# --- --bisect: a one-node model that reproduces it
bis="$dir/bisect"
expect_error "--bisect still reports the divergence" "first at delegate cpu-simd-broken_0" \
  "$loom" compare "$model" --device $broken --input "$x" --bisect "$bis"
"$loom" compare "$model" --device $broken --input "$x" --bisect "$bis" >"$dir/bisect.txt" 2>/dev/null
grep -q "^bisect: with every node compiled on its own, the first to diverge is node 'se_gate' (HardSigmoid)$" "$dir/bisect.txt" ||
  fail "bisect did not narrow the delegate: $(cat "$dir/bisect.txt")"
grep -q "^bisect: wrote $bis/model.onnx (1 node, node 'se_gate' (HardSigmoid))" "$dir/bisect.txt" ||
  fail "bisect did not write a one-node model: $(cat "$dir/bisect.txt")"
grep -q "^reproduce: loom run $bis/model.onnx --device $broken --input ex=$bis/ex.npy$" "$dir/bisect.txt" ||
  fail "bisect printed no reproduce line: $(cat "$dir/bisect.txt")"
for f in model.onnx ex.npy expected_gate.npy; do [ -f "$bis/$f" ] || fail "bisect did not write $f"; done
expect_ok "the reproducer runs on the broken device" "^gate: f32\[1, 8, 1, 1\]" \
  "$loom" run "$bis/model.onnx" --device $broken --input "ex=$bis/ex.npy" --output-dir "$dir/run_broken"
expect_ok "and on the good one" "^gate: f32\[1, 8, 1, 1\]" \
  "$loom" run "$bis/model.onnx" --device $good --input "ex=$bis/ex.npy" --output-dir "$dir/run_good"
diffs=$(/usr/bin/python3 -c "
import sys, numpy as np
e = np.load(sys.argv[1])
print(' '.join('%.6f' % np.abs(np.load(p) - e).max() for p in sys.argv[2:]))" \
  "$bis/expected_gate.npy" "$dir/run_broken/gate.npy" "$dir/run_good/gate.npy")
read -r broken_diff good_diff <<<"$diffs"
awk -v d="$broken_diff" 'BEGIN { exit !(d > 0.05) }' || fail "the reproducer on $broken is within the reference ($diffs)"
awk -v d="$good_diff" 'BEGIN { exit !(d < 0.0001) }' || fail "the reproducer on $good differs from the reference ($diffs)"
expect_error "compare on the reproducer: broken" "first at node 'se_gate' (HardSigmoid)" \
  "$loom" compare "$bis/model.onnx" --device $broken --input "ex=$bis/ex.npy"
expect_ok "compare on the reproducer: good" "^all 1 values of 1 steps are within the tolerance" \
  "$loom" compare "$bis/model.onnx" --device $good --input "ex=$bis/ex.npy"
expect_ok "--bisect with nothing diverging writes nothing" "^bisect: nothing diverges, nothing written" \
  "$loom" compare "$model" --device $good --input "$x" --bisect "$dir/bisect_none"
[ -e "$dir/bisect_none" ] && fail "--bisect wrote $dir/bisect_none with nothing diverging"

# --- a compiled program (.loom): its own delegate blobs, instruction by instruction
prog="$dir/se_block.loom"
"$loom" compile "$model" -o "$prog" --target cpu-simd-broken,cpu-simd --variants all >"$dir/compile.txt" 2>&1 ||
  fail "compiling $prog: $(cat "$dir/compile.txt")"
expect_ok "the program on cpu-simd agrees (its cpu-simd variant)" "^all 1 values of 1 steps are within the tolerance" \
  "$loom" compare "$prog" --device $good --input "$x"
"$loom" compare "$prog" --device $good --input "$x" >"$dir/prog_good.txt" 2>&1
grep -q "^step 0: delegate cpu-simd-broken_0 (10 nodes: c1 (Conv), .*) (instruction 0) on $good$" "$dir/prog_good.txt" ||
  fail "program on $good: step 0 is not the delegate call on $good: $(cat "$dir/prog_good.txt")"
expect_ok "and node by node, rebuilt from its reference variant" "^all 10 values of 10 steps are within the tolerance" \
  "$loom" compare "$prog" --device $good --input "$x" --split-delegates
expect_error "the program on cpu-simd-broken diverges at its delegate call" \
  "se_block.loom on $broken diverges from the reference kernels first at delegate cpu-simd-broken_0 (10 nodes: .*--split-delegates compares each node" \
  "$loom" compare "$prog" --device $broken --input "$x"
"$loom" compare "$prog" --device $broken --input "$x" >"$dir/prog_broken.txt" 2>/dev/null
grep -q "^  y: max |diff| .*, OUTSIDE" "$dir/prog_broken.txt" || fail "program on $broken: y is not outside: $(cat "$dir/prog_broken.txt")"
expect_error "--split-delegates names the HardSigmoid node of the program" \
  "se_block.loom on $broken diverges from the reference kernels first at node 'gate' (HardSigmoid): output 'gate' .*, while its inputs are within" \
  "$loom" compare "$prog" --device $broken --input "$x" --split-delegates
"$loom" compare "$prog" --device $broken --input "$x" --split-delegates >"$dir/prog_split.txt" 2>/dev/null
grep -q "^  ex: max |diff| .*, within$" "$dir/prog_split.txt" || fail "program split: ex is not within: $(cat "$dir/prog_split.txt")"
grep -q "^  gate: max |diff| 0.0625, OUTSIDE" "$dir/prog_split.txt" || fail "program split: gate is not 0.0625 off: $(cat "$dir/prog_split.txt")"
expect_error "the program against a second device" "on $broken diverges from the $good first at delegate cpu-simd-broken_0" \
  "$loom" compare "$prog" --device $broken --reference $good --input "$x"
# --json: the same comparison, machine-readable
"$loom" compare "$prog" --device $broken --input "$x" --json >"$dir/prog.json" 2>/dev/null; rc=$?
[ $rc -eq 1 ] || fail "--json on a divergence exits $rc, not 1"
/usr/bin/python3 - "$dir/prog.json" <<'PY' || fail "--json report: $(head -c 600 "$dir/prog.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "program" and d["first_divergent"] == 0, d
s = d["steps"][0]
assert s["instruction"] == 0 and s["delegate"] == "cpu-simd-broken_0" and not s["within"], s
assert [n["op_type"] for n in s["nodes"]].count("HardSigmoid") == 2, s["nodes"]
assert s["outputs"][0]["value"] == "y" and s["outputs"][0]["max_abs_diff"] > 0.01, s["outputs"]
PY
"$loom" compare "$model" --device $good --input "$x" --split-delegates --json >"$dir/onnx.json" 2>"$dir/stderr" ||
  fail "--json on the ONNX model: $(cat "$dir/stderr")"
/usr/bin/python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d['kind'] == 'onnx' and d['first_divergent'] == -1 and len(d['steps']) == 10, d
assert all(s['within'] and 'instruction' not in s for s in d['steps'])" "$dir/onnx.json" ||
  fail "--json on the ONNX model: $(head -c 600 "$dir/onnx.json")"
# --bisect: the divergent delegate call as a program of its own
pbis="$dir/prog_bisect"
"$loom" compare "$prog" --device $broken --input "$x" --bisect "$pbis" >"$dir/prog_bisect.txt" 2>/dev/null
grep -q "^bisect: with every node compiled on its own, the first to diverge is node 'gate' (HardSigmoid); a program is cut at its instructions" "$dir/prog_bisect.txt" ||
  fail "program bisect did not look inside the delegate: $(cat "$dir/prog_bisect.txt")"
grep -q "^reproduce: loom run $pbis/model.loom --device $broken --input x=$pbis/x.npy$" "$dir/prog_bisect.txt" ||
  fail "program bisect printed no reproduce line: $(cat "$dir/prog_bisect.txt")"
expect_ok "the program's reproducer runs on the broken device" "^y: f32\[1, 8, 8, 8\]" \
  "$loom" run "$pbis/model.loom" --device $broken --input "x=$pbis/x.npy" --output-dir "$dir/prun_broken"
diff_broken=$(/usr/bin/python3 -c "
import sys, numpy as np
print('%.6f' % np.abs(np.load(sys.argv[1]) - np.load(sys.argv[2])).max())" "$pbis/expected_y.npy" "$dir/prun_broken/y.npy")
awk -v d="$diff_broken" 'BEGIN { exit !(d > 0.01) }' || fail "the program's reproducer on $broken matches the reference ($diff_broken)"
# what a program lacks is one line naming it
first="$dir/se_first.loom"
"$loom" compile "$model" -o "$first" --target cpu-simd-broken --variants first >"$dir/compile.txt" 2>&1 ||
  fail "compiling $first: $(cat "$dir/compile.txt")"
expect_error "a program without reference variants" \
  "se_first.loom: delegate 'cpu-simd-broken_0' has no reference variant (loom.reference) to compare it with: compile the program with --variants all" \
  "$loom" compare "$first" --device $broken --input "$x"
expect_error "--split-delegates on it" \
  "--split-delegates: delegate 'cpu-simd-broken_0' of .*se_first.loom carries no graph of its nodes (no loom.reference variant): compile the program with --variants all" \
  "$loom" compare "$first" --device $broken --input "$x" --split-delegates
expect_error "--bisect of a --split-delegates comparison of a program" \
  "--bisect: step 6 (node 'gate' (HardSigmoid)) is a node of the program's rebuilt graph, not an instruction" \
  "$loom" compare "$prog" --device $broken --input "$x" --split-delegates --bisect "$dir/prog_bisect_split"
# an open-shape program: its graph artifact bound to x's shape, as a run does
# (the graph keeps the model's node names)
open="$dir/se_open.loom"
"$loom" compile "$model" -o "$open" --target cpu-simd-broken --input-shape "x=1,3,?,?" >"$dir/compile.txt" 2>&1 ||
  fail "compiling $open: $(cat "$dir/compile.txt")"
expect_error "an open-shape program on the broken device" \
  "se_open.loom on $broken diverges from the reference kernels first at delegate cpu-simd-broken_0 (10 nodes: conv1 (Conv), " \
  "$loom" compare "$open" --device $broken --input "$x"
expect_error "and node by node" "se_open.loom on $broken diverges from the reference kernels first at node 'se_gate' (HardSigmoid)" \
  "$loom" compare "$open" --device $broken --input "$x" --split-delegates
expect_ok "an open-shape program on cpu-simd" "^all 1 values of 1 steps are within the tolerance" \
  "$loom" compare "$open" --device $good --input "$x"
expect_error "--bisect of an open-shape program" "--bisect: .*se_open.loom has open shapes: it is compiled per binding" \
  "$loom" compare "$open" --device $broken --input "$x" --bisect "$dir/open_bisect"
expect_error "an input of the wrong shape for the open-shape program" "input 'x' dimension 1 is fixed at 3 by the program, got 8" \
  "$loom" compare "$open" --device $good --input "x=$dir/x_wrong_shape.npy"
expect_error "an input the open-shape program lacks" "the program has no input 'y'" \
  "$loom" compare "$open" --device $good --input "y=$dir/x.npy"
head -c 3000 "$prog" >"$dir/truncated.loom"
expect_error "a truncated program" "truncated.loom: " "$loom" compare "$dir/truncated.loom" --device $good --input "$x"
expect_error "the program on an unknown device" "no device 'cpu-simd://7'; did you mean 'cpu-simd://0'?" \
  "$loom" compare "$prog" --device cpu-simd://7 --input "$x"
expect_error "an input the program lacks" "has no input 'y'" "$loom" compare "$prog" --device $good --input "y=$dir/x.npy"
expect_error "an input of the wrong shape for the program" "input 'x'" \
  "$loom" compare "$prog" --device $good --input "x=$dir/x_wrong_shape.npy"
expect_error "--json with --bisect" "--json and --bisect do not go together" \
  "$loom" compare "$prog" --device $broken --input "$x" --json --bisect "$dir/nope"

# --- bad input: one line each
expect_error "unknown device" "no device 'cpu-simd://7'; did you mean 'cpu-simd://0'?" \
  "$loom" compare "$model" --device cpu-simd://7 --input "$x"
expect_error "unknown reference device" "--reference: no device 'nope-device'" \
  "$loom" compare "$model" --device $good --reference nope-device --input "$x"
expect_error "an input the model lacks" "a shape is given for input 'y', which the model does not have" \
  "$loom" compare "$model" --device $good --input "y=$dir/x.npy"
expect_error "an input of the wrong shape" "input 'x', \[1, 8, 1, 1\], differs in dimension 1" \
  "$loom" compare "$model" --device $good --input "x=$dir/x_wrong_shape.npy"
expect_error "an input given twice" "--input x is given twice" \
  "$loom" compare "$model" --device $good --input "$x" --input "$x"
expect_error "a missing input" "--input is required" "$loom" compare "$model" --device $good
expect_error "random inputs" "needs input files" "$loom" compare "$model" --device $good --input x=random
expect_error "an input that is a device" "/dev/zero is a character device" \
  "$loom" compare "$model" --device $good --input x=/dev/zero
expect_error "bad --rtol text" "--rtol 'abc' is not a number >= 0" \
  "$loom" compare "$model" --device $good --input "$x" --rtol abc
expect_error "negative --atol" "--atol '-1' is not a number >= 0" \
  "$loom" compare "$model" --device $good --input "$x" --atol=-1
expect_error "a missing model" "missing.onnx: cannot open" \
  "$loom" compare "$dir/missing.onnx" --device $good --input "$x"
expect_error "a missing .loom program" "missing.loom: no such file" \
  "$loom" compare "$dir/missing.loom" --device $good --input "$x"
expect_error "a model nothing can run" "unsupported operator 'com.example.loomtest.Frobnicate' (node 'odd', opset 1): no reference kernel" \
  "$loom" compare "$dir/no_kernel.onnx" --device $good --input "$x"
expect_error "--bisect into a folder that cannot be made" "--bisect: cannot create '/dev/null/bisect'" \
  "$loom" compare "$model" --device $broken --input "$x" --bisect /dev/null/bisect

[ "$failures" -eq 0 ] && echo "compare CLI: all checks passed"
