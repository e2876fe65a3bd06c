#!/usr/bin/env bash
# Drives the `loom` program the way a user does and checks exit codes and
# messages: success paths, and bad input that must end in a one-line error
# (exit 1), never a crash (exit >= 128) or a silent success.
# Usage: cli_test.sh <path to loom> <scratch dir>
set -u
loom="$1"
dir="$2"
rm -rf "$dir" && mkdir -p "$dir"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_ok <description> <grep pattern for stdout> <command...>
expect_ok() {
  local what="$1" pattern="$2"; shift 2
  local out rc
  out=$("$@" 2>"$dir/stderr") ; rc=$?
  if [ $rc -ne 0 ]; then fail "$what: exit $rc: $(cat "$dir/stderr")"; return; fi
  if ! grep -q -- "$pattern" <<<"$out"; then fail "$what: stdout lacks '$pattern'"; echo "$out" | head -20; fi
}

# expect_error <description> <grep pattern for stderr> <command...>
expect_error() {
  local what="$1" pattern="$2"; shift 2
  local rc lines
  "$@" >/dev/null 2>"$dir/stderr"; rc=$?
  if [ $rc -eq 0 ]; then fail "$what: succeeded"; return; fi
  if [ $rc -ge 128 ]; then fail "$what: crashed (exit $rc)"; return; fi
  if ! grep -q -- "$pattern" "$dir/stderr"; then fail "$what: stderr lacks '$pattern': $(cat "$dir/stderr")"; fi
  lines=$(grep -c . "$dir/stderr")
  if [ "$lines" -ne 1 ]; then fail "$what: expected a one-line error, got $lines lines"; cat "$dir/stderr"; fi
}

expect_ok "demo" "cpu-simd://0" "$loom" demo --save-dir "$dir/demo"
for f in program.loom input_x.npy expected_y.npy; do
  [ -s "$dir/demo/$f" ] || fail "demo did not write $f"
done
prog="$dir/demo/program.loom"

expect_ok "devices" "cpu-simd://0" "$loom" devices
expect_ok "devices --json" '"uri"' "$loom" devices --json
expect_ok "inspect" "cpu-simd" "$loom" inspect "$prog"
expect_ok "inspect --json" '"functions"' "$loom" inspect "$prog" --json
expect_ok "run with .npy" "y:" "$loom" run "$prog" --input "x=$dir/demo/input_x.npy" \
  --output "y=$dir/y.npy"
[ -s "$dir/y.npy" ] || fail "run did not write y.npy"
expect_ok "run --repeat" "median" "$loom" run "$prog" --input x=random --repeat 5 --threads 1
expect_ok "run reference function" "y:" "$loom" run "$prog" --function reference --input x=random

expect_error "mistyped device" "did you mean 'cpu-simd://0'" \
  "$loom" run "$prog" --device cpu-smid://0 --input x=random
expect_error "missing file" "nonexistent.loom" "$loom" inspect "$dir/nonexistent.loom"
expect_error "unknown input name" "'z'" "$loom" run "$prog" --input z=random
expect_error "unknown function" "mian" "$loom" run "$prog" --function mian --input x=random
expect_error "binding without =" "NAME=" "$loom" run "$prog" --input x
expect_error "output name unknown" "'q'" "$loom" run "$prog" --input x=random --output "q=$dir/q.npy"

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

"$loom" frobnicate >/dev/null 2>&1; rc=$?
[ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "unknown subcommand: exit $rc"

if [ $failures -ne 0 ]; then echo "$failures CLI checks failed"; exit 1; fi
echo "all CLI checks passed"
