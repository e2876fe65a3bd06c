#!/usr/bin/env bash
# Soak test (not part of CI; takes minutes): builds tools/soak (loom-soak)
# and the plugins it loads, then for each target runs
#   - 10,000 cycles of Runtime + plugin load + program load + session + one
#     run, all destroyed again (the fake plugin's library is unloaded and
#     loaded again each cycle), and
#   - 1,000,000 runs of one session,
# checking every result and printing resident memory as it goes; a phase
# whose resident memory grows by more than LOOM_SOAK_MAX_GROWTH_KB (default
# 2048) after its warm-up fails.
#
#   scripts/soak.sh            release build (preset default, build/)
#   scripts/soak.sh --asan     ASan build (build-asan/) at a tenth of the
#                              counts, LeakSanitizer checking at exit; the
#                              resident-memory limit is off (ASan's quarantine
#                              grows on purpose)
# Environment: LOOM_SOAK_TARGETS (default "fake fake-async cpu-simd"),
# LOOM_SOAK_CYCLES, LOOM_SOAK_RUNS (override the counts).
set -euo pipefail
cd "$(dirname "$0")/.."

mode=release
if [ "${1:-}" = "--asan" ]; then
  mode=asan
elif [ $# -gt 0 ]; then
  echo "usage: scripts/soak.sh [--asan]" >&2
  exit 2
fi

jobs=$(nproc 2>/dev/null || echo 2)
if [ "$mode" = asan ]; then
  preset=asan dir=build-asan
  cycles=${LOOM_SOAK_CYCLES:-1000} runs=${LOOM_SOAK_RUNS:-100000} growth=0
else
  preset=default dir=build
  cycles=${LOOM_SOAK_CYCLES:-10000} runs=${LOOM_SOAK_RUNS:-1000000}
  growth=${LOOM_SOAK_MAX_GROWTH_KB:-2048}
fi

if [ ! -f "$dir/CMakeCache.txt" ]; then
  cmake --preset "$preset"
fi
cmake --build "$dir" -j "$jobs" --target loom-soak loom_plugin_cpu_simd loom_plugin_fake

launcher=()
if [ "$mode" = asan ]; then
  # Sanitizer reports exit with 86, as in scripts/test.sh. The launcher keeps
  # lavapipe and oneDNN resident (tests/CMakeLists.txt says why).
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86
  export LSAN_OPTIONS=exitcode=86
  if [ -x "$dir/bin/loom-test-launcher" ]; then
    launcher=("$dir/bin/loom-test-launcher")
  fi
fi

status=0
for target in ${LOOM_SOAK_TARGETS:-fake fake-async cpu-simd}; do
  args=(--cycles "$cycles" --runs "$runs" --max-growth-kb "$growth")
  case "$target" in
    fake) args+=(--target fake --plugin-path "$dir/test-plugins/fake") ;;
    fake-async) args+=(--target fake --fake-async --plugin-path "$dir/test-plugins/fake") ;;
    cpu-simd) args+=(--target cpu-simd) ;;
    *) echo "soak.sh: unknown target '$target'" >&2; exit 2 ;;
  esac
  echo "== $target ($mode)"
  start=$(date +%s)
  if "${launcher[@]}" "$dir/bin/loom-soak" "${args[@]}"; then
    echo "== $target: ok in $(( $(date +%s) - start )) s"
  else
    rc=$?
    echo "== $target: FAILED (exit $rc) after $(( $(date +%s) - start )) s"
    status=1
  fi
done
exit $status
