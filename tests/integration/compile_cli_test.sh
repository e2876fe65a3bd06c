#!/usr/bin/env bash
# Drives `loom compile` the way a user does: a model compiled for the
# reference kernels and run, weights written to an .irpa archive
# (--params-out) and run from there, a target plugin taking some nodes, and
# bad input that must end in a one-line error (exit 1), never a crash.
# Usage: compile_cli_test.sh <loom> <loom-test-make-onnx> <fake plugin dir> <scratch dir>
set -u
loom="$1"
make_onnx="$2"
fake_dir="$3"
dir="$4"
rm -rf "$dir" && mkdir -p "$dir"
# shellcheck source=cli_checks.sh
source "$(dirname "$0")/cli_checks.sh"

mkdir -p "$dir/models"
"$make_onnx" "$dir/models" >/dev/null 2>&1 || fail "loom-test-make-onnx failed"
mlp="$dir/models/mlp.onnx"

# --- reference kernels only ------------------------------------------------
expect_ok "compile mlp" "reference" \
  "$loom" compile "$mlp" -o "$dir/mlp.loom" --input-shape x=2x4
[ -s "$dir/mlp.loom" ] || fail "compile wrote no program"
# Not a terminal: progress as plain lines on stdout, nothing on stderr.
expect_ok "progress lines" "^loom: compile: import" \
  "$loom" compile "$mlp" -o "$dir/mlp.loom" --input-shape x=2x4
[ -s "$dir/stderr" ] && fail "stderr not empty on success: $(cat "$dir/stderr")"
expect_ok "summary lists the reference ops" "MatMul" \
  "$loom" compile "$mlp" -o "$dir/mlp.loom" --input-shape x=2x4
expect_ok "run the compiled program" "y" \
  "$loom" run "$dir/mlp.loom" --input x=random
# The Shape/Gather/Unsqueeze/Concat chain folds away once N is bound: the
# program keeps MatMul, Add, Relu, Softmax and a Reshape with a constant shape.
summary=$("$loom" compile "$mlp" -o "$dir/mlp3.loom" --input-shape x=3,4 2>&1) ||
  fail "compile with N=3: $summary"
grep -q "Reshape" <<<"$summary" || fail "the Reshape is missing from the summary: $summary"
grep -q "Gather\|Concat\|Unsqueeze\|Shape " <<<"$summary" && fail "shape chain left in the program: $summary"
grep -q "[1-9][0-9]* folded" <<<"$summary" || fail "nothing folded: $summary"
expect_ok "dynamic batch of 3 runs" "y" \
  "$loom" run "$dir/mlp3.loom" --input x=random
expect_ok "inspect names the inputs" "x" "$loom" inspect "$dir/mlp.loom"

# --- weights in an archive -------------------------------------------------
mkdir -p "$dir/ext"
expect_ok "compile --params-out" "params: " \
  "$loom" compile "$mlp" -o "$dir/ext/mlp.loom" --input-shape x=2,4 \
  --params-out "$dir/ext/weights.irpa" --params-scope net
[ -s "$dir/ext/weights.irpa" ] || fail "--params-out wrote no archive"
expect_ok "archive holds W" "W" "$loom" params dump "$dir/ext/weights.irpa"
expect_ok "run with external weights" "y" "$loom" run "$dir/ext/mlp.loom" --input x=random
# Inline and external weights give bit-identical results (random inputs use a
# fixed seed).
expect_ok "inline run writes y" "y" \
  "$loom" run "$dir/mlp.loom" --input x=random --output y="$dir/y_inline.npy"
expect_ok "external run writes y" "y" \
  "$loom" run "$dir/ext/mlp.loom" --input x=random --output y="$dir/y_external.npy"
cmp -s "$dir/y_inline.npy" "$dir/y_external.npy" || fail "inline and external weights give different results"
inline_size=$(stat -c %s "$dir/mlp.loom")
ext_size=$(stat -c %s "$dir/ext/mlp.loom")
[ "$ext_size" -lt "$inline_size" ] || fail "program with external weights is not smaller ($ext_size >= $inline_size)"

expect_ok "--params-out into a new subfolder" "params: " \
  "$loom" compile "$mlp" -o "$dir/ext/sub.loom" --input-shape x=2x4 --params-out "$dir/ext/new/w.irpa"
expect_ok "run with weights in the subfolder" "y" "$loom" run "$dir/ext/sub.loom" --input x=random

# --- a target plugin ---------------------------------------------------------
expect_ok "fake takes Relu" "fake " \
  "$loom" compile "$mlp" -o "$dir/fake.loom" --input-shape x=2x4 --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=Relu

expect_ok "an op without a kernel that the plugin takes" "NoSuchOp" \
  "$loom" compile "$dir/models/mlp_bad_op.onnx" -o "$dir/fake_op.loom" --input-shape x=2x4 --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=NoSuchOp

# --- errors ------------------------------------------------------------------
expect_error "missing model" "nothing.onnx" \
  "$loom" compile "$dir/nothing.onnx" -o "$dir/x.loom"
expect_error "not a model" "" \
  "$loom" compile "$dir/mlp.loom" -o "$dir/x.loom"
expect_error "bad --input-shape" "input-shape" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --input-shape x=2xq
expect_error "unknown target" "no such plugin" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --input-shape x=2x4 --target nope --plugin-path "$fake_dir"
expect_error "params outside the program's folder" "params-out" \
  "$loom" compile "$mlp" -o "$dir/ext/x.loom" --input-shape x=2x4 --params-out "$dir/w.irpa"
expect_error "unsupported op" "NoSuchOp" \
  "$loom" compile "$dir/models/mlp_bad_op.onnx" -o "$dir/x.loom" --input-shape x=2x4
expect_error "missing -o" "output" "$loom" compile "$mlp"
expect_error "fake cannot compile" "plugin 'fake'" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --input-shape x=2x4 --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=Relu --plugin-option fake.compile_fault=bad_key

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all compile CLI checks passed"
