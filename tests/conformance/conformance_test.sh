#!/usr/bin/env bash
# `loom conformance` against the shipped plugins, the fake plugin and its
# deliberately broken builds (tests/support/fake_plugin, Defect): every
# shipped plugin and the fake conform, writing all three reports, and each
# broken build fails the check named for its defect. The operator sweep
# (--ops): the shipped plugins pass every case they take, and cpu-simd-broken
# (HardSigmoid wrong for alpha != 0.2) fails exactly those cases.
# Usage: conformance_test.sh <loom> <plugin dir> <test plugin dir> <onnx node dir> <work dir>
#          <broken plugin dir|none> [sanitized]
set -u
loom="$1" plugins="$2" test_plugins="$3" node="$4" work="$5" broken_plugins="$6" sanitized="${7:-}"
rm -rf "$work"
mkdir -p "$work"
failures=0
problem() {
  echo "FAILED: $*" >&2
  failures=$((failures + 1))
}

# conforms NAME MANIFEST [ARGS...]: the suite passes and writes its reports.
conforms() {
  local name="$1" manifest="$2"
  shift 2
  local out="$work/$name"
  "$loom" conformance "$manifest" --report "$out.json" --junit "$out.xml" --markdown "$out.md" \
      "$@" >"$out.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    problem "$name: loom conformance exited $rc"
    cat "$out.log" >&2
    return
  fi
  grep -q "^conformance: $name on .*: [0-9]* passed, 0 failed" "$out.log" || problem "$name: no totals line"
  python3 - "$out.json" "$out.xml" "$out.md" <<'PY' || problem "$name: reports are wrong"
import json, sys, xml.etree.ElementTree as ET
report = json.load(open(sys.argv[1]))
assert report["totals"]["failed"] == 0, report["totals"]
assert report["totals"]["passed"] >= 10, report["totals"]
ids = [c["id"] for c in report["checks"]]
assert len(ids) == len(set(ids)) and "abi.negotiate" in ids, ids
root = ET.parse(sys.argv[2]).getroot()
cases = root.findall(".//testcase")
assert len(cases) == len(ids), (len(cases), len(ids))
assert not root.findall(".//failure")
md = open(sys.argv[3]).read()
assert "**conforms**" in md and "| `abi.negotiate` | pass |" in md, md[:400]
PY
  echo "ok: $name conforms ($(grep -o '[0-9]* passed, 0 failed, [0-9]* skipped' "$out.log"))"
}

fake_args=(--plugin-option fake.compile_ops=Add --onnx-dir "$node/test_add")
conforms cpu-simd "$plugins/cpu-simd.loom-plugin.json"
# cpu-simd serves open shapes (ABI 1.2): the check runs, not skips.
grep -q "^PASS execution.open_shapes: [1-9][0-9]* cases compiled once" "$work/cpu-simd.log" ||
  problem "cpu-simd: execution.open_shapes did not pass: $(grep "execution.open_shapes" "$work/cpu-simd.log")"
conforms fpga-stub "$plugins/fpga-stub.loom-plugin.json"
conforms fake "$test_plugins/fake/fake.loom-plugin.json" "${fake_args[@]}"
if [ "$sanitized" != sanitized ]; then
  # At full level, over every ONNX node test: the fake claims only the Adds
  # it runs right (no broadcasting), so test_add_bcast and the like stay on
  # the reference kernels.
  conforms fake "$test_plugins/fake/fake.loom-plugin.json" --plugin-option fake.compile_ops=Add \
    --level full
fi
# vulkan-compute needs a Vulkan device (lavapipe on CI machines).
if "$loom" devices 2>/dev/null | grep -q "device vulkan-compute://0"; then
  if [ "$sanitized" = sanitized ]; then
    # Under ASan the test launcher preloads the Vulkan driver and keeps it
    # resident (tests/CMakeLists.txt); the driver's per-instance allocations
    # then outlive each plugin cycle, so the heap count grows with them. The
    # lifecycle check of vulkan-compute runs in the default build.
    conforms vulkan-compute "$plugins/vulkan-compute.loom-plugin.json" --skip lifecycle.plugin_cycles
  else
    conforms vulkan-compute "$plugins/vulkan-compute.loom-plugin.json"
  fi
else
  echo "skip: vulkan-compute has no device here: $("$loom" devices 2>&1 | grep -A2 "plugin vulkan-compute" | tr '\n' ' ')"
fi

# breaks NAME CHECK: the broken build fails CHECK (and the run fails). Only
# that check runs (--only): a defect that hangs (a fence never signaled)
# would otherwise cost its time limit again in every check that waits.
breaks() {
  local name="fake_defect_$1" check="$2"
  local out="$work/$name"
  "$loom" conformance "$test_plugins/$name/$name.loom-plugin.json" --junit "$out.xml" \
      --only "$check" "${fake_args[@]}" >"$out.log" 2>&1
  local rc=$?
  if [ $rc -ne 1 ]; then
    problem "$name: expected exit 1, got $rc"
    cat "$out.log" >&2
    return
  fi
  if ! grep -q "^FAIL $check: " "$out.log"; then
    problem "$name: check $check did not fail"
    cat "$out.log" >&2
    return
  fi
  grep -q "<failure" "$out.xml" || problem "$name: the JUnit report has no failure"
  echo "ok: $name fails $check: $(grep "^FAIL $check: " "$out.log" | cut -c1-160)"
}
breaks struct_size abi.struct_sizes
breaks execute_crash executables.own_blobs
breaks leak lifecycle.plugin_cycles
breaks corrupt_blobs executables.reject_garbage
breaks wrong_results execution.onnx_node_tests
breaks race threads.concurrent_execute
breaks fence_never_signals fences.execute_signals

# --stamp: on copies of the fake and of a broken build, so the build tree's
# plugins stay unstamped. A host requiring conformance takes the first and
# refuses the second, naming the failed check.
stamped="$work/stamped"
mkdir -p "$stamped"
cp -r "$test_plugins/fake" "$test_plugins/fake_defect_corrupt_blobs" "$stamped/"
"$loom" conformance "$stamped/fake/fake.loom-plugin.json" --stamp "${fake_args[@]}" >"$work/stamp.log" 2>&1 ||
  problem "stamping the fake failed: $(cat "$work/stamp.log")"
[ -f "$stamped/fake/fake.loom-conformance.json" ] || problem "--stamp wrote no stamp"
"$loom" conformance "$stamped/fake_defect_corrupt_blobs/fake_defect_corrupt_blobs.loom-plugin.json" --stamp \
  "${fake_args[@]}" >"$work/stamp-bad.log" 2>&1
grep -q "recording the failures" "$work/stamp-bad.log" || problem "a failing run was not stamped: $(cat "$work/stamp-bad.log")"
LOOM_PLUGIN_PATH="$stamped/fake:$stamped/fake_defect_corrupt_blobs" "$loom" devices --require-conformance \
  >"$work/devices.log" 2>&1
grep -q "fake://0" "$work/devices.log" || problem "a stamped plugin was not listed: $(cat "$work/devices.log")"
grep -q "executables.reject_garbage" "$work/devices.log" ||
  problem "the failed check of a stamped broken build is not named: $(cat "$work/devices.log")"
echo "ok: --stamp, and --require-conformance takes the fake and refuses the broken build"

# Usage errors name what was wrong.
"$loom" conformance no-such-plugin >"$work/missing.log" 2>&1
[ $? -eq 1 ] && grep -q "no plugin named 'no-such-plugin'" "$work/missing.log" ||
  problem "an unknown plugin name is not reported clearly: $(cat "$work/missing.log")"
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --device cpu-simd://9 >"$work/device.log" 2>&1
[ $? -eq 1 ] && grep -q "no device 'cpu-simd://9'" "$work/device.log" ||
  problem "an unknown device is not reported clearly: $(cat "$work/device.log")"
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --only nosuch >"$work/only.log" 2>&1
[ $? -eq 1 ] && grep -q "no check id starts with it" "$work/only.log" ||
  problem "--only with no match is not reported: $(cat "$work/only.log")"
"$loom" conformance --list | grep -q "^lifecycle.plugin_cycles " || problem "--list lacks lifecycle.plugin_cycles"
"$loom" conformance "$test_plugins/fake/fake.loom-plugin.json" --only abi.entry --skip abi >"$work/skip.log" 2>&1
grep -q "^SKIP abi.entry_point: skipped by request" "$work/skip.log" || problem "--skip did not skip: $(cat "$work/skip.log")"

# The operator sweep. Under the sanitizers a short list of operators (one
# of each family) keeps it cheap; the default build sweeps every operator.
if [ "$sanitized" = sanitized ]; then
  sweep_ops=(--op HardSigmoid,Relu,Add,Conv,MaxPool,Softmax,Concat,Gather,MatMulInteger)
  min_ops=9
else
  sweep_ops=()
  min_ops=40
fi
# sweeps NAME MANIFEST [ARGS...]: every case the plugin takes passes; the
# JSON report agrees, with min_ops operators and at least one passed case.
sweeps() {
  local name="$1" manifest="$2"
  shift 2
  local out="$work/sweep-$name"
  "$loom" conformance "$manifest" --ops "${sweep_ops[@]}" --report "$out.json" "$@" >"$out.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then
    problem "sweep $name: loom conformance --ops exited $rc"
    grep -v "^[A-Za-z]*: [0-9]* cases\\?: " "$out.log" | head -20 >&2
    return
  fi
  grep -q "^operator sweep: $name on .*: [0-9]* cases of [0-9]* operators: [1-9][0-9]* passed, 0 failed, [0-9]* declined" \
    "$out.log" || problem "sweep $name: no totals line: $(tail -1 "$out.log")"
  python3 - "$out.json" "$min_ops" <<'PY' || problem "sweep $name: the report is wrong"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mode"] == "run" and r["totals"]["failed"] == 0 and r["totals"]["errors"] == 0, r["totals"]
assert r["totals"]["passed"] >= 1, r["totals"]
assert len(r["operators"]) >= int(sys.argv[2]), len(r["operators"])
assert r["totals"]["cases"] == len(r["cases"]) == sum(o["passed"] + o["declined"] for o in r["operators"])
assert {c["outcome"] for c in r["cases"]} <= {"pass", "declined"}
PY
  echo "ok: sweep $name: $(tail -1 "$out.log")"
}
sweeps cpu-simd "$plugins/cpu-simd.loom-plugin.json"
sweeps fpga-stub "$plugins/fpga-stub.loom-plugin.json"
if [ "$sanitized" != sanitized ] && "$loom" devices 2>/dev/null | grep -q "device vulkan-compute://0"; then
  sweeps vulkan-compute "$plugins/vulkan-compute.loom-plugin.json"
fi

# cpu-simd-broken: HardSigmoid adds 1/16 to beta when alpha != 0.2. The
# sweep fails exactly its HardSigmoid cases with such an alpha, each line
# naming the case (shapes, attributes) and the worst element, and passes
# every other case, HardSigmoid's default and explicit alpha=0.2 included.
broken_manifest="$broken_plugins/cpu-simd-broken.loom-plugin.json"
if [ -f "$broken_manifest" ]; then
  out="$work/sweep-broken"
  broken_ops=("${sweep_ops[@]}")
  [ ${#broken_ops[@]} -eq 0 ] || broken_ops=(--op HardSigmoid,Relu,Add)
  "$loom" conformance "$broken_manifest" --ops "${broken_ops[@]}" --report "$out.json" >"$out.log" 2>&1
  rc=$?
  if [ $rc -ne 1 ]; then
    problem "sweep cpu-simd-broken: expected exit 1, got $rc"
    tail -5 "$out.log" >&2
  fi
  grep -q "^FAIL HardSigmoid \[inputs 3x5, alpha=0.5, f32, opset 6\]: output 'out0' element \[[0-9, ]*\]: got [-0-9.e]*, expected [-0-9.e]*" \
    "$out.log" || problem "sweep cpu-simd-broken: no failure line naming the case and the worst element: $(grep -m3 FAIL "$out.log")"
  grep "^FAIL" "$out.log" | grep -v "^FAIL HardSigmoid \[inputs [0-9x]*, alpha=0\.[15]" &&
    problem "sweep cpu-simd-broken: a case other than HardSigmoid with alpha != 0.2 failed"
  grep -q "^HardSigmoid: 20 cases: 14 passed, 6 failed, 0 declined" "$out.log" ||
    problem "sweep cpu-simd-broken: HardSigmoid's line: $(grep "^HardSigmoid" "$out.log")"
  python3 - "$out.json" <<'PY' || problem "sweep cpu-simd-broken: the report is wrong"
import json, sys
r = json.load(open(sys.argv[1]))
failed = [c for c in r["cases"] if c["outcome"] == "fail"]
assert failed and all(c["op"] == "HardSigmoid" and "alpha=" in c["attributes"]
                      and "alpha=0.2" not in c["attributes"] for c in failed), failed
hs = [c for c in r["cases"] if c["op"] == "HardSigmoid" and c["outcome"] == "pass"]
assert {c["attributes"] for c in hs} >= {"", "alpha=0.2", "beta=0.25"}, hs
assert all(c["outcome"] in ("pass", "declined") for c in r["cases"] if c["op"] != "HardSigmoid")
PY
  echo "ok: sweep cpu-simd-broken fails $(grep -c "^FAIL" "$out.log") HardSigmoid cases with alpha != 0.2: $(grep -m1 "^FAIL" "$out.log" | cut -c1-150)"
else
  echo "skip: no cpu-simd-broken build at $broken_plugins"
fi

# A plugin that crashes in a case fails that case and the sweep goes on.
# Under the sanitizers the deliberate null store is UBSan's report, which
# ends the case's process with status 86 instead of SIGSEGV (as the
# execute_crash check above sees it).
out="$work/sweep-crash"
crash_end="killed by signal"
[ "$sanitized" = sanitized ] && crash_end="exited with status 86"
"$loom" conformance "$test_plugins/fake_defect_execute_crash/fake_defect_execute_crash.loom-plugin.json" --op Add,Relu \
  --plugin-option fake.compile_ops=Add >"$out.log" 2>&1
[ $? -eq 1 ] && grep -q "^FAIL Add \[inputs 7; 7, .*$crash_end" "$out.log" &&
  grep -q "^Relu: 14 cases: 0 passed, 0 failed, 14 declined" "$out.log" ||
  problem "sweep: a crashing case is not reported as its failure: $(cat "$out.log")"

# --coverage and --list-ops compile only; --perf times the cases.
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --coverage --op Add >"$work/coverage.log" 2>&1
grep -q "^taken Add \[inputs 3x5; 5, default attributes, f32, opset 14\]" "$work/coverage.log" &&
  grep -q "^declined Add \[inputs 3x5; 5, default attributes, i64, opset 14\]" "$work/coverage.log" &&
  grep -q "^operator sweep: cpu-simd on cpu-simd://0: 32 cases of 1 operators: [1-9][0-9]* taken, [1-9][0-9]* declined" \
    "$work/coverage.log" || problem "--coverage: $(cat "$work/coverage.log")"
"$loom" conformance --list-ops >"$work/list-ops.log" 2>&1
[ "$(grep -c "^[A-Za-z]*  opset [0-9]*, [0-9]* cases$" "$work/list-ops.log")" -ge 40 ] &&
  grep -q "^HardSigmoid  opset 6, 20 cases" "$work/list-ops.log" || problem "--list-ops: $(cat "$work/list-ops.log")"
"$loom" conformance "$plugins/fpga-stub.loom-plugin.json" --list-ops --op Relu,Softmax >"$work/list-ops-fpga.log" 2>&1
grep -q "^Softmax: [0-9]* cases: 0 taken, [1-9][0-9]* declined" "$work/list-ops-fpga.log" ||
  problem "--list-ops with a plugin: $(cat "$work/list-ops-fpga.log")"
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --perf --op Relu >"$work/perf.log" 2>&1
grep -q "^Relu: 14 cases: 7 passed, 0 failed, 7 declined; 7 timed: plugin [0-9.]* us, reference [0-9.]* us" \
  "$work/perf.log" || problem "--perf: $(cat "$work/perf.log")"
# Usage errors of the sweep name what was wrong.
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --op Relu,NoSuchOp >"$work/sweep-op.log" 2>&1
[ $? -eq 1 ] && grep -q "no operator 'NoSuchOp'" "$work/sweep-op.log" ||
  problem "--op with an unknown operator: $(cat "$work/sweep-op.log")"
"$loom" conformance --ops >"$work/sweep-noplugin.log" 2>&1
[ $? -eq 1 ] && grep -q "conformance --ops: give the plugin" "$work/sweep-noplugin.log" ||
  problem "--ops without a plugin: $(cat "$work/sweep-noplugin.log")"
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --ops --stamp >"$work/sweep-stamp.log" 2>&1
[ $? -eq 1 ] && grep -q "\-\-stamp is for the suite's checks" "$work/sweep-stamp.log" ||
  problem "--ops --stamp: $(cat "$work/sweep-stamp.log")"
"$loom" conformance "$plugins/cpu-simd.loom-plugin.json" --op Relu --device cpu-simd://9 >"$work/sweep-device.log" 2>&1
[ $? -eq 1 ] && grep -q "no device 'cpu-simd://9'" "$work/sweep-device.log" ||
  problem "--ops with an unknown device: $(cat "$work/sweep-device.log")"
echo "ok: the sweep's --coverage, --list-ops, --perf and usage errors"

if [ $failures -ne 0 ]; then
  echo "$failures problem(s)" >&2
  exit 1
fi
echo "all conformance checks behaved"
