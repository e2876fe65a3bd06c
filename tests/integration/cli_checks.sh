# Shared by the CLI test scripts (sourced): a failure counter and the two
# checks every script uses. The caller sets $dir (a scratch folder) first.
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_ok <description> <grep pattern for stdout> <command...>
expect_ok() {
  local what="$1" pattern="$2"; shift 2
  local out rc
  out=$("$@" 2>"$dir/stderr"); rc=$?
  if [ $rc -ne 0 ]; then fail "$what: exit $rc: $(cat "$dir/stderr")"; return; fi
  if ! grep -q -- "$pattern" <<<"$out"; then fail "$what: stdout lacks '$pattern'"; echo "$out" | head -30; fi
}

# expect_error <description> <grep pattern for stderr> <command...>: a
# non-zero exit that is not a crash, with exactly one line on stderr, and
# that line starts with "loom: error: ".
expect_error() {
  local what="$1" pattern="$2"; shift 2
  local rc lines
  "$@" >/dev/null 2>"$dir/stderr"; rc=$?
  if [ $rc -eq 0 ]; then fail "$what: succeeded"; return; fi
  if [ $rc -ge 128 ]; then fail "$what: crashed (exit $rc)"; return; fi
  if ! grep -q -- "$pattern" "$dir/stderr"; then fail "$what: stderr lacks '$pattern': $(cat "$dir/stderr")"; fi
  if ! grep -q '^loom: error: ' "$dir/stderr"; then fail "$what: stderr does not start with 'loom: error: '"; fi
  lines=$(grep -c . "$dir/stderr")
  if [ "$lines" -ne 1 ]; then fail "$what: expected a one-line error, got $lines lines"; cat "$dir/stderr"; fi
}
