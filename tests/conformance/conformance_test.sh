#!/usr/bin/env bash
# `loom conformance` against the shipped plugins, the fake plugin and its
# deliberately broken builds (tests/support/fake_plugin, Defect): every
# shipped plugin and the fake conform, writing all three reports, and each
# broken build fails the check named for its defect.
# Usage: conformance_test.sh <loom> <plugin dir> <test plugin dir> <onnx node dir> <work dir> [sanitized]
set -u
loom="$1" plugins="$2" test_plugins="$3" node="$4" work="$5" sanitized="${6:-}"
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

if [ $failures -ne 0 ]; then
  echo "$failures problem(s)" >&2
  exit 1
fi
echo "all conformance checks behaved"
