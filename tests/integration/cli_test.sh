#!/usr/bin/env bash
# Drives the `loom` program the way a user does and checks exit codes and
# messages: success paths, and bad input that must end in a one-line error
# (exit 1), never a crash (exit >= 128) or a silent success.
# Usage: cli_test.sh <path to loom> <scratch dir>
set -u
loom="$1"
dir="$2"
rm -rf "$dir" && mkdir -p "$dir"
# shellcheck source=cli_checks.sh
source "$(dirname "$0")/cli_checks.sh"

# The checks themselves: a sanitizer report (by exit code or by its text in
# stderr), a wrong exit code and an empty pattern must each count as a failure.
gate_self_test() {
  local what="$1"; shift
  local before=$failures
  "$@" > "$dir/gate.out"
  if [ $failures -ne $((before + 1)) ]; then
    failures=$before
    fail "check self-test: $what was not counted as a failure"
  else
    failures=$before
  fi
}
gate_self_test "exit code 86 in expect_error" expect_error "asan exit" "boom" \
  bash -c 'echo "loom: error: boom" >&2; exit 86'
gate_self_test "a report in stderr in expect_ok" expect_ok "asan text" "^x$" \
  bash -c 'echo x; echo "==1==ERROR: AddressSanitizer: heap-buffer-overflow" >&2'
gate_self_test "a UBSan report in expect_exit" expect_exit "ubsan text" 1 "^x$" \
  bash -c 'echo x; echo "a.cpp:3:5: runtime error: signed integer overflow" >&2; exit 1'
gate_self_test "exit 2 in expect_error" expect_error "exit 2" "boom" \
  bash -c 'echo "loom: error: boom" >&2; exit 2'
gate_self_test "an empty pattern" expect_ok "empty pattern" "" true

expect_ok "demo" "cpu-simd://0" "$loom" demo --save-dir "$dir/demo"
for f in program.loom input_x.npy expected_y.npy; do
  [ -s "$dir/demo/$f" ] || fail "demo did not write $f"
done
prog="$dir/demo/program.loom"
# --json: one document, every run with its numbers, nothing else on stdout.
if ! "$loom" demo --mlp --json > "$dir/demo.json" 2> "$dir/demo_json.err" ||
   ! /usr/bin/python3 - "$dir/demo.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["demo"] == "mlp" and d["passed"] is True, d
cpu = [r for r in d["runs"] if r["device"] == "cpu-simd://0"]
assert cpu and cpu[0]["result"] == "passed" and cpu[0]["max_abs_diff"] <= 1e-5 and cpu[0]["median_us"] > 0, cpu
PY
then fail "demo --mlp --json: $(head -c 400 "$dir/demo.json") $(cat "$dir/demo_json.err")"; fi
if [ -d /usr/share/libonnx-testdata/data/node ]; then
  if ! "$loom" demo --json > "$dir/demo_onnx.json" 2> "$dir/demo_json.err" ||
     ! /usr/bin/python3 - "$dir/demo_onnx.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["demo"] == "onnx" and d["passed"] is True, d
models = {r["model"] for r in d["runs"]}
assert len(models) == 3 and all(r["result"] == "passed" for r in d["runs"]), d["runs"]
assert any(r["device"] == "cpu-simd://0" and r["plugin_nodes"] > 0 for r in d["runs"])
PY
  then fail "demo --json: $(head -c 400 "$dir/demo_onnx.json") $(cat "$dir/demo_json.err")"; fi
fi
# A failing demo still prints its document, with the error, and exits 1.
# (cpu.isa=bogus rejects cpu-simd, a missing Vulkan loader vulkan-compute,
# and fpga-stub does not take Softmax: no plugin compiles the MLP.)
expect_exit "demo --json when no device runs it" 1 '"passed": false' \
  "$loom" demo --mlp --json --plugin-option cpu.isa=bogus \
  --plugin-option vulkan.loader=/nonexistent/libvulkan.so.1
grep -q "no plugin compiles the demo MLP" "$dir/stdout" ||
  fail "demo --json: no reason in $(cat "$dir/stdout")"
grep -q '"code": "unavailable"' "$dir/stdout" || fail "demo --json: no error code in $(cat "$dir/stdout")"

expect_ok "devices" "cpu-simd://0" "$loom" devices
expect_ok "devices --json" '"uri"' "$loom" devices --json
# The folders searched, in order, a missing one marked (the per-user folder
# is under the build tree here, and absent: tests/CMakeLists.txt).
expect_ok "devices names an absent folder of LOOM_PLUGIN_PATH" \
  "^  $dir/no-such-plugins  (LOOM_PLUGIN_PATH; does not exist)$" \
  env LOOM_PLUGIN_PATH="$dir/no-such-plugins" "$loom" devices
expect_ok "devices names the program's plugin folder" "/lib/loom/plugins  (program)$" "$loom" devices
expect_ok "devices names the per-user folder" "/loom/plugins  (user; does not exist)$" "$loom" devices
expect_ok "devices --json lists the folders searched" '"origin": "user"' "$loom" devices --json
expect_ok "inspect" "cpu-simd" "$loom" inspect "$prog"
expect_ok "inspect --json" '"functions"' "$loom" inspect "$prog" --json
expect_ok "run with .npy" "y:" "$loom" run "$prog" --input "x=$dir/demo/input_x.npy" \
  --output "y=$dir/y.npy"
[ -s "$dir/y.npy" ] || fail "run did not write y.npy"
# ONNX TensorProto inputs (.pb, as in ONNX's test data): the demo's x as a
# hand-made TensorProto (dims 4, 64; FLOAT; name "x"; 1024 raw bytes).
npy="$dir/demo/input_x.npy"
hlen=$(od -An -tu2 -j8 -N2 "$npy" | tr -d ' ')
{ printf '\x08\x04\x08\x40\x10\x01\x42\x01x\x4a\x80\x08'; tail -c +$((11 + hlen)) "$npy"; } \
  > "$dir/x.pb"
expect_ok "run with .pb" "y:" "$loom" run "$prog" --input "x=$dir/x.pb" --output "y=$dir/y_pb.npy"
cmp -s "$dir/y_pb.npy" "$dir/y.npy" || fail "run with .pb: y differs from the .npy run"
cp "$dir/x.pb" "$dir/x.tensor"
expect_ok "run with a TensorProto by content" "y:" "$loom" run "$prog" --input "x=$dir/x.tensor"
expect_ok "run --output-dir" "wrote y to $dir/out/y.npy" "$loom" run "$prog" \
  --input "x=$dir/demo/input_x.npy" --output-dir "$dir/out"
cmp -s "$dir/out/y.npy" "$dir/y.npy" || fail "--output-dir: y differs from --output"
printf 'garbage that is no tensor' > "$dir/bad.pb"
expect_error "bad .pb input" "bad.pb" "$loom" run "$prog" --input "x=$dir/bad.pb"
head -c 40 "$dir/x.pb" > "$dir/short.pb"
expect_error "truncated .pb input" "short.pb" "$loom" run "$prog" --input "x=$dir/short.pb"
: > "$dir/out_is_file"
expect_error "--output-dir is a file" "output-dir" "$loom" run "$prog" --input x=random \
  --output-dir "$dir/out_is_file"

expect_ok "run --repeat" "median" "$loom" run "$prog" --input x=random --repeat 5 --threads 1
expect_ok "run reference function" "y:" "$loom" run "$prog" --function reference --input x=random

expect_error "mistyped device" "did you mean 'cpu-simd://0'" \
  "$loom" run "$prog" --device cpu-smid://0 --input x=random
expect_error "a kind without kind:" "write 'kind:gpu'" \
  "$loom" run "$prog" --device gpu --input x=random
expect_error "mistyped selector term" "did you mean 'kind:cpu'" \
  "$loom" run "$prog" --device kind:cpuu --input x=random
# Device selectors: a kind list falls through to the CPU; --explain lists
# every candidate, also when loading fails.
expect_ok "run --device kind list" "delegate mlp -> cpu-simd://0" \
  "$loom" run "$prog" --device "kind:gpu,kind:accelerator,kind:cpu" --input x=random
expect_ok "run --explain" "chosen    variant 0 'cpu-simd' on cpu-simd://0 \[cpu-simd\]" \
  "$loom" run "$prog" --device cpu-simd --explain --input x=random
expect_error "run --explain, nothing can load" "cannot run on the devices selected by 'fpga-stub'" \
  "$loom" run "$prog" --device fpga-stub --explain --input x=random
"$loom" run "$prog" --device fpga-stub --explain --input x=random > "$dir/explain.out" 2>/dev/null
grep -q "refused   (no variant) on fpga-stub://0 \[fpga-stub\]" "$dir/explain.out" ||
  fail "run --explain: the refused fpga-stub device is not listed on failure"
expect_ok "run --json" '"loader_key": "cpu-simd"' \
  "$loom" run "$prog" --input x=random --json --repeat 3
"$loom" run "$prog" --input x=random --json --repeat 3 > "$dir/run.json"
python3 - "$dir/run.json" <<'PY' || fail "run --json: not the document expected"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["placements"][0]["device"] == "cpu-simd://0", doc
assert doc["outputs"][0]["name"] == "y" and doc["outputs"][0]["shape"] == [4, 10], doc
assert doc["latency_us"]["runs"] == 3 and doc["latency_us"]["median"] > 0, doc
assert doc["placement"]["delegates"][0]["candidates"][0]["outcome"] == "chosen", doc
PY
"$loom" run "$prog" --input x=random --json --device kind:virtual > "$dir/run_err.json" 2>/dev/null
python3 - "$dir/run_err.json" <<'PY' || fail "run --json on failure: no error document"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["error"]["code"] == "not_found" and "kind:virtual" in doc["error"]["message"], doc
PY
# Traces: a Chrome trace-event file with a track per device plus the host,
# every delegate span inside a run span; --profile prints the table.
expect_ok "run --profile" "cpu-simd://0  delegate mlp  *4 " \
  "$loom" run "$prog" --input x=random --repeat 3 --profile
expect_ok "run --trace" "wrote trace to $dir/trace.json" \
  "$loom" run "$prog" --input x=random --repeat 3 --trace "$dir/trace.json"
python3 - "$dir/trace.json" <<'PY' || fail "run --trace: not the timeline expected"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
tracks = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
assert sorted(tracks.values()) == ["cpu-simd://0", "host"], tracks
runs = [e for e in events if e.get("cat") == "run"]
delegates = [e for e in events if e.get("cat") == "delegate"]
assert len(runs) == 4 and len(delegates) == 4, (runs, delegates)
for d in delegates:
    assert tracks[d["tid"]] == "cpu-simd://0", d
    assert any(r["ts"] <= d["ts"] and d["ts"] + d["dur"] <= r["ts"] + r["dur"] + 0.001
               for r in runs), d
PY
expect_error "run --trace into a missing folder" "cannot write" \
  "$loom" run "$prog" --input x=random --trace "$dir/no/such/folder/t.json"
expect_error "missing file" "nonexistent.loom" "$loom" inspect "$dir/nonexistent.loom"
expect_error "unknown input name" "'z'" "$loom" run "$prog" --input z=random
expect_error "unknown function" "mian" "$loom" run "$prog" --function mian --input x=random
expect_error "binding without =" "NAME=" "$loom" run "$prog" --input x
expect_error "output name unknown" "'q'" "$loom" run "$prog" --input x=random --output "q=$dir/q.npy"

# `timeout` guards against a read that blocks on the FIFO; it must outlast a
# start of `loom` (plugin probes included) on a slow sanitized build.
mkfifo "$dir/fifo_input"
expect_error "a FIFO as input is refused, not read" "fifo_input is a FIFO" \
  timeout 120 "$loom" run "$prog" --input "x=$dir/fifo_input"
expect_error "a .pb FIFO as input" "fifo.pb is a FIFO" \
  bash -c 'mkfifo "$1/fifo.pb" && exec timeout 120 "$2" run "$3" --input "x=$1/fifo.pb"' _ "$dir" "$loom" "$prog"
expect_error "a .npy FIFO as input" "fifo.npy is a FIFO, not a regular file" \
  bash -c 'mkfifo "$1/fifo.npy" && exec timeout 120 "$2" run "$3" --input "x=$1/fifo.npy"' _ "$dir" "$loom" "$prog"
ln -s "$dir/fifo_input" "$dir/link_to_fifo.npy"
expect_error "a symlink to a FIFO as input" "link_to_fifo.npy is a FIFO" \
  timeout 120 "$loom" run "$prog" --input "x=$dir/link_to_fifo.npy"
expect_error "a device as input" "/dev/zero is a character device, not a regular file" \
  "$loom" run "$prog" --input x=/dev/zero
expect_error "a .pb device as input" "is a character device" \
  bash -c 'ln -s /dev/zero "$1/zero.pb" && exec "$2" run "$3" --input "x=$1/zero.pb"' _ "$dir" "$loom" "$prog"
expect_error "a directory as input" "is a directory, not a regular file" \
  "$loom" run "$prog" --input "x=$dir"
if command -v python3 >/dev/null; then
  python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$dir/sock"
  expect_error "a socket as input" "sock is a socket" "$loom" run "$prog" --input "x=$dir/sock"
fi
# What a program declares is bounded before it is allocated.
expect_error "a tensor over --max-tensor-bytes" \
  "of function 'main' takes [0-9]* bytes, more than the limit of 16 bytes per tensor" \
  "$loom" run "$prog" --input x=random --max-tensor-bytes 16
expect_error "a missing input file" "input file $dir/none.npy: no such file" \
  "$loom" run "$prog" --input "x=$dir/none.npy"
printf 'not a numpy file at all' > "$dir/bad.npy"
expect_error "bad .npy input" "bad.npy" "$loom" run "$prog" --input "x=$dir/bad.npy"
expect_error "wrong input shape" "shape" "$loom" run "$prog" --input "x=$dir/y.npy"

: > "$dir/empty.loom"
expect_error "empty program" "empty.loom" "$loom" inspect "$dir/empty.loom"
head -c 200 "$prog" > "$dir/truncated.loom"
expect_error "truncated program" "truncated.loom" "$loom" run "$dir/truncated.loom" --input x=random
head -c 4096 /dev/urandom > "$dir/garbage.loom"
expect_error "random bytes" "garbage.loom" "$loom" inspect "$dir/garbage.loom"
cp "$prog" "$dir/flipped.loom"
size=$(stat -c %s "$dir/flipped.loom")
printf '\xff' | dd of="$dir/flipped.loom" bs=1 seek=$((size - 10)) conv=notrunc status=none
expect_error "flipped segment byte" "checksum" "$loom" inspect "$dir/flipped.loom"

# External weights: the demo's program with its weights in weights.irpa.
expect_ok "demo --external-params" "weights.irpa  passed" \
  "$loom" demo --external-params --save-dir "$dir/ext"
for f in program.loom weights.irpa input_x.npy expected_y.npy; do
  [ -s "$dir/ext/$f" ] || fail "demo --external-params did not write $f"
done
ext="$dir/ext/program.loom"
expect_ok "inspect external" "archive 'weights.irpa' scope 'mlp'" "$loom" inspect "$ext"
expect_ok "inspect external --json" '"storage": "external"' "$loom" inspect "$ext" --json
expect_ok "inspect inline" "inline (segment" "$loom" inspect "$prog"
expect_ok "run external (archive beside it)" "y:" "$loom" run "$ext" \
  --input "x=$dir/ext/input_x.npy" --output "y=$dir/y_ext.npy"
cmp -s "$dir/y_ext.npy" "$dir/y.npy" || fail "external weights: y differs from the inline run"
mkdir -p "$dir/moved"
cp "$ext" "$dir/moved/program.loom"
expect_ok "run --params" "y:" "$loom" run "$dir/moved/program.loom" \
  --input "x=$dir/ext/input_x.npy" --params "mlp=$dir/ext/weights.irpa" --output "y=$dir/y_moved.npy"
cmp -s "$dir/y_moved.npy" "$dir/y.npy" || fail "--params: y differs from the inline run"
expect_error "missing archive" "not found at $dir/moved/weights.irpa.*--params mlp=" \
  "$loom" run "$dir/moved/program.loom" --input x=random
expect_error "--params unknown scope" "no external parameters in scope 'mpl'" \
  "$loom" run "$ext" --input x=random --params "mpl=$dir/ext/weights.irpa"
expect_error "--params missing file" "nope.irpa" \
  "$loom" run "$ext" --input x=random --params "mlp=$dir/nope.irpa"
expect_error "--params without =" "SCOPE=PATH" "$loom" run "$ext" --input x=random --params mlp
cp "$prog" "$dir/moved/weights.irpa"
expect_error "--params not an archive" "parameter 'w1' (scope 'mlp'): .*not a parameter archive" \
  "$loom" run "$dir/moved/program.loom" --input x=random
# The recorded archive path is confined to the program's folder: a symlink out
# of it is refused before the target is opened (its bytes are never quoted);
# the same file named with --params is taken.
mkdir -p "$dir/confined"
cp "$ext" "$dir/confined/program.loom"
printf 'SECRET-BYTES' > "$dir/secret.txt"
ln -s "$dir/secret.txt" "$dir/confined/weights.irpa"
expect_error "archive symlink out of the program's folder" \
  "archive 'weights.irpa' resolves to .*secret.txt, outside the program's folder" \
  "$loom" run "$dir/confined/program.loom" --input x=random
grep -q "SECR" "$dir/stderr" && fail "the symlink's target bytes were quoted: $(cat "$dir/stderr")"
rm "$dir/confined/weights.irpa"
ln -s "$dir/ext/weights.irpa" "$dir/confined/weights.irpa"
expect_error "archive symlink to a real archive out of the folder" "outside the program's folder" \
  "$loom" run "$dir/confined/program.loom" --input x=random
expect_ok "the same archive named with --params" "y:" "$loom" run "$dir/confined/program.loom" \
  --input x=random --params "mlp=$dir/ext/weights.irpa"
rm "$dir/confined/weights.irpa"
mkdir -p "$dir/confined/shared"
cp "$dir/ext/weights.irpa" "$dir/confined/shared/w.irpa"
ln -s shared/w.irpa "$dir/confined/weights.irpa"
expect_ok "archive symlink inside the program's folder" "y:" \
  "$loom" run "$dir/confined/program.loom" --input x=random

# Fake weights for tests: zeros of the same sizes. The recorded checksums
# refuse them unless the check is turned off; with all-zero weights the
# softmax output is uniform (0.1 for 10 classes).
expect_ok "params strip" "^wrote 4 entries to $dir/zeros.irpa (strip)$" "$loom" params strip "$dir/ext/weights.irpa" -o "$dir/zeros.irpa"
[ -s "$dir/zeros.irpa" ] || fail "params strip wrote no archive"
expect_error "other weights, checksums on" "checksum mismatch.*--no-param-checksums" \
  "$loom" run "$ext" --input x=random --params "mlp=$dir/zeros.irpa"
expect_ok "other weights, --no-param-checksums" "y: f32\[4, 10\] = \[0.1, 0.1, 0.1" \
  "$loom" run "$ext" --input x=random --params "mlp=$dir/zeros.irpa" --no-param-checksums

# `loom test-onnx` (only in a loom built with the compiler) on copies of two
# ONNX test cases, so that the outcome does not hang on the whole test data.
data=/usr/share/libonnx-testdata/data/node
if ! "$loom" --help 2>/dev/null | grep -q "test-onnx"; then
  skip "test-onnx checks" "this loom has no test-onnx (built without the compiler)"
elif [ ! -d "$data/test_relu" ] || [ ! -d "$data/test_adagrad" ]; then
  skip "test-onnx checks" "$data/test_relu or test_adagrad is missing (libonnx-testdata)"
else
  mkdir -p "$dir/cases"
  cp -r "$data/test_relu" "$data/test_adagrad" "$dir/cases/"
  expect_ok "test-onnx one case" "^PASS test_relu$" "$loom" test-onnx "$dir/cases/test_relu"
  expect_ok "test-onnx --json" '"passed": 1' "$loom" test-onnx "$dir/cases/test_relu" --json
  expect_exit "test-onnx --filter" 0 "^PASS test_relu$" \
    "$loom" test-onnx --filter relu "$dir/cases"
  [ "$(tail -n 1 "$dir/stdout")" = "test-onnx: 1 cases: 1 passed, 0 failed, 0 unsupported, 0 errors, 0 known failures (device reference)" ] ||
    fail "test-onnx: the totals are not the last line: $(tail -n 1 "$dir/stdout")"
  expect_ok "test-onnx unsupported op allowed" "UNSUPPORTED test_adagrad: .*Adagrad" \
    "$loom" test-onnx --report "$dir/report.json" "$dir/cases"
  grep -q '"status": "PASS"' "$dir/report.json" || fail "test-onnx --report lacks a PASS case"
  printf 'test_relu reference deliberately listed\n' > "$dir/kf_pass.txt"
  expect_exit "test-onnx: a listed known failure that passes fails the run" 1 \
    "known failure 'test_relu' passed: remove it from" \
    "$loom" test-onnx --known-failures "$dir/kf_pass.txt" "$dir/cases/test_relu"
  printf 'test_relu reference\n' > "$dir/kf_bad.txt"
  expect_error "test-onnx known failure without reason" "kf_bad.txt:1.*reason" \
    "$loom" test-onnx --known-failures "$dir/kf_bad.txt" "$dir/cases"
  expect_error "test-onnx missing folder" "nope" "$loom" test-onnx "$dir/nope"

  # The pinned baseline: written from a run, it makes the same run pass; a
  # listed case that is only UNSUPPORTED, or a passing case not listed, fails.
  expect_exit "test-onnx --write-baseline" 0 "^PASS test_relu$" \
    "$loom" test-onnx --write-baseline "$dir/baseline.txt" "$dir/cases"
  [ "$(grep -v '^#' "$dir/baseline.txt")" = "test_relu" ] ||
    fail "test-onnx --write-baseline: expected only test_relu: $(cat "$dir/baseline.txt")"
  expect_exit "test-onnx --baseline, all as listed" 0 \
    "^baseline .*baseline.txt: 1 listed, 0 regressed, 0 newly passing, 0 missing$" \
    "$loom" test-onnx --baseline "$dir/baseline.txt" "$dir/cases"
  printf 'test_relu\ntest_adagrad\n' > "$dir/baseline_unsupported.txt"
  expect_exit "test-onnx --baseline, a listed case UNSUPPORTED" 1 \
    "problem: baseline case 'test_adagrad' (.*baseline_unsupported.txt:2) did not pass: UNSUPPORTED" \
    "$loom" test-onnx --baseline "$dir/baseline_unsupported.txt" "$dir/cases"
  printf '# nothing passes\n' > "$dir/baseline_empty.txt"
  expect_exit "test-onnx --baseline, a passing case not listed" 1 \
    "problem: case 'test_relu' passed but is not in the baseline" \
    "$loom" test-onnx --baseline "$dir/baseline_empty.txt" "$dir/cases"
  printf 'test_relu\ntest_gone\n' > "$dir/baseline_gone.txt"
  expect_exit "test-onnx --baseline, a listed case not in the data" 1 \
    "problem: baseline case 'test_gone' (.*baseline_gone.txt:2) was not run" \
    "$loom" test-onnx --baseline "$dir/baseline_gone.txt" "$dir/cases"
  printf 'test_relu extra words\n' > "$dir/baseline_bad.txt"
  expect_error "test-onnx bad baseline" "baseline_bad.txt:1: one case name a line" \
    "$loom" test-onnx --baseline "$dir/baseline_bad.txt" "$dir/cases"

  printf 'junk' > "$dir/cases/test_relu/test_data_set_0/output_0.pb"
  expect_exit "test-onnx with a broken .pb" 1 "^ERROR test_relu: .*output_0.pb" \
    "$loom" test-onnx "$dir/cases/test_relu"
fi

# Isolation: a plugin that crashes while loading is listed as rejected and
# every command that enumerates plugins goes on; a plugin in its own process
# runs a program.
if [ -n "${LOOM_TEST_PLUGIN_DIR:-}" ] && [ -d "$LOOM_TEST_PLUGIN_DIR/fake" ]; then
  expect_ok "devices with a plugin that segfaults while loading" \
    "reason: probe process [0-9]* killed by signal 11 (SIGSEGV) while loading" \
    env LOOM_FAKE_MISBEHAVE=query_segv LOOM_PLUGIN_PATH="$LOOM_TEST_PLUGIN_DIR/fake" "$loom" devices
  expect_ok "devices lists the others beside it" "device cpu-simd://0" \
    env LOOM_FAKE_MISBEHAVE=query_segv LOOM_PLUGIN_PATH="$LOOM_TEST_PLUGIN_DIR/fake" "$loom" devices
  expect_error "run --device typo beside a crashing plugin" "did you mean 'cpu-simd://0'" \
    env LOOM_FAKE_MISBEHAVE=constructor_abort LOOM_PLUGIN_PATH="$LOOM_TEST_PLUGIN_DIR/fake" \
    "$loom" run "$prog" --device cpu-simd://1 --input x=random
  expect_ok "devices --isolate" "plugin fake 1.0.0  \[loaded, ABI 1.1, own process\]" \
    env LOOM_PLUGIN_PATH="$LOOM_TEST_PLUGIN_DIR/fake" "$loom" devices --isolate fake
  expect_error "--isolate with a misspelt plugin name" "plugin 'cpu-smid' is to be isolated, but no plugin of that name was found" \
    "$loom" devices --isolate cpu-smid
  expect_ok "run --isolate cpu-simd" "delegate mlp -> cpu-simd://0" \
    "$loom" run "$prog" --isolate cpu-simd --device cpu-simd --explain --input x=random
else
  skip "isolation checks" "LOOM_TEST_PLUGIN_DIR does not hold the fake plugin"
fi

expect_error "unknown subcommand" "subcommand is required" "$loom" frobnicate

if [ $failures -ne 0 ]; then echo "$failures CLI checks failed"; exit 1; fi
echo "all CLI checks passed"
