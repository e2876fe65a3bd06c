#!/usr/bin/env bash
# `loom test-onnx` runs its cases in a child that keeps its runtime from case
# to case (conformance::CaseWorker): a case that crashes the child or hangs
# past --timeout is that case's ERROR, and the cases after it run in a fresh
# child and pass. The fake plugin (tests/support/fake_plugin) claims the
# plain Adds (fake.compile_ops=Add) and misbehaves in execute on request.
# Usage: case_worker_test.sh <loom> <fake plugin folder> <onnx node dir>
set -u
loom="$1" fake="$2" node="$3"
failures=0
problem() {
  echo "FAILED: $*" >&2
  failures=$((failures + 1))
}
export LOOM_PLUGIN_PATH="$fake"
run() {
  "$loom" test-onnx --device fake://0 --plugin-option fake.compile_ops=Add "$@" 2>&1
}

out=$(run --plugin-option fake.misbehave=execute_segv "$node/test_add" "$node/test_relu" "$node/test_add")
echo "$out"
grep -q "^ERROR test_add: crashed (signal 11" <<<"$out" || problem "a crash in execute is not the case's ERROR"
grep -q "^PASS test_relu " <<<"$out" || problem "the case after a crash did not run in a fresh child"
[ "$(grep -c "^ERROR test_add: crashed" <<<"$out")" = 2 ] ||
  problem "the second crashing case was not reported as its own crash"

out=$(run --timeout 2 --plugin-option fake.misbehave=execute_hang "$node/test_add" "$node/test_relu")
echo "$out"
grep -q "^ERROR test_add: timed out after 2 s" <<<"$out" || problem "a hang is not the case's ERROR"
grep -q "^PASS test_relu " <<<"$out" || problem "the case after a hang did not run"

# Without misbehaviour every case passes in one child.
out=$(run "$node/test_add" "$node/test_relu" "$node/test_add_bcast")
echo "$out"
grep -q "3 cases: 3 passed" <<<"$out" || problem "the cases fail without a fault"

if [ $failures -ne 0 ]; then
  echo "$failures problem(s)" >&2
  exit 1
fi
echo "the case worker isolates crashes and hangs"
