#!/usr/bin/env bash
# Drives `loom compile` the way a user does: a model compiled for the
# reference kernels and run, weights written to an .irpa archive
# (--params-out) and run from there, a target plugin taking some nodes, and
# bad input that must end in a one-line error (exit 1), never a crash.
# The numbers are checked against independent oracles: values worked out by
# hand for the MLP, and the expected outputs shipped with ONNX's test data.
# Usage: compile_cli_test.sh <loom> <loom-test-make-onnx> <loom-test-compare>
#                            <fake plugin dir> <scratch dir>
set -u
loom="$1"
make_onnx="$2"
compare="$3"
fake_dir="$4"
dir="$5"
rm -rf "$dir" && mkdir -p "$dir"
# shellcheck source=cli_checks.sh
source "$(dirname "$0")/cli_checks.sh"

mkdir -p "$dir/models"
expect_exit "loom-test-make-onnx" 0 "^0 " "$make_onnx" "$dir/models"
mlp="$dir/models/mlp.onnx"

# --- reference kernels only ------------------------------------------------
expect_ok "compile mlp" "^reference  *-  *5  *-  *Add,MatMul,Relu,Reshape,Softmax$" \
  "$loom" compile "$mlp" -o "$dir/mlp.loom" --target none --input-shape x=2x4
[ -s "$dir/mlp.loom" ] || fail "compile wrote no program"
# Not a terminal: progress as plain lines on stdout, nothing on stderr.
expect_ok "progress lines" "^loom: compile: import" \
  "$loom" compile "$mlp" -o "$dir/mlp.loom" --target none --input-shape x=2x4
[ -s "$dir/stderr" ] && fail "stderr not empty on success: $(cat "$dir/stderr")"
expect_ok "summary names the model" "^compiled $mlp -> $dir/mlp.loom (opset 17, 12 nodes" \
  "$loom" compile "$mlp" -o "$dir/mlp.loom" --target none --input-shape x=2x4
expect_ok "run the compiled program" "^y: f32\[2, 512\] = \[" \
  "$loom" run "$dir/mlp.loom" --input x=random
# x = 0 by hand: h = x W = 0, a = h + b = b with b[i] = 0.1 * (i % 3), Relu
# keeps it, and Softmax over the 512 values has the denominator
# S = 171 + 171 e^0.1 + 170 e^0.2 = 567.62270, so every row starts
# 1/S = 0.00176173, e^0.1/S = 0.00194702, e^0.2/S = 0.00215179.
npy_f32_zeros() {  # npy_f32_zeros <file> <dim>...: a version 1.0 .npy of zeros
  local file=$1; shift
  local shape count=1 d
  for d in "$@"; do shape+="$d, "; count=$((count * d)); done
  local dict="{'descr': '<f4', 'fortran_order': False, 'shape': (${shape%, }), }"
  local hlen=$(( (10 + ${#dict} + 1 + 63) / 64 * 64 - 10 ))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((hlen % 256)))\\x$(printf %02x $((hlen / 256)))";
    printf '%s' "$dict"; printf '%*s' $((hlen - ${#dict} - 1)) ''; printf '\n';
    head -c $((count * 4)) /dev/zero; } > "$file"
}
npy_f32_zeros "$dir/x0.npy" 2 4
expect_ok "mlp on x = 0 gives the hand-computed softmax" \
  "^y: f32\[2, 512\] = \[0.00176173, 0.00194702, 0.00215179, 0.00176173," \
  "$loom" run "$dir/mlp.loom" --input "x=$dir/x0.npy"
# The Shape/Gather/Unsqueeze/Concat chain folds away once N is bound: the
# program keeps MatMul, Add, Relu, Softmax and a Reshape with a constant shape.
summary=$("$loom" compile "$mlp" -o "$dir/mlp3.loom" --target none --input-shape x=3,4 2>&1) ||
  fail "compile with N=3: $summary"
grep -q "Reshape" <<<"$summary" || fail "the Reshape is missing from the summary: $summary"
grep -q "Gather\|Concat\|Unsqueeze\|Shape " <<<"$summary" && fail "shape chain left in the program: $summary"
grep -q "[1-9][0-9]* folded" <<<"$summary" || fail "nothing folded: $summary"
expect_ok "dynamic batch of 3 runs" "^y: f32\[3, 512\] = \[" \
  "$loom" run "$dir/mlp3.loom" --input x=random
expect_ok "inspect shows the signature" "main(x: f32\[2, 4\]) -> (y: f32\[2, 512\])" \
  "$loom" inspect "$dir/mlp.loom"

# --- open shapes: compiled once, N bound per run ---------------------------
expect_ok "compile with N open" "^  x: f32 \[?(N), 4\]$" \
  "$loom" compile "$mlp" -o "$dir/open.loom" --target cpu-simd
expect_ok "inspect shows the open signature" "main(x: f32\[?, 4\])" "$loom" inspect "$dir/open.loom"
expect_ok "open program at N=2 gives the hand-computed softmax" \
  "^y: f32\[2, 512\] = \[0.00176173, 0.00194702, 0.00215179, 0.00176173," \
  "$loom" run "$dir/open.loom" --input "x=$dir/x0.npy"
npy_f32_zeros "$dir/x5.npy" 5 4
expect_ok "open program at N=5" "^binding: x=\[5, 4\]" "$loom" run "$dir/open.loom" --input "x=$dir/x5.npy"
expect_ok "open program: --json names the binding" '"binding": "x=\[5, 4\]"' \
  "$loom" run "$dir/open.loom" --input "x=$dir/x5.npy" --json
npy_f32_zeros "$dir/x53.npy" 5 3
expect_error "open program: a fixed dimension differs" \
  "input 'x' dimension 1 is fixed at 4 by the program, got 3" \
  "$loom" run "$dir/open.loom" --input "x=$dir/x53.npy"
expect_error "open program: random has no shape" "input 'x' has open dimensions \[?, 4\]" \
  "$loom" run "$dir/open.loom" --input x=random
mkdir -p "$dir/open_ext"
expect_ok "compile with N open, weights in an archive" "^params: " \
  "$loom" compile "$mlp" -o "$dir/open_ext/open.loom" --target cpu-simd --params-out "$dir/open_ext/w.irpa"
expect_ok "open program with external weights at N=2" \
  "^y: f32\[2, 512\] = \[0.00176173, 0.00194702, 0.00215179, 0.00176173," \
  "$loom" run "$dir/open_ext/open.loom" --input "x=$dir/x0.npy"
# Compiled once (format 1.4) for the reference kernels when the graph's
# structure does not follow the binding (ONNX's test_relu, from the test data
# scripts/setup.sh installs); per binding otherwise, saying why: this mlp
# computes its Reshape target from Shape(x), and fpga-stub compiles fixed
# shapes only.
relu=/usr/share/libonnx-testdata/data/node/test_relu/model.onnx
[ -f "$relu" ] || fail "$relu is missing (libonnx-testdata; run scripts/setup.sh)"
expect_ok "compile once with two dimensions open" "^open shapes: compiled once for every binding" \
  "$loom" compile "$relu" -o "$dir/once.loom" --target none --input-shape x=?,4,?
npy_f32_zeros "$dir/r243.npy" 2 4 3
expect_ok "compiled once: [2, 4, 3] is bound, not compiled" \
  "^binding: x=\[2, 4, 3\] (open shapes: the program, compiled once, bound these shapes" \
  "$loom" run "$dir/once.loom" --input "x=$dir/r243.npy"
expect_ok "compiled once: the output has the bound shape" "^y: f32\[2, 4, 3\] = \[0, 0, 0," \
  "$loom" run "$dir/once.loom" --input "x=$dir/r243.npy"
expect_ok "compiled once: --json says so" '"compiled_once": true' \
  "$loom" run "$dir/once.loom" --input "x=$dir/r243.npy" --json
# The mlp's Reshape target [N, -1] comes from a Shape chain; it is spelled
# [0, -1] for every binding (a structure that follows the binding, such as
# [-1, N], is compiled per binding: tests/unit/compiler/open_shapes_test.cpp).
expect_ok "a shape chain spelled for every binding: compiled once" \
  "^open shapes: compiled once for every binding" \
  "$loom" compile "$mlp" -o "$dir/chain_once.loom" --target none
npy_f32_zeros "$dir/x3.npy" 3 4
expect_ok "the shape chain compiled once runs at N = 3" "^y: f32\[3, 512\] = \[0.00176173," \
  "$loom" run "$dir/chain_once.loom" --input "x=$dir/x3.npy"
expect_ok "a fixed-shape target: compiled per binding, and why" \
  "compiled for each binding when the program runs (fake compiles fixed shapes only" \
  "$loom" compile "$relu" -o "$dir/per_binding.loom" --input-shape x=?,4,? --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=Relu
expect_ok "compile with N bounded" "^  x: f32 \[?(N 1..4), 4\]$" \
  "$loom" compile "$mlp" -o "$dir/bounded.loom" --target none --input-shape x=1..4,4
expect_error "bounded program: N over its bound" "dimension 0 ('N') is 5, outside its declared range 1..4" \
  "$loom" run "$dir/bounded.loom" --input "x=$dir/x5.npy"
expect_error "upside-down range" "'4..1' is an empty range" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --target none --input-shape x=4..1,4

# --- weights in an archive -------------------------------------------------
mkdir -p "$dir/ext"
expect_ok "compile --params-out" "params: " \
  "$loom" compile "$mlp" -o "$dir/ext/mlp.loom" --target none --input-shape x=2,4 \
  --params-out "$dir/ext/weights.irpa" --params-scope net
[ -s "$dir/ext/weights.irpa" ] || fail "--params-out wrote no archive"
expect_ok "archive holds W" "data 'W'  length 8192" "$loom" params dump "$dir/ext/weights.irpa"
expect_ok "run with external weights" "^y: f32\[2, 512\] = \[0.00176173, 0.00194702" \
  "$loom" run "$dir/ext/mlp.loom" --input "x=$dir/x0.npy"
# Inline and external weights give bit-identical results (random inputs use a
# fixed seed).
expect_ok "inline run writes y" "^y: f32\[2, 512\]" \
  "$loom" run "$dir/mlp.loom" --input x=random --output y="$dir/y_inline.npy"
expect_ok "external run writes y" "^y: f32\[2, 512\]" \
  "$loom" run "$dir/ext/mlp.loom" --input x=random --output y="$dir/y_external.npy"
cmp -s "$dir/y_inline.npy" "$dir/y_external.npy" || fail "inline and external weights give different results"
inline_size=$(stat -c %s "$dir/mlp.loom")
ext_size=$(stat -c %s "$dir/ext/mlp.loom")
[ "$ext_size" -lt "$inline_size" ] || fail "program with external weights is not smaller ($ext_size >= $inline_size)"

expect_ok "--params-out into a new subfolder" "params: " \
  "$loom" compile "$mlp" -o "$dir/ext/sub.loom" --target none --input-shape x=2x4 --params-out "$dir/ext/new/w.irpa"
expect_ok "run with weights in the subfolder" "^y: f32\[2, 512\] = \[0.00176173" \
  "$loom" run "$dir/ext/sub.loom" --input "x=$dir/x0.npy"

# --- a target plugin ---------------------------------------------------------
expect_ok "fake takes Relu" "^fake  *1  *1  *[0-9]*  *Relu$" \
  "$loom" compile "$mlp" -o "$dir/fake.loom" --input-shape x=2x4 --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=Relu

expect_ok "an op without a kernel that the plugin takes" "NoSuchOp" \
  "$loom" compile "$dir/models/mlp_bad_op.onnx" -o "$dir/fake_op.loom" --input-shape x=2x4 --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=NoSuchOp

# --- the ONNX test data's expected outputs -------------------------------------
# Models exported by ONNX's generators and by PyTorch, compiled for the
# reference kernels and for cpu-simd, run on the shipped inputs, and compared
# with the shipped outputs (test-onnx's tolerances).
data=/usr/share/libonnx-testdata/data
if [ ! -d "$data/node/test_gemm_all_attributes" ] || [ ! -d "$data/pytorch-converted/test_Conv2d" ]; then
  skip "ONNX test data oracle" "$data is missing test_gemm_all_attributes or test_Conv2d (libonnx-testdata)"
else
  for target in reference cpu-simd; do
    targets=(--target none)
    [ "$target" = reference ] || targets=(--target "$target")
    gemm="$data/node/test_gemm_all_attributes"
    set0="$gemm/test_data_set_0"
    expect_ok "compile gemm for $target" "^compiled .*test_gemm_all_attributes/model.onnx" \
      "$loom" compile "$gemm/model.onnx" -o "$dir/gemm_$target.loom" "${targets[@]}"
    expect_ok "run gemm on $target" "wrote y to $dir/gemm_$target/y.npy" \
      "$loom" run "$dir/gemm_$target.loom" --input "a=$set0/input_0.pb" --input "b=$set0/input_1.pb" \
      --input "c=$set0/input_2.pb" --output-dir "$dir/gemm_$target"
    expect_ok "gemm on $target matches the test data" "^same: " \
      "$compare" "$dir/gemm_$target/y.npy" "$set0/output_0.pb"
    conv="$data/pytorch-converted/test_Conv2d"
    set0="$conv/test_data_set_0"
    expect_ok "compile Conv2d for $target" "^compiled .*test_Conv2d/model.onnx" \
      "$loom" compile "$conv/model.onnx" -o "$dir/conv_$target.loom" "${targets[@]}"
    expect_ok "run Conv2d on $target" "wrote 3 to $dir/conv_$target/3.npy" \
      "$loom" run "$dir/conv_$target.loom" --input "0=$set0/input_0.pb" --output-dir "$dir/conv_$target"
    expect_ok "Conv2d on $target matches the test data" "^same: " \
      "$compare" "$dir/conv_$target/3.npy" "$set0/output_0.pb"
  done
  # --verbose shows plugins' info lines: cpu-simd reports the weights it packed.
  "$loom" run "$dir/conv_cpu-simd.loom" --input "0=$set0/input_0.pb" --verbose --repeat 2 \
    >/dev/null 2>"$dir/verbose.err"
  grep -q "^loom: info: cpu-simd: executable: packed 1 weight tensor once, on the first run: [0-9.]* KiB in oneDNN's layouts" \
    "$dir/verbose.err" || fail "run --verbose: no packing report from cpu-simd: $(cat "$dir/verbose.err")"
  [ "$(grep -c "packed 1 weight tensor" "$dir/verbose.err")" = 1 ] ||
    fail "run --verbose: the packing report is not written exactly once: $(cat "$dir/verbose.err")"
  "$loom" run "$dir/conv_cpu-simd.loom" --input "0=$set0/input_0.pb" >/dev/null 2>"$dir/quiet.err"
  [ ! -s "$dir/quiet.err" ] || fail "run without --verbose printed on stderr: $(cat "$dir/quiet.err")"
  # --variants all: the Conv2d model's one subgraph gets a vulkan-compute
  # variant (it supports the node too) and a reference one; each runs, chosen
  # by --device, and matches the test data.
  conv="$data/pytorch-converted/test_Conv2d"
  set0="$conv/test_data_set_0"
  expect_ok "compile Conv2d --variants all" "^vulkan-compute  *0  *0  *1 " \
    "$loom" compile "$conv/model.onnx" -o "$dir/conv_all.loom" --target cpu-simd,vulkan-compute \
    --variants all
  devices=(cpu-simd reference-only)
  if "$loom" devices | grep -q "device vulkan-compute://0"; then devices+=(vulkan-compute); fi
  for device in "${devices[@]}"; do
    # A selector no variant's plugin matches but cpu-simd's device: fpga-stub
    # serves none of the variants, so the reference variant runs.
    selector="$device"
    [ "$device" = reference-only ] && selector=fpga-stub
    expect_ok "Conv2d variant for $device" "wrote 3 to $dir/conv_all_$device/3.npy" \
      "$loom" run "$dir/conv_all.loom" --device "$selector" --input "0=$set0/input_0.pb" \
      --output-dir "$dir/conv_all_$device"
    expect_ok "Conv2d variant for $device matches the test data" "^same: " \
      "$compare" "$dir/conv_all_$device/3.npy" "$set0/output_0.pb"
  done
  expect_ok "the reference variant ran" "delegate cpu-simd_0 -> reference (loom.reference)" \
    "$loom" run "$dir/conv_all.loom" --device fpga-stub --input "0=$set0/input_0.pb"
  # No --target: every plugin found that compiles, accelerators first
  # (fpga-stub, then the CPUs), said in the summary, with --variants all:
  # the one program runs on each plugin and on the reference kernels alone.
  expect_ok "compile Conv2d with no --target" \
    "^targets: fpga-stub,cpu-simd[,a-z-]* (every plugin found that compiles, accelerators first" \
    "$loom" compile "$conv/model.onnx" -o "$dir/conv_default.loom"
  expect_ok "no --target makes every variant" "^reference  *-  *0  *1 " \
    "$loom" compile "$conv/model.onnx" -o "$dir/conv_default.loom"
  expect_ok "no --target: --json says the targets were the default" '"default_targets": true' \
    "$loom" compile "$conv/model.onnx" -o "$dir/conv_default.loom" --json
  expect_ok "--target none keeps every node on the reference kernels" "^reference  *-  *1  *-  *Conv$" \
    "$loom" compile "$conv/model.onnx" -o "$dir/conv_none.loom" --target none
  selectors=("" cpu-simd fpga-stub)
  if "$loom" devices | grep -q "device vulkan-compute://0"; then selectors+=(vulkan-compute); fi
  for selector in "${selectors[@]}"; do
    what="default-target Conv2d on ${selector:-the default device}"
    device_args=()
    [ -n "$selector" ] && device_args=(--device "$selector")
    expect_ok "$what" "wrote 3 to $dir/conv_default_$selector/3.npy" \
      "$loom" run "$dir/conv_default.loom" "${device_args[@]}" --input "0=$set0/input_0.pb" \
      --output-dir "$dir/conv_default_$selector"
    expect_ok "$what matches the test data" "^same: " \
      "$compare" "$dir/conv_default_$selector/3.npy" "$set0/output_0.pb"
  done
  expect_error "--target none with a plugin" "--target none means the reference kernels only" \
    "$loom" compile "$conv/model.onnx" -o "$dir/x.loom" --target none,cpu-simd
  # The oracle can fail: another data set's expected output does not match.
  expect_exit "a wrong expected output is told apart" 1 "^differ: " \
    "$compare" "$dir/gemm_reference/y.npy" "$data/node/test_gemm_default_zero_bias/test_data_set_0/output_0.pb"
fi

# --- errors ------------------------------------------------------------------
expect_error "missing model" "nothing.onnx" \
  "$loom" compile "$dir/nothing.onnx" -o "$dir/x.loom" --target none
expect_error "not a model" "mlp.loom: not an ONNX model" \
  "$loom" compile "$dir/mlp.loom" -o "$dir/x.loom" --target none
expect_error "bad --input-shape" "input-shape" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --target none --input-shape x=2xq
# Huge bound dimensions compile (nothing of their size is allocated) and are
# refused when run, before anything is allocated: 2^40 rows exceed what a
# plan may address; 2^30 rows (a 2 TiB intermediate) exceed the default
# --max-tensor-bytes (half the machine's memory); 2^26 rows a given one.
expect_ok "compile 2^40 rows" "^program: " \
  "$loom" compile "$mlp" -o "$dir/huge40.loom" --target none --input-shape x=1099511627776x4
expect_error "run 2^40 rows" "tensor of shape \[1099511627776, 512\] is too large" \
  "$loom" run "$dir/huge40.loom" --input x=random
expect_ok "compile 2^30 rows" "^program: " \
  "$loom" compile "$mlp" -o "$dir/huge30.loom" --target none --input-shape x=1073741824x4
expect_error "run 2^30 rows" "of function 'main' takes [0-9]* bytes, more than the limit of" \
  "$loom" run "$dir/huge30.loom" --input x=random
expect_ok "compile 2^26 rows" "^program: " \
  "$loom" compile "$mlp" -o "$dir/huge26.loom" --target none --input-shape x=67108864x4
expect_error "run 2^26 rows under --max-tensor-bytes" \
  "input 'x' (f32 \[67108864, 4\]) of function 'main' takes 1073741824 bytes, more than the limit of 1048576" \
  "$loom" run "$dir/huge26.loom" --input x=random --max-tensor-bytes 1048576
expect_error "unknown target" "no such plugin" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --input-shape x=2x4 --target nope --plugin-path "$fake_dir"
expect_error "params outside the program's folder" "params-out" \
  "$loom" compile "$mlp" -o "$dir/ext/x.loom" --target none --input-shape x=2x4 --params-out "$dir/w.irpa"
expect_error "unsupported op" "NoSuchOp" \
  "$loom" compile "$dir/models/mlp_bad_op.onnx" -o "$dir/x.loom" --target none --input-shape x=2x4
expect_error "missing -o" "output" "$loom" compile "$mlp"
expect_error "fake cannot compile" "plugin 'fake'" \
  "$loom" compile "$mlp" -o "$dir/x.loom" --input-shape x=2x4 --target fake \
  --plugin-path "$fake_dir" --plugin-option fake.compile_ops=Relu --plugin-option fake.compile_fault=bad_key

# --- sequences and optionals as inputs and outputs (docs/control-flow.md) ---
idseq=/usr/share/libonnx-testdata/data/node/test_identity_sequence/model.onnx
optget=/usr/share/libonnx-testdata/data/node/test_optional_get_element/model.onnx
if [ -f "$idseq" ] && [ -f "$optget" ]; then
  expect_ok "compile a sequence model" "^compiled" "$loom" compile "$idseq" -o "$dir/idseq.loom" --target none
  npy_f32_zeros "$dir/s0.npy" 2 3
  npy_f32_zeros "$dir/s1.npy" 2 2
  expect_ok "a sequence in and out" "^y: a sequence of 2 tensors" \
    "$loom" run "$dir/idseq.loom" --input "x=$dir/s0.npy,$dir/s1.npy" --output-dir "$dir/seqout"
  [ -s "$dir/seqout/y_0.npy" ] && [ -s "$dir/seqout/y_1.npy" ] || fail "no y_0.npy and y_1.npy written"
  [ -e "$dir/seqout/y_2.npy" ] && fail "a third element written"
  cmp -s "$dir/seqout/y_1.npy" "$dir/s1.npy" || fail "y_1.npy differs from the element given"
  expect_ok "an empty sequence" "^y: a sequence of 0 tensors" "$loom" run "$dir/idseq.loom" --input "x=[]"
  expect_ok "one element" "^y\[0\]: f32\[2, 3\]" "$loom" run "$dir/idseq.loom" --input "x=$dir/s0.npy,"
  expect_error "a tensor for a sequence input" "input 'x' of function 'main' takes a sequence of f32 tensors, got a tensor" \
    "$loom" run "$dir/idseq.loom" --input "x=$dir/s0.npy"
  expect_error "a missing element file" "element 1 ($dir/nothing.npy)" \
    "$loom" run "$dir/idseq.loom" --input "x=$dir/s0.npy,$dir/nothing.npy"
  expect_ok "compile an optional model" "^compiled" "$loom" compile "$optget" -o "$dir/optget.loom" --target none
  expect_ok "an optional holding a tensor" "^output: f32\[2, 2\]" \
    "$loom" run "$dir/optget.loom" --input "optional_input=$dir/s1.npy"
  expect_error "an empty optional read" "OptionalGetElement of 'optional_input': the optional is empty" \
    "$loom" run "$dir/optget.loom" --input "optional_input=none"
else
  skip "sequence and optional I/O" "libonnx-testdata lacks test_identity_sequence or test_optional_get_element"
fi

if [ "$failures" -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all compile CLI checks passed"
