#!/usr/bin/env bash
# `loom run --record`, `loom replay` and `loom capture` end to end (CTest
# loom_capture_cli): a capture of ONNX's HardSigmoid (alpha 0.5) on cpu-simd
# replays exactly on cpu-simd and catches cpu-simd-broken (HardSigmoid wrong
# for a non-default alpha); a capture of pytorch-converted/test_Conv2d
# replays within tolerance on fpga-stub and vulkan-compute, which compile
# the recorded graph, as they do for the benchmark zoo's MLP; --calls all
# replays every recorded call in order (on fpga-stub's and vulkan-compute's
# buffers, copies and fences too); info and dump summarize; bad input is a
# one-line error.
# The upgrade gate: tests/captures replayed by one command per plugin under
# its expectations file (SKIP where it has none for a capture).
# Usage: capture_cli_test.sh <loom> <onnx test data> <cpu-simd-broken manifest> <fixture>
#        <captures folder> <scratch>
set -u
loom="$1" data="$2" broken="$3" fixture="$4" captures="$5" dir="$6"
rm -rf "$dir" && mkdir -p "$dir"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cli_checks.sh"

hs="$data/node/test_hardsigmoid"
conv="$data/pytorch-converted/test_Conv2d"

# --- record on cpu-simd
expect_ok "run --record" "delegate .* -> cpu-simd://0" \
  "$loom" run "$hs/model.onnx" --device cpu-simd --input "x=$hs/test_data_set_0/input_0.pb" \
  --record "$dir/hs.loomcap"
[ -s "$dir/hs.loomcap" ] || fail "run --record wrote no capture"
expect_ok "capture info counts the execution" "^calls: .*executions: 1$" \
  "$loom" capture info "$dir/hs.loomcap"
expect_ok "capture info lists the plugin" "^plugin cpu-simd " "$loom" capture info "$dir/hs.loomcap"
expect_ok "capture info --json" '"executions": 1' "$loom" capture info "$dir/hs.loomcap" --json
expect_ok "capture dump has the execute with its tensors" \
  '"kind":"execute".*"shape":\[3,4,5\]' "$loom" capture dump "$dir/hs.loomcap"
calls=$("$loom" capture info "$dir/hs.loomcap" --json | sed -n 's/^  "calls": \([0-9]*\),$/\1/p')
lines=$("$loom" capture dump "$dir/hs.loomcap" | wc -l)
[ -n "$calls" ] && [ "$lines" -eq $((calls + 1)) ] ||
  fail "capture dump: $lines lines for $calls calls (one header line, one per call)"

# --- replay: exact on cpu-simd, in a child process and in this one
expect_ok "replay on cpu-simd matches" "1 executions, 1 matched, 0 differ" \
  "$loom" replay "$dir/hs.loomcap"
expect_ok "replay --in-process matches" "1 matched" "$loom" replay "$dir/hs.loomcap" --in-process

# --- a broken build of the plugin is caught
expect_exit "replay on cpu-simd-broken differs" 1 \
  "^first difference: call [0-9]* (execute, executable 0): differs: output 0 (f32, 60 elements): .* worst at index [0-9]*: recorded" \
  "$loom" replay "$dir/hs.loomcap" --plugin "$broken" --report "$dir/r.json" --junit "$dir/j.xml"
grep -q '"first_difference": {' "$dir/r.json" || fail "--report has no first_difference: $(head -c 400 "$dir/r.json")"
grep -q '"device": "cpu-simd-broken://0"' "$dir/r.json" || fail "--report does not name the device"
grep -q '<failure message="output 0' "$dir/j.xml" || fail "--junit has no failure: $(cat "$dir/j.xml")"

# --- another plugin compiles the recorded graph
expect_ok "record the convolution" "delegate .* -> cpu-simd://0" \
  "$loom" run "$conv/model.onnx" --device cpu-simd --input "0=$conv/test_data_set_0/input_0.pb" \
  --record "$dir/conv.loomcap"
expect_exit "fpga-stub is not bit-exact" 1 "differs" "$loom" replay "$dir/conv.loomcap" --plugin fpga-stub
expect_ok "fpga-stub within tolerance" "1 matched" \
  "$loom" replay "$dir/conv.loomcap" --plugin fpga-stub --tolerance f32=rel:1e-4,abs:1e-6
if "$loom" devices | grep -q "device vulkan-compute://0"; then
  expect_ok "vulkan-compute within tolerance" "on vulkan-compute://0: 1 executions, 1 matched" \
    "$loom" replay "$dir/conv.loomcap" --plugin vulkan-compute --tolerance rel:1e-4,abs:1e-6
else
  skip "replay on vulkan-compute" "no Vulkan device (lavapipe: mesa-vulkan-drivers)"
fi
# --- a benchmark-zoo model (make_zoo.py's MLP: MatMul, Add, Relu, Gemm),
# recorded on cpu-simd here and replayed exactly there and within tolerance
# on fpga-stub and vulkan-compute, which compile the recorded graph
zoo_script="$here/../../benchmarks/models/make_zoo.py"
if /usr/bin/python3 "$zoo_script" "$dir/zoo" --only mlp >"$dir/zoo.log" 2>&1; then
  expect_ok "record the zoo's mlp" "delegate .* -> cpu-simd://0" \
    "$loom" run "$dir/zoo/mlp.onnx" --device cpu-simd --input "input=$dir/zoo/mlp_input.npy" \
    --record "$dir/mlp.loomcap"
  expect_ok "zoo mlp: exact on cpu-simd" "on cpu-simd://0: 1 executions, 1 matched, 0 differ" \
    "$loom" replay "$dir/mlp.loomcap"
  expect_ok "zoo mlp: within tolerance on fpga-stub" "on fpga-stub://0: 1 executions, 1 matched" \
    "$loom" replay "$dir/mlp.loomcap" --plugin fpga-stub --tolerance f32=rel:1e-4,abs:1e-5
  if "$loom" devices | grep -q "device vulkan-compute://0"; then
    expect_ok "zoo mlp: within tolerance on vulkan-compute" "on vulkan-compute://0: 1 executions, 1 matched" \
      "$loom" replay "$dir/mlp.loomcap" --plugin vulkan-compute --tolerance f32=rel:1e-4,abs:1e-5
  fi
else
  fail "make_zoo.py --only mlp: $(cat "$dir/zoo.log") (scripts/setup.sh installs python3-onnx)"
fi
expect_exit "a plugin that cannot compile the graph fails the load" 1 \
  "first difference: call [0-9]* (executable_load.*HardSigmoid" \
  "$loom" replay "$dir/hs.loomcap" --plugin fpga-stub

# --- --calls all: every recorded call again, in order
expect_ok "replay --calls all on cpu-simd" \
  "on cpu-simd://0: [0-9]* calls (1 executions), [0-9]* matched, 0 differ, 0 failed, 0 skipped" \
  "$loom" replay "$dir/hs.loomcap" --calls all
expect_exit "--calls all catches the broken build at the execution" 1 \
  "^first difference: call [0-9]* (execute, executable 0): differs: output 0 (f32, 60 elements)" \
  "$loom" replay "$dir/hs.loomcap" --calls all --plugin "$broken" --junit "$dir/calls.xml"
grep -q 'name="call [0-9]* executable_load executable 0"' "$dir/calls.xml" ||
  fail "--calls all --junit lacks the load: $(head -c 600 "$dir/calls.xml")"
# fpga-stub keeps tensors in its own memory: buffers, copies, fences.
expect_ok "record the convolution on fpga-stub" "delegate .* -> fpga-stub://0" \
  "$loom" run "$conv/model.onnx" --device fpga-stub --input "0=$conv/test_data_set_0/input_0.pb" \
  --record "$dir/fpga.loomcap"
expect_ok "the fpga-stub capture copies to the host" '"buffer_copy_to_host": [1-9]' \
  "$loom" capture info "$dir/fpga.loomcap" --json
expect_ok "--calls all replays fpga-stub's buffers, copies and fences" \
  "on fpga-stub://0: [0-9]* calls (1 executions), [0-9]* matched, 0 differ, 0 failed, 0 skipped" \
  "$loom" replay "$dir/fpga.loomcap" --calls all --report "$dir/calls.json"
for kind in buffer_allocate buffer_copy_from_host buffer_copy_to_host fence_wait execute; do
  grep -A3 "\"kind\": \"$kind\"" "$dir/calls.json" | grep -q '"outcome": "match"' ||
    fail "--calls all --report has no matched $kind: $(head -c 600 "$dir/calls.json")"
done
grep -q '"mode": "calls"' "$dir/calls.json" || fail "--calls all --report does not say its mode"
# An execution that never signals (fpga-stub's hang fault) fails after
# --timeout; the plugin's process is started again for what follows.
expect_exit "--calls all: a hung execution fails after --timeout" 1 \
  "did not signal its fence [0-9]* within 300 ms; the plugin's process is started again" \
  "$loom" replay "$dir/fpga.loomcap" --calls all --timeout 300 --plugin-option fpga.fault.hang=1
expect_ok "--calls all on another plugin: cpu-simd compiles the graph" "0 differ, 0 failed" \
  "$loom" replay "$dir/fpga.loomcap" --calls all --plugin cpu-simd --tolerance f32=rel:1e-4,abs:1e-6
if "$loom" devices | grep -q "device vulkan-compute://0"; then
  expect_ok "record the convolution on vulkan-compute" "delegate .* -> vulkan-compute://0" \
    "$loom" run "$conv/model.onnx" --device vulkan-compute \
    --input "0=$conv/test_data_set_0/input_0.pb" --record "$dir/vk.loomcap"
  expect_ok "--calls all on vulkan-compute, isolated" "0 differ, 0 failed, 0 skipped" \
    "$loom" replay "$dir/vk.loomcap" --calls all
  expect_ok "--calls all on vulkan-compute, in process" "0 differ, 0 failed, 0 skipped" \
    "$loom" replay "$dir/vk.loomcap" --calls all --in-process
else
  skip "--calls all on vulkan-compute" "no Vulkan device (lavapipe: mesa-vulkan-drivers)"
fi
expect_error "--calls with an unknown mode" "--calls some: expected 'executions' (the default) or 'all'" \
  "$loom" replay "$dir/hs.loomcap" --calls some

# --- the frozen fixture
# Recorded on an AVX-512 machine: where oneDNN runs AVX2 kernels, which sum
# in another order, the convolution differs by a few ulps.
expect_ok "the v1 fixture replays on cpu-simd" "1 matched" "$loom" replay "$fixture" \
  --tolerance f32=rel:1e-5,abs:1e-6

# --- the upgrade gate: a folder of captures, expectations per plugin and device
expect_ok "gate on cpu-simd" "gate .* on cpu-simd://0: 3 passed, 0 failed, 0 skipped" \
  "$loom" replay "$captures" --plugin cpu-simd
# The zoo's text encoder, recorded on cpu-simd, replays exactly there.
expect_ok "the zoo's text encoder in the gate" "^PASS text_encoder.loomcap: 1 executions matched" \
  "$loom" replay "$captures" --plugin cpu-simd
expect_ok "gate on fpga-stub skips what it cannot run" "^SKIP hardsigmoid.loomcap: skip: " \
  "$loom" replay "$captures" --plugin fpga-stub
mkdir -p "$dir/gate"
cp "$captures"/*.loomcap "$dir/gate/"
printf '{"cpu-simd-broken://0": {"hardsigmoid.loomcap": "exact"}}\n' \
  >"$dir/gate/cpu-simd-broken.expectations.json"
expect_exit "gate catches the broken build" 1 \
  "^FAIL hardsigmoid.loomcap: call [0-9]* (execute): differs: output 0" \
  "$loom" replay "$dir/gate" --plugin "$broken" --junit "$dir/gate.xml"
grep -q "^SKIP conv2d.loomcap: no expectation for cpu-simd-broken://0" "$dir/stdout" ||
  fail "gate: a capture without an expectation is not a SKIP: $(cat "$dir/stdout")"
grep -q '<failure message="call' "$dir/gate.xml" || fail "gate --junit has no failure"
expect_error "gate without expectations for the plugin" "cpu-simd.expectations.json is missing" \
  "$loom" replay "$dir/gate" --plugin cpu-simd
printf '[1, 2]' >"$dir/gate/cpu-simd.expectations.json"
expect_error "gate with a malformed expectations file" "not a JSON object keyed by device URI" \
  "$loom" replay "$dir/gate" --plugin cpu-simd

# --- bad input
expect_error "missing capture" "cannot open capture" "$loom" replay "$dir/absent.loomcap"
printf 'not a capture' >"$dir/junk.loomcap"
expect_error "foreign file" "not a Loom capture" "$loom" capture info "$dir/junk.loomcap"
head -c 600 "$dir/hs.loomcap" >"$dir/cut.loomcap"
expect_error "truncated capture" "fails verification" "$loom" capture dump "$dir/cut.loomcap"
expect_error "bad tolerance" "unknown dtype 'i8'" "$loom" replay "$dir/hs.loomcap" --tolerance i8=exact
expect_error "unknown device" "device cpu-simd://7 is not one of" \
  "$loom" replay "$dir/hs.loomcap" --device cpu-simd://7
expect_error "unwritable --record" "cannot create capture file" \
  "$loom" run "$hs/model.onnx" --device cpu-simd --input "x=$hs/test_data_set_0/input_0.pb" \
  --record "$dir/no/such/folder/x.loomcap"

[ "$failures" -eq 0 ] && echo "capture CLI: all checks passed"
