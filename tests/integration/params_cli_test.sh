#!/usr/bin/env bash
# Drives `loom params` the way a user does: round trips through .irpa
# archives (create -> dump -> extract gives back the input bytes), linked
# archives and repack, strip, splat, rename, --from-onnx, and bad input that
# must end in a one-line error (exit 1), never a crash or a silent success.
# Usage: params_cli_test.sh <loom> <loom-test-make-irpa> <loom-test-make-onnx|none> <scratch dir>
set -u
loom="$1"
make_irpa="$2"
make_onnx="$3"
dir="$4"
rm -rf "$dir" && mkdir -p "$dir"
# shellcheck source=cli_checks.sh
source "$(dirname "$0")/cli_checks.sh"

# same <description> <file> <file>
same() { cmp -s "$2" "$3" || fail "$1: $2 and $3 differ"; }

# The data bytes of a version 1.0 .npy as hex: they follow the 10-byte
# preamble and the header, whose length is the u16 at offset 8.
npy_data_hex() {
  local hlen
  hlen=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' ')
  tail -c +$((10 + hlen + 1)) "$1" | od -An -v -tx1 | tr -d ' \n'
}

params() { "$loom" params "$@"; }

# --- inputs: the demo's .npy files ---------------------------------------
expect_ok "demo writes the inputs" "passed" "$loom" demo --save-dir "$dir/demo"
x="$dir/demo/input_x.npy"    # f32[4, 64]
y="$dir/demo/expected_y.npy" # f32[4, 10]

# --- create -> dump -> extract ----------------------------------------------
expect_ok "create" "^wrote 2 entries to $dir/a.irpa$" params create -o "$dir/a.irpa" "x=$x" "y=$y"
expect_ok "dump lists x" "data 'x'  length 1024" params dump "$dir/a.irpa"
expect_ok "dump shows metadata" '"dtype":"f32","shape":\[4,64\]' params dump "$dir/a.irpa"
expect_ok "dump --json" '"storage_segment"' params dump "$dir/a.irpa" --json
expect_ok "extract x" "^wrote entry 'x' as f32\[4, 64\] to $dir/x.npy$" params extract "$dir/a.irpa" x -o "$dir/x.npy"
expect_ok "extract y" "^wrote entry 'y' as f32\[4, 10\]" params extract "$dir/a.irpa" y -o "$dir/y.npy"
same "create/extract x round trip" "$x" "$dir/x.npy"
same "create/extract y round trip" "$y" "$dir/y.npy"
expect_ok "extract --raw" "^wrote entry 'y' as u8\[160\]" params extract "$dir/a.irpa" y -o "$dir/y_raw.npy" --raw
[ "$(npy_data_hex "$dir/y_raw.npy")" = "$(npy_data_hex "$y")" ] || fail "--raw: data bytes differ"
grep -q "'|u1'" "$dir/y_raw.npy" || fail "--raw: not a u8 array"
expect_ok "create --alignment 4096" "at 4096 (aligned 4096)" \
  bash -c "'$loom' params create -o '$dir/al.irpa' --alignment 4096 'x=$x' && '$loom' params dump '$dir/al.irpa'"

# --- linked archives: --append, then repack ---------------------------------
cp "$dir/a.irpa" "$dir/chain.irpa"
expect_ok "create --append" "^appended 2 entries to $dir/chain.irpa$" params create -o "$dir/chain.irpa" --append "y=$x" "z=$y"
expect_ok "dump shows two headers" "2 header(s)" params dump "$dir/chain.irpa"
expect_ok "dump: second header" "header #1" params dump "$dir/chain.irpa"
expect_ok "extract appended y" "^wrote entry 'y' as f32\[4, 64\]" params extract "$dir/chain.irpa" y -o "$dir/chain_y.npy"
same "later entry wins" "$x" "$dir/chain_y.npy"
expect_ok "repack" "^wrote 3 entries to $dir/packed.irpa (repack)$" params repack "$dir/chain.irpa" -o "$dir/packed.irpa"
expect_ok "repacked has one header" "1 header(s), 3 entries" params dump "$dir/packed.irpa"
for name in x y z; do
  expect_ok "extract chain '$name'" "^wrote entry '$name'" \
    params extract "$dir/chain.irpa" "$name" -o "$dir/chain_$name.npy"
  expect_ok "extract packed '$name'" "^wrote entry '$name'" \
    params extract "$dir/packed.irpa" "$name" -o "$dir/packed_$name.npy"
  same "repack keeps '$name'" "$dir/chain_$name.npy" "$dir/packed_$name.npy"
done
head -c 4096 "$dir/packed.irpa" | grep -q "IRPA" || fail "repack: header not at the start"

# --- strip, splat, rename ---------------------------------------------------
expect_ok "strip" "^wrote 2 entries to $dir/stripped.irpa (strip)$" params strip "$dir/a.irpa" -o "$dir/stripped.irpa"
expect_ok "stripped entries are zero splats" "splat 'x'  length 1024  pattern 0x00 (1 bytes)" \
  params dump "$dir/stripped.irpa"
expect_ok "stripped keeps metadata" '"dtype":"f32","shape":\[4,10\]' params dump "$dir/stripped.irpa"
expect_ok "extract stripped x" "^wrote entry 'x' as f32\[4, 64\]" params extract "$dir/stripped.irpa" x -o "$dir/zx.npy"
[ "$(stat -c %s "$dir/zx.npy")" = "$(stat -c %s "$x")" ] || fail "strip: size changed"
[ -z "$(npy_data_hex "$dir/zx.npy" | tr -d 0)" ] || fail "strip: data not zero"
[ "$(head -c 128 "$dir/zx.npy" | od -An -tx1)" = "$(head -c 128 "$x" | od -An -tx1)" ] \
  || fail "strip: .npy header (dtype/shape) changed"

expect_ok "splat" "^wrote 2 entries to $dir/splat.irpa (splat)$" params splat "$dir/a.irpa" -o "$dir/splat.irpa" --key x --pattern 0x3f800000
expect_ok "dump shows the pattern" "splat 'x'  length 1024  pattern 0x3f800000 (4 bytes)" \
  params dump "$dir/splat.irpa"
expect_ok "dump --json pattern" '"pattern": "0x3f800000"' params dump "$dir/splat.irpa" --json
expect_ok "extract splat" "^wrote entry 'x' as f32\[4, 64\]" params extract "$dir/splat.irpa" x -o "$dir/ones.npy"
[ "$(npy_data_hex "$dir/ones.npy")" = "$(printf '0000803f%.0s' $(seq 256))" ] || fail "splat: data is not f32 1.0"
expect_ok "extract splat y" "^wrote entry 'y'" params extract "$dir/splat.irpa" y -o "$dir/splat_y.npy"
same "splat leaves other entries" "$y" "$dir/splat_y.npy"
expect_ok "splat 16-byte pattern" "^wrote 2 entries to $dir/splat16.irpa (splat)$" params splat "$dir/a.irpa" -o "$dir/splat16.irpa" --key y \
  --pattern 0x000102030405060708090a0b0c0d0e0f
expect_ok "16-byte pattern round trips" "pattern 0x000102030405060708090a0b0c0d0e0f (16 bytes)" \
  params dump "$dir/splat16.irpa"

expect_ok "rename" "^wrote 2 entries to $dir/renamed.irpa (rename)$" params rename "$dir/a.irpa" -o "$dir/renamed.irpa" x=weights y=x
expect_ok "renamed entry" "data 'weights'" params dump "$dir/renamed.irpa"
expect_ok "extract renamed weights" "^wrote entry 'weights' as f32\[4, 64\]" \
  params extract "$dir/renamed.irpa" weights -o "$dir/renamed_w.npy"
same "rename keeps the bytes" "$x" "$dir/renamed_w.npy"
expect_ok "extract renamed x" "^wrote entry 'x' as f32\[4, 10\]" \
  params extract "$dir/renamed.irpa" x -o "$dir/renamed_x.npy"
same "swap-style rename" "$y" "$dir/renamed_x.npy"
cp "$dir/a.irpa" "$dir/inplace.irpa"
expect_ok "rename in place" "^wrote 2 entries to $dir/inplace.irpa (rename)$" params rename "$dir/inplace.irpa" -o "$dir/inplace.irpa" x=w2
expect_ok "in-place result" "data 'w2'" params dump "$dir/inplace.irpa"

# --- external, splat and odd entries (written by the library) ---------------
mkdir -p "$dir/ext" "$dir/elsewhere"
expect_exit "loom-test-make-irpa" 0 "^wrote $dir/ext/ext.irpa$" "$make_irpa" "$dir/ext"
[ -s "$dir/ext/ext.irpa" ] || fail "loom-test-make-irpa wrote no ext.irpa"
expect_ok "dump external" "external 'outer'  length 32  file 'ext.bin' at 64" params dump "$dir/ext/ext.irpa"
for name in inner outer ones; do
  expect_ok "extract $name" "^wrote entry '$name'" params extract "$dir/ext/ext.irpa" "$name" -o "$dir/ext_$name.npy"
  same "extract $name" "$dir/ext/$name.npy" "$dir/ext_$name.npy"
done
expect_ok "extract without metadata is u8" "^wrote entry 'odd' as u8\[6\]" params extract "$dir/ext/ext.irpa" odd -o "$dir/odd.npy"
grep -q "'|u1'" "$dir/odd.npy" && [ "$(npy_data_hex "$dir/odd.npy")" = "010203040506" ] \
  || fail "odd entry: not the 6 bytes as u8"
expect_ok "repack beside the input keeps external" "external 'outer'" \
  bash -c "'$loom' params repack '$dir/ext/ext.irpa' -o '$dir/ext/packed.irpa' && '$loom' params dump '$dir/ext/packed.irpa'"
expect_error "repack elsewhere with external" "--inline-external" \
  params repack "$dir/ext/ext.irpa" -o "$dir/elsewhere/packed.irpa"
expect_ok "repack --inline-external" "data 'outer'" \
  bash -c "'$loom' params repack '$dir/ext/ext.irpa' -o '$dir/elsewhere/inl.irpa' --inline-external && '$loom' params dump '$dir/elsewhere/inl.irpa'"
expect_ok "extract inlined outer" "^wrote entry 'outer'" \
  params extract "$dir/elsewhere/inl.irpa" outer -o "$dir/inl_outer.npy"
same "inlined external" "$dir/ext/outer.npy" "$dir/inl_outer.npy"
expect_ok "strip elsewhere needs no external file" "splat 'outer'" \
  bash -c "'$loom' params strip '$dir/ext/ext.irpa' -o '$dir/elsewhere/s.irpa' && '$loom' params dump '$dir/elsewhere/s.irpa'"
expect_error "metadata disagreeing with the length" "extract it with --raw" \
  params extract "$dir/ext/ext.irpa" liar -o "$dir/liar.npy"
expect_ok "--raw ignores metadata" "^wrote entry 'liar' as u8\[" params extract "$dir/ext/ext.irpa" liar -o "$dir/liar.npy" --raw
expect_error "pattern not dividing the length" "6 bytes, not a multiple of the 4-byte pattern" \
  params splat "$dir/ext/ext.irpa" -o "$dir/ext/x.irpa" --key odd --pattern 0x3f800000

# --- --from-onnx --------------------------------------------------------------
if [ "$make_onnx" != "none" ]; then
  mkdir -p "$dir/onnx"
  expect_exit "loom-test-make-onnx" 0 "^0 " "$make_onnx" "$dir/onnx"
  cp "$dir/stdout" "$dir/onnx/names.txt"
  expect_ok "create --from-onnx" "^wrote [0-9]* entries to $dir/onnx.irpa$" params create -o "$dir/onnx.irpa" --from-onnx "$dir/onnx/model.onnx"
  expect_ok "dump onnx archive" "data 'enc.layer0/w'" params dump "$dir/onnx.irpa"
  count=0
  while read -r i name; do
    count=$((count + 1))
    expect_ok "extract onnx '$name'" "^wrote entry '$name'" params extract "$dir/onnx.irpa" "$name" -o "$dir/onnx_$i.npy"
    same "onnx initializer '$name'" "$dir/onnx/expected_$i.npy" "$dir/onnx_$i.npy"
  done < "$dir/onnx/names.txt"
  [ "$count" -ge 7 ] || fail "--from-onnx: only $count initializers checked"
  expect_ok "--from-onnx with .npy files" "$((count + 1)) entries" \
    bash -c "'$loom' params create -o '$dir/mixed.irpa' 'extra=$x' --from-onnx '$dir/onnx/model.onnx' && '$loom' params dump '$dir/mixed.irpa'"
  expect_error "onnx name clashes with NAME" "has the name of a NAME=FILE.npy" \
    params create -o "$dir/c.irpa" "bias=$x" --from-onnx "$dir/onnx/model.onnx"
  expect_error "onnx external data escaping" "contains '..'" \
    params create -o "$dir/c.irpa" --from-onnx "$dir/onnx/escape.onnx"
  expect_error "onnx file missing" "missing.onnx" \
    params create -o "$dir/c.irpa" --from-onnx "$dir/missing.onnx"
  head -c 3000 /dev/urandom > "$dir/garbage.onnx"
  expect_error "not an onnx model" "not an ONNX model" \
    params create -o "$dir/c.irpa" --from-onnx "$dir/garbage.onnx"
else
  expect_error "--from-onnx without ONNX support" "built without ONNX support" \
    params create -o "$dir/c.irpa" --from-onnx "$dir/model.onnx"
fi

# --- bad input ----------------------------------------------------------------
expect_error "dump missing file" "nonexistent.irpa" params dump "$dir/nonexistent.irpa"
expect_error "dump a .npy file" "input_x.npy" params dump "$x"
: > "$dir/empty.irpa"
expect_error "dump empty file" "empty" params dump "$dir/empty.irpa"
head -c 100 "$dir/a.irpa" > "$dir/truncated.irpa"
expect_error "dump truncated archive" "truncated.irpa" params dump "$dir/truncated.irpa"
expect_error "extract unknown key" "no entry 'w'.*its entries: x, y" \
  params extract "$dir/a.irpa" w -o "$dir/w.npy"
expect_error "splat unknown key" "no entry 'nope'" \
  params splat "$dir/a.irpa" -o "$dir/s.irpa" --key nope --pattern 0x00
for bad in 3f800000 0x3f8 0xzz 0x 0x000102030405060708090a0b0c0d0e0f00; do
  expect_error "bad pattern '$bad'" "--pattern '$bad'" \
    params splat "$dir/a.irpa" -o "$dir/s.irpa" --key x --pattern "$bad"
done
expect_error "NAME without =" "'x' is not NAME=FILE.npy" params create -o "$dir/c.irpa" x
expect_error "empty NAME" "is not NAME=FILE.npy" params create -o "$dir/c.irpa" "=$x"
expect_error "empty path" "is not NAME=FILE.npy" params create -o "$dir/c.irpa" "x="
expect_error "missing .npy" "missing.npy" params create -o "$dir/c.irpa" "x=$dir/missing.npy"
expect_error "not a .npy" "a.irpa" params create -o "$dir/c.irpa" "x=$dir/a.irpa"
expect_error "NAME twice" "given twice" params create -o "$dir/c.irpa" "x=$x" "x=$y"
expect_error "nothing to create" "nothing to write" params create -o "$dir/c.irpa"
expect_error "bad alignment" "power of two" params create -o "$dir/c.irpa" --alignment 48 "x=$x"
expect_error "append to missing" "not an existing archive" \
  params create -o "$dir/missing.irpa" --append "x=$x"
expect_error "append to a non-archive" "irpa" params create -o "$x" --append "q=$y"
expect_error "rename unknown" "no entry 'q'" params rename "$dir/a.irpa" -o "$dir/r.irpa" q=r
expect_error "rename onto existing" "already has an entry 'y'" \
  params rename "$dir/a.irpa" -o "$dir/r.irpa" x=y
expect_error "rename without =" "is not OLD=NEW" params rename "$dir/a.irpa" -o "$dir/r.irpa" x
expect_error "rename two onto one" "two entries would be named 'k'" \
  params rename "$dir/a.irpa" -o "$dir/r.irpa" x=k y=k
expect_error "usage error" "--key" params splat "$dir/a.irpa" -o "$dir/s.irpa" --pattern 0x00
expect_error "unknown action" "subcommand is required" params frobnicate
[ -e "$dir/c.irpa" ] && fail "a failed create left $dir/c.irpa behind"

if [ $failures -ne 0 ]; then echo "$failures params CLI checks failed"; exit 1; fi
echo "all params CLI checks passed"
