#!/usr/bin/env bash
# `loom estimate` and policy:fastest with the plugins' own estimates (CTest
# loom_estimate_cli): a tiny MLP compiled with a cpu-simd and a
# vulkan-compute variant gets an estimate from each device; on a graph this
# small the Vulkan submit round trip dominates, so policy:fastest puts
# cpu-simd first (and says so in --explain); the device models land in
# LOOM_DEVICE_MODEL_DIR; bad input is a one-line error.
# Usage: estimate_cli_test.sh <loom> <loom-test-make-onnx> <scratch dir>
set -u
loom="$1" make_onnx="$2" dir="$3"
rm -rf "$dir" && mkdir -p "$dir/models"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/cli_checks.sh"
export LOOM_DEVICE_MODEL_DIR="$dir/device-models"

expect_exit "loom-test-make-onnx" 0 "^0 " "$make_onnx" "$dir/models"
mlp="$dir/models/mlp.onnx"

# --- cpu-simd alone
expect_ok "compile for cpu-simd" "cpu-simd" \
  "$loom" compile "$mlp" -o "$dir/cpu.loom" --input-shape x=2x4 --target cpu-simd
expect_ok "estimate lists cpu-simd's estimate" "^  cpu-simd://0 .*variant 0 'cpu-simd' .* us$" \
  "$loom" estimate "$dir/cpu.loom"
expect_ok "estimate sums per device" "^  cpu-simd://0 .* us .*1 of 1 delegates$" \
  "$loom" estimate "$dir/cpu.loom"
expect_ok "estimate --json" '"estimate_ns": [1-9]' "$loom" estimate "$dir/cpu.loom" --json
ls "$dir/device-models"/cpu-simd-*.txt >/dev/null 2>&1 ||
  fail "no cpu-simd device model in LOOM_DEVICE_MODEL_DIR ($(ls "$dir/device-models" 2>&1))"
expect_ok "run --explain shows the estimate" \
  "chosen .*cpu-simd://0 \[policy:fastest, score 1, estimate [0-9.]* us\]" \
  "$loom" run "$dir/cpu.loom" --device policy:fastest --explain --input x=random
expect_error "estimate of a missing file" "cannot open" "$loom" estimate "$dir/missing.loom"
printf 'not a program' >"$dir/junk.loom"
expect_error "estimate of a damaged file" "junk.loom" "$loom" estimate "$dir/junk.loom"

# --- cpu-simd and vulkan-compute variants: the tiny graph goes to cpu-simd
if "$loom" devices | grep -q "device vulkan-compute://0"; then
  expect_ok "compile both variants" "vulkan-compute" \
    "$loom" compile "$mlp" -o "$dir/both.loom" --input-shape x=2x4 \
    --target vulkan-compute,cpu-simd --variants all
  out=$("$loom" estimate "$dir/both.loom" --json 2>"$dir/stderr") || fail "estimate both: $(cat "$dir/stderr")"
  first=$(grep -m1 '"device"' <<<"$out")
  grep -q 'cpu-simd://0' <<<"$first" || fail "estimate: cpu-simd is not first: $out"
  grep -q '"loader_key": "vulkan-compute"' <<<"$out" || fail "estimate: no vulkan-compute variant: $out"
  [ "$(grep -c '"estimate_ns": [1-9]' <<<"$out")" -ge 4 ] ||
    fail "estimate: expected an estimate for both variants and both device totals: $out"
  # The program prefers vulkan-compute (its first variant); policy:fastest
  # overrides that by the estimates.
  expect_ok "policy:fastest chooses cpu-simd for the tiny graph" \
    "chosen .*variant 1 'cpu-simd' on cpu-simd://0 \[policy:fastest, score 1, estimate" \
    "$loom" run "$dir/both.loom" --device policy:fastest --explain --input x=random
  expect_ok "and lists vulkan-compute after it, with its estimate" \
    "not tried .*'vulkan-compute' on vulkan-compute://0 \[policy:fastest, score 1, estimate" \
    "$loom" run "$dir/both.loom" --device policy:fastest --explain --input x=random
  ls "$dir/device-models"/vulkan-compute-*.txt >/dev/null 2>&1 || fail "no vulkan-compute device model"
else
  skip "cpu-simd vs vulkan-compute" "no Vulkan device (lavapipe: mesa-vulkan-drivers)"
fi

[ "$failures" -eq 0 ] && echo "estimate CLI: all checks passed"
exit $((failures > 0))
