#!/usr/bin/env bash
# Runs `loom test-onnx` over the ONNX backend test data (the CTest tests
# onnx_conformance_*). Usage:
#   run_conformance.sh <loom> <data dir> <known failures> <baseline> <report.json> [--device URI]
set -u
loom="$1" data="$2" known="$3" baseline="$4" report="$5"
shift 5
dirs=()
for group in node pytorch-converted pytorch-operator simple; do
  if [ ! -d "$data/$group" ]; then
    echo "ONNX test data missing: $data/$group does not exist; run scripts/setup.sh" \
         "(it installs libonnx-testdata)" >&2
    exit 1
  fi
  dirs+=("$data/$group")
done
exec "$loom" test-onnx --known-failures "$known" --baseline "$baseline" --report "$report" \
  "$@" "${dirs[@]}"
