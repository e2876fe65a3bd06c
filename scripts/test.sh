#!/usr/bin/env bash
# Runs every test: installs missing packages (idempotent), builds the default
# preset and runs the whole suite, then builds with ASan+UBSan and runs the
# suites labelled "sanitize" (loader, registry, host, kernels, plugins, runtime,
# CLI) again, then builds with ThreadSanitizer only the concurrency tests
# (target loom_tsan_tests) and runs the suites labelled "tsan", and last
# runs every libFuzzer harness (tests/fuzz) for a short, fixed time on its
# seed corpus (scripts/fuzz.sh; LOOM_FUZZ_SECONDS each, default 10).
# Set LOOM_SKIP_SANITIZE=1 to skip the ASan+UBSan pass locally,
# LOOM_SKIP_TSAN=1 to skip the ThreadSanitizer pass and LOOM_SKIP_FUZZ=1 to
# skip the fuzz step.
#
# setup.sh has installed everything, so every suite is required: a suite the
# configure step would leave out, or a test that would skip for want of test
# data, fails instead (LOOM_REQUIRE_ALL_SUITES). Sanitizer reports exit with a
# code of their own (86), never the 1 of an ordinary `loom: error:`, so no
# check that expects an error can pass over one; a ThreadSanitizer report
# ends its test at once with that code (halt_on_error).
#
# Every stage prints its elapsed time when it ends ("stage: NAME: 312 s"),
# and the script ends with a table of them, so each CI log shows where the
# time went. Compilers run through ccache when it is installed (setup.sh
# installs it; CMake option LOOM_CCACHE): its cache lives outside the clone
# (ccache's default, ~/.cache/ccache), and CCACHE_BASEDIR makes paths
# relative to the clone, so a later run from another clone on the same
# machine reuses what an earlier one compiled.
#
# Every build here is one to test, not to debug, so it is configured to
# compile quicker (LOOM_QUICK_BUILD=0 turns this off): unity builds
# (CMAKE_UNITY_BUILD, each target's sources compiled in batches: about half
# the compile time) and line tables only for debug info (LOOM_LINE_TABLES_ONLY,
# -g1: sanitizer reports keep file:line). Both stay in the build folder's
# CMake cache; to debug, configure it again with -DCMAKE_UNITY_BUILD=OFF
# -DLOOM_LINE_TABLES_ONLY=OFF (the presets' own defaults: full debug info,
# one object per source).
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2)
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1

# Extra configure flags of every build below, scripts/fuzz.sh's included.
LOOM_BUILD_FLAGS="-DCMAKE_UNITY_BUILD=ON -DLOOM_LINE_TABLES_ONLY=ON"
if [ "${LOOM_QUICK_BUILD:-1}" = "0" ]; then
  LOOM_BUILD_FLAGS="-DCMAKE_UNITY_BUILD=OFF -DLOOM_LINE_TABLES_ONLY=OFF"
fi
export LOOM_BUILD_FLAGS

script_start=$SECONDS
stage_start=$SECONDS
stage_table=""
# stage NAME: the stage that just ended was NAME.
stage() {
  local took=$((SECONDS - stage_start))
  echo "stage: $1: ${took} s"
  stage_table+="$(printf '  %-16s %5d s' "$1" "$took")"$'\n'
  stage_start=$SECONDS
}
summary() {
  local rc=$?
  echo "stage times (exit $rc):"
  printf '%s' "$stage_table"
  printf '  %-16s %5d s\n' "total" $((SECONDS - script_start))
}
trap summary EXIT

bash scripts/setup.sh
stage setup

export LOOM_REQUIRE_ALL_SUITES=1
# shellcheck disable=SC2086
cmake --preset default -DLOOM_REQUIRE_ALL_SUITES=ON $LOOM_BUILD_FLAGS
cmake --build --preset default -j "$jobs"
stage "build"
ctest --preset default -j "$jobs"
stage "tests"

if [ "${LOOM_SKIP_SANITIZE:-0}" != "1" ]; then
  # shellcheck disable=SC2086
  cmake --preset asan -DLOOM_REQUIRE_ALL_SUITES=ON $LOOM_BUILD_FLAGS
  cmake --build --preset asan -j "$jobs"
  stage "asan build"
  # The preset sets LOOM_TIME_SCALE=4: default time limits of the
  # conformance suite and test harness stretch with the slower build.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 LSAN_OPTIONS=exitcode=86 \
    ctest --preset asan -j "$jobs" -L sanitize
  stage "asan tests"
fi

if [ "${LOOM_SKIP_TSAN:-0}" != "1" ]; then
  # shellcheck disable=SC2086
  cmake --preset tsan -DLOOM_REQUIRE_ALL_SUITES=ON $LOOM_BUILD_FLAGS
  cmake --build --preset tsan -j "$jobs"
  stage "tsan build"
  # The preset sets TSAN_OPTIONS=halt_on_error=1:exitcode=86 (with the
  # suppressions of tests/tsan.supp), OMP_THREAD_LIMIT=1 (see there) and
  # LOOM_TIME_SCALE=4.
  ctest --preset tsan -j "$jobs"
  stage "tsan tests"
fi

if [ "${LOOM_SKIP_FUZZ:-0}" != "1" ]; then
  bash scripts/fuzz.sh --seconds "${LOOM_FUZZ_SECONDS:-10}"
  stage "fuzz"
fi
