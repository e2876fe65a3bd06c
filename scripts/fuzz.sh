#!/usr/bin/env bash
# Builds the libFuzzer harnesses (the `fuzz` preset: clang, ASan + UBSan,
# build-fuzz/) and runs each for a fixed time on a copy of its seed corpus.
#
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--grow] [--no-build] [harness ...]
#
#   --seconds N  how long each harness runs (default 60)
#   --jobs J     processes per harness, sharing one working corpus (default 1)
#   --grow       merge what the run found back into tests/fuzz/corpus/<harness>
#                (off by default: the checked-in corpus stays small)
#   --no-build   use the harnesses already in build-fuzz/bin
#   harness      names from tests/fuzz/<name>_fuzz.cpp; all when none given
#
# For each harness it prints the executions and executions per second from
# libFuzzer's final statistics (summed over the jobs). A crash, leak, timeout
# (one input over 10 s) or memory use over 2 GiB fails the script; the input
# that caused it is kept and its path printed. Working corpora and logs are in
# build-fuzz/fuzz-runs/<harness>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=1
grow=0
build=1
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --grow) grow=1; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
if [ ${#harnesses[@]} -eq 0 ]; then
  for f in tests/fuzz/*_fuzz.cpp; do
    name=$(basename "$f" _fuzz.cpp)
    harnesses+=("$name")
  done
fi
for h in "${harnesses[@]}"; do
  if [ ! -f "tests/fuzz/${h}_fuzz.cpp" ]; then
    echo "fuzz.sh: no harness '$h' (tests/fuzz/${h}_fuzz.cpp)" >&2
    exit 2
  fi
done

if [ "$build" = 1 ]; then
  # LOOM_BUILD_FLAGS: extra configure flags (scripts/test.sh sets them).
  # shellcheck disable=SC2086
  cmake --preset fuzz ${LOOM_BUILD_FLAGS:-} >/dev/null
  targets=()
  for h in "${harnesses[@]}"; do targets+=("fuzz_$h"); done
  cmake --build build-fuzz -j "$(nproc 2>/dev/null || echo 2)" --target "${targets[@]}"
fi

# libFuzzer's own limits, except a 10 s ceiling per input instead of 20 min.
common=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1)
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

failed=()
printf '%-16s %12s %10s  %s\n' harness executions exec/s result
for h in "${harnesses[@]}"; do
  bin="build-fuzz/bin/fuzz_$h"
  if [ ! -x "$bin" ]; then
    echo "fuzz.sh: $bin was not built" >&2
    failed+=("$h")
    continue
  fi
  work="build-fuzz/fuzz-runs/$h"
  rm -rf "$work/corpus" "$work/artifacts" "$work"/job-*.log
  mkdir -p "$work/corpus" "$work/artifacts"
  cp tests/fuzz/corpus/"$h"/* "$work/corpus/" 2>/dev/null || true
  pids=()
  for j in $(seq 1 "$jobs"); do
    "$bin" "${common[@]}" -max_total_time="$seconds" -seed="$((j * 7919 + $$))" \
      -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/job-$j.log" 2>&1 &
    pids+=($!)
  done
  status=0
  for p in "${pids[@]}"; do wait "$p" || status=1; done
  execs=0
  rate=0
  for j in $(seq 1 "$jobs"); do
    e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/job-$j.log" | tail -1)
    r=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/job-$j.log" | tail -1)
    execs=$((execs + ${e:-0}))
    rate=$((rate + ${r:-0}))
  done
  result=ok
  if [ "$status" != 0 ]; then
    result=FAILED
    failed+=("$h")
  fi
  printf '%-16s %12s %10s  %s\n' "$h" "$execs" "$rate" "$result"
  if [ "$status" != 0 ]; then
    for j in $(seq 1 "$jobs"); do
      log="$work/job-$j.log"
      grep -E "^==[0-9]+==ERROR|runtime error:|fuzz invariant broken|ERROR: libFuzzer|SUMMARY:" "$log" |
        head -5 | sed 's/^/    /' || true
      grep -E "Test unit written to" "$log" | sed 's/^.*Test unit written to /    input: /' || true
      echo "    log: $log"
    done
  fi
  if [ "$grow" = 1 ] && [ "$status" = 0 ]; then
    "$bin" -merge=1 "tests/fuzz/corpus/$h" "$work/corpus" >"$work/merge.log" 2>&1
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: failed: ${failed[*]} (reproduce: build-fuzz/bin/fuzz_<harness> <input>)" >&2
  exit 1
fi
