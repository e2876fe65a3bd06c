#!/usr/bin/env bash
# `loom doctor` explains each kind of plugin rejection (exit 1, a PROBLEM line
# and its fix), `loom devices --require-conformance` refuses unstamped
# plugins and points to doctor, and a valid stamp is shown.
# Usage: doctor_cli_test.sh <path to loom> <test plugin dir> <scratch dir>
set -u
loom="$1"
plugins="$2"
dir="$3"
rm -rf "$dir" && mkdir -p "$dir"
# shellcheck source=cli_checks.sh
source "$(dirname "$0")/cli_checks.sh"
export LOOM_PLUGIN_PATH=""

# A fresh copy of a fake plugin variant in $dir/<case>; prints its manifest.
copy() {
  rm -rf "$dir/$2" && mkdir -p "$dir/$2" && cp "$plugins/$1"/* "$dir/$2/"
  echo "$dir/$2/$1.loom-plugin.json"
}
# patch FILE OFFSET-OR-STRING REPLACEMENT: rewrite bytes of a copied library.
patch_at() {
  /usr/bin/python3 - "$@" <<'PY'
import sys
path, where, what = sys.argv[1], sys.argv[2], sys.argv[3]
data = bytearray(open(path, "rb").read())
if where.startswith("@"):
    at = int(where[1:])
    data[at:at + len(bytes.fromhex(what))] = bytes.fromhex(what)
else:
    old, new = where.encode() + b"\0", what.encode() + b"\0"
    at = data.find(old)
    assert at >= 0 and len(old) == len(new), where
    data[at:at + len(old)] = new
open(path, "wb").write(data)
PY
}
# stamp MANIFEST HASH FAILED: writes a stamp beside the manifest.
stamp() {
  /usr/bin/python3 - "$@" <<'PY'
import json, sys, os
manifest, hash_, failed = sys.argv[1], sys.argv[2], int(sys.argv[3])
m = json.load(open(manifest))
stamp = {"format": 1, "suite_version": "1.0", "level": "basic", "plugin": m["name"],
         "plugin_version": m["version"], "library_hash": hash_ or m["library_hash"],
         "stamped_at": "2026-11-25T14:03:07Z",
         "totals": {"passed": 41, "failed": failed, "skipped": 0},
         "failed_checks": ["exec.fence_timeout"] * failed}
json.dump(stamp, open(os.path.join(os.path.dirname(manifest), m["name"] + ".loom-conformance.json"), "w"))
PY
}

good=$(copy fake good)
expect_exit "doctor: healthy plugin" 0 "OK      entry point: loom_plugin_query exported" \
  "$loom" doctor "$good"
grep -q "=> would be accepted" "$dir/stdout" || fail "doctor: no verdict for a healthy plugin"
expect_exit "doctor: by library path" 0 "plugin fake" "$loom" doctor "$dir/good/libloom_fake.so"
expect_exit "doctor: by name" 0 "plugin fake " "$loom" doctor --plugin-path "$dir/good" fake
expect_exit "doctor --json" 0 '"accepted": true' "$loom" doctor --json "$good"
expect_error "doctor: unknown name" "no plugin named 'nonesuch'" \
  "$loom" doctor --plugin-path "$dir/good" nonesuch
expect_error "doctor: missing file" "no file" "$loom" doctor "$dir/absent.loom-plugin.json"

m=$(copy fake badjson); echo '{"name": ' > "$m"
expect_exit "doctor: bad manifest JSON" 1 "PROBLEM manifest: .*not valid JSON" "$loom" doctor "$m"

m=$(copy fake nolib); rm "$dir/nolib/libloom_fake.so"
expect_exit "doctor: missing library" 1 "PROBLEM library: .*does not exist" "$loom" doctor "$m"

m=$(copy fake class32); patch_at "$dir/class32/libloom_fake.so" @4 01
expect_exit "doctor: wrong ELF class" 1 "PROBLEM ELF: class 32-bit" "$loom" doctor "$m"

m=$(copy fake machine); patch_at "$dir/machine/libloom_fake.so" @18 b700
expect_exit "doctor: wrong machine" 1 "PROBLEM ELF: machine AArch64" "$loom" doctor "$m"
grep -q "fix: rebuild the plugin for this host" "$dir/stdout" || fail "doctor: no fix for the machine"

m=$(copy fake notelf); echo "not a library" > "$dir/notelf/libloom_fake.so"
expect_exit "doctor: not an ELF file" 1 "PROBLEM ELF: .*not an ELF file" "$loom" doctor "$m"

m=$(copy fake nodep); patch_at "$dir/nodep/libloom_fake.so" libgcc_s.so.1 libzzz_q.so.1
expect_exit "doctor: missing dependency" 1 "PROBLEM dependencies: not found: libzzz_q.so.1" \
  "$loom" doctor "$m"
grep -q "apt-file search libzzz_q.so.1" "$dir/stdout" || fail "doctor: no package hint"

m=$(copy fake_no_entry noentry)
expect_exit "doctor: missing entry point" 1 "PROBLEM entry point: loom_plugin_query is not exported" \
  "$loom" doctor "$m"

m=$(copy fake_abi2 abi)
expect_exit "doctor: ABI disjoint" 1 "PROBLEM ABI: the manifest says the plugin speaks ABI 2.0-2.0" \
  "$loom" doctor "$m"

m=$(copy fake hash); sed -i 's/"library_hash": *"xxh3-128:[0-9a-f]*"/"library_hash": "xxh3-128:00000000000000000000000000000000"/' "$m"
expect_exit "doctor: hash mismatch" 1 "PROBLEM library hash: the library hashes to" "$loom" doctor "$m"

m=$(copy fake unstamped)
expect_exit "doctor: stamp missing, not required" 0 "NOTE    conformance: not stamped" "$loom" doctor "$m"
expect_exit "doctor: stamp missing, required" 1 "PROBLEM conformance: not stamped" \
  "$loom" doctor --require-conformance "$m"
grep -q 'loom conformance fake --stamp' "$dir/stdout" || fail "doctor: no stamp fix"
m=$(copy fake mismatched); stamp "$m" "xxh3-128:11111111111111111111111111111111" 0
expect_exit "doctor: stamp mismatched" 1 "PROBLEM conformance: stamp does not match the library (rebuilt since?)" \
  "$loom" doctor --require-conformance "$m"

# Every plugin at once: exit 1 when any would be rejected.
expect_exit "doctor: all plugins" 1 "plugin fake_abi2" \
  "$loom" doctor --plugin-path "$dir/good" --plugin-path "$dir/abi"

# loom devices: the stamp's status, a rejection under --require-conformance
# with the pointer to doctor, and a stamped plugin accepted.
expect_ok "devices: not stamped" "conformance: not stamped" \
  env LOOM_PLUGIN_PATH="$dir/unstamped" "$loom" devices
expect_ok "devices --require-conformance: rejected" "run \`loom doctor fake\` for details" \
  env LOOM_PLUGIN_PATH="$dir/unstamped" "$loom" devices --require-conformance
grep -q "reason: conformance is required: not stamped" <<<"$(env LOOM_PLUGIN_PATH="$dir/unstamped" "$loom" devices --require-conformance)" ||
  fail "devices --require-conformance: no reason"
m=$(copy fake stamped); stamp "$m" "" 0
expect_ok "devices: stamped" "conformance: basic, suite 1.0, 2026-11-25, 41 passed" \
  env LOOM_PLUGIN_PATH="$dir/stamped" "$loom" devices --require-conformance
grep -q "device fake://0" <<<"$(env LOOM_PLUGIN_PATH="$dir/stamped" "$loom" devices --require-conformance)" ||
  fail "devices --require-conformance: a stamped plugin was not loaded"
m=$(copy fake failing); stamp "$m" "" 1
expect_ok "devices --require-conformance: failed checks" "1 failed check: exec.fence_timeout" \
  env LOOM_PLUGIN_PATH="$dir/failing" "$loom" devices --require-conformance
expect_ok "devices --json: conformance" '"valid": true' \
  env LOOM_PLUGIN_PATH="$dir/stamped" "$loom" devices --json

if [ $failures -ne 0 ]; then echo "$failures check(s) failed"; exit 1; fi
echo "all doctor CLI checks passed"
