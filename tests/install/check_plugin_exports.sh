#!/usr/bin/env bash
# Checks that each plugin library given exports exactly one defined symbol,
# the function loom_plugin_query (loom_add_plugin's version script).
# Usage: check_plugin_exports.sh LIBRARY...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 LIBRARY..." >&2; exit 2; }
status=0
for lib in "$@"; do
  [ -f "$lib" ] || { echo "FAIL: $lib does not exist" >&2; status=1; continue; }
  # Lines "ADDRESS TYPE NAME": the dynamic symbols the library defines.
  defined=$(nm -D --defined-only "$lib")
  if [ "$(printf '%s\n' "$defined" | awk 'NF == 3 && $2 == "T" && $3 == "loom_plugin_query"' | wc -l)" != 1 ] ||
     [ "$(printf '%s\n' "$defined" | grep -c .)" != 1 ]; then
    echo "FAIL: $lib must export exactly one defined symbol, the function loom_plugin_query; it exports:" >&2
    printf '%s\n' "$defined" | sed 's/^/  /' >&2
    status=1
  else
    echo "ok: $lib exports only loom_plugin_query"
  fi
done
exit $status
