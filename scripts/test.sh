#!/usr/bin/env bash
# Runs every test: installs missing packages (idempotent), builds the default
# preset and runs the whole suite, then builds with ASan+UBSan and runs the
# suites labelled "sanitize" (loader, registry, host, kernels, plugins, runtime,
# CLI) again.
# Set LOOM_SKIP_SANITIZE=1 to skip the sanitizer pass locally.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs=$(nproc 2>/dev/null || echo 2)
bash scripts/setup.sh

cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"

if [ "${LOOM_SKIP_SANITIZE:-0}" != "1" ]; then
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --preset asan -j "$jobs" -L sanitize
fi
