# Shared by the CLI test scripts (sourced): a failure counter, the checks
# every script uses, and sanitizer detection. The caller sets $dir (a scratch
# folder) first.
#
# Under ASan/UBSan/LSan a report would otherwise exit 1, the code of an
# ordinary `loom: error:`; the sanitizers get an exit code of their own here
# (appended to any options the caller set, so it wins), and every check fails
# on that code and on any sanitizer report in stderr.
failures=0
sanitizer_exitcode=86
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}exitcode=$sanitizer_exitcode"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}exitcode=$sanitizer_exitcode"
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}exitcode=$sanitizer_exitcode"
sanitizer_report='ERROR: (Address|Leak|Memory|Thread)Sanitizer|SUMMARY: [A-Za-z]*Sanitizer|runtime error: '

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# skip <description> <why>: a block that cannot run here says why. Where
# everything is required (scripts/test.sh sets LOOM_REQUIRE_ALL_SUITES=1,
# setup.sh having installed everything) a skip is a failure.
skip() {
  if [ "${LOOM_REQUIRE_ALL_SUITES:-0}" = "1" ]; then
    fail "$1 skipped ($2), but LOOM_REQUIRE_ALL_SUITES=1 requires it"
  else
    echo "SKIP: $1: $2"
  fi
}

# sanitizer_clean <description> <exit code> <stderr file>: 0 when neither the
# exit code nor stderr shows a sanitizer report; otherwise counts a failure.
sanitizer_clean() {
  if [ "$2" -eq "$sanitizer_exitcode" ] || grep -qE -- "$sanitizer_report" "$3"; then
    fail "$1: sanitizer report (exit $2):"
    head -40 "$3"
    return 1
  fi
  return 0
}

# expect_ok <description> <grep pattern for stdout> <command...>: exit 0, no
# sanitizer report, and stdout matches the pattern (which must not be empty:
# every check names what it expects to see).
expect_ok() {
  local what="$1" pattern="$2"; shift 2
  local out rc
  if [ -z "$pattern" ]; then fail "$what: the check names no expected output"; return; fi
  out=$("$@" 2>"$dir/stderr"); rc=$?
  sanitizer_clean "$what" $rc "$dir/stderr" || return
  if [ $rc -ne 0 ]; then fail "$what: exit $rc: $(cat "$dir/stderr")"; return; fi
  if ! grep -q -- "$pattern" <<<"$out"; then fail "$what: stdout lacks '$pattern'"; echo "$out" | head -30; fi
}

# expect_error <description> <grep pattern for stderr> <command...>: exit 1
# (not a crash, not a sanitizer report), exactly one line on stderr, starting
# with "loom: error: " and matching the (non-empty) pattern.
expect_error() {
  local what="$1" pattern="$2"; shift 2
  local rc lines
  if [ -z "$pattern" ]; then fail "$what: the check names no expected message"; return; fi
  "$@" >/dev/null 2>"$dir/stderr"; rc=$?
  sanitizer_clean "$what" $rc "$dir/stderr" || return
  if [ $rc -eq 0 ]; then fail "$what: succeeded"; return; fi
  if [ $rc -ge 128 ]; then fail "$what: crashed (exit $rc)"; return; fi
  if [ $rc -ne 1 ]; then fail "$what: exit $rc, expected 1"; return; fi
  if ! grep -q -- "$pattern" "$dir/stderr"; then fail "$what: stderr lacks '$pattern': $(cat "$dir/stderr")"; fi
  if ! grep -q '^loom: error: ' "$dir/stderr"; then fail "$what: stderr does not start with 'loom: error: '"; fi
  lines=$(grep -c . "$dir/stderr")
  if [ "$lines" -ne 1 ]; then fail "$what: expected a one-line error, got $lines lines"; cat "$dir/stderr"; fi
}

# expect_exit <description> <exit code> <grep pattern for stdout> <command...>:
# exactly that exit code, no sanitizer report, stdout (kept in $dir/stdout)
# matches the pattern.
expect_exit() {
  local what="$1" code="$2" pattern="$3"; shift 3
  local rc
  if [ -z "$pattern" ]; then fail "$what: the check names no expected output"; return; fi
  "$@" >"$dir/stdout" 2>"$dir/stderr"; rc=$?
  sanitizer_clean "$what" $rc "$dir/stderr" || return
  if [ $rc -ne "$code" ]; then fail "$what: exit $rc, expected $code: $(head -5 "$dir/stderr")"; return; fi
  if ! grep -q -- "$pattern" "$dir/stdout"; then
    fail "$what: stdout lacks '$pattern'"; head -30 "$dir/stdout"
  fi
}
