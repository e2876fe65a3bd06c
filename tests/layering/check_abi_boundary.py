#!/usr/bin/env python3
"""Keeps every call into a plugin in the host (README, "Layout").

Usage: check_abi_boundary.py SOURCE_DIR

1. No source or header under core/src/runtime uses the plugin ABI's
   structures or calls: no loom_*_t type, no function table (api()), no
   struct size or ABI version macro, no LOOM_MAX_RANK and no raw handle
   (handle()). The runtime goes through the host's classes instead
   (host/handles.hpp: Executable, PreparedCall, DeviceBuffer, Fence;
   host/plugin_host.hpp: LoadedPlugin), so that isolation, checks, tracing
   and recording have one place to live. Named constants of the ABI that
   describe devices or logs (LOOM_DEVICE_CAP_*, LOOM_LOG_*, LOOM_OPTION_*)
   are plain values and stay allowed.
2. Nothing includes runtime/runtime_internal.hpp, the back door into a
   Runtime's plugin host that Runtime::plugin_host() replaced.

The folder must hold sources, so that a moved folder cannot make the check
pass by matching nothing. Prints one line per violation (file:line: what)
and exits 1 when there is one.
"""
import os
import re
import sys

FORBIDDEN = [
    (re.compile(r"\bloom_[a-z0-9_]+_t\b"), "an ABI type"),
    (re.compile(r"(\.|->)\s*api\s*\(\s*\)"), "a plugin's function table"),
    (re.compile(r"\bLOOM_[A-Z0-9_]*STRUCT_SIZE\b"), "an ABI struct size"),
    (re.compile(r"\bLOOM_ABI_VERSION\w*\b"), "an ABI version"),
    (re.compile(r"\bLOOM_MAX_RANK\b"), "the ABI's rank limit"),
    (re.compile(r"(\.|->)\s*handle\s*\(\s*\)"), "a raw plugin handle"),
]
BACK_DOOR = re.compile(r'^\s*#\s*include\s+["<]runtime/runtime_internal\.hpp[">]')
SOURCE_SUFFIXES = (".cpp", ".hpp", ".h", ".c", ".cc")
SKIP_FOLDERS = {".git", "build", "build-asan", "build-tsan", "build-fuzz"}


def strip_comment(line):
    # Comments may name the ABI when they explain what the host does.
    return line.split("//", 1)[0]


def check_runtime(source_dir):
    folder = os.path.join(source_dir, "core", "src", "runtime")
    errors = []
    files = 0
    for root, _, names in os.walk(folder):
        for name in sorted(names):
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            files += 1
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    code = strip_comment(line)
                    for pattern, what in FORBIDDEN:
                        match = pattern.search(code)
                        if match:
                            rel = os.path.relpath(path, source_dir)
                            errors.append(f"{rel}:{number}: uses {what} ({match.group(0).strip()}); "
                                          "call the plugin through host/handles.hpp instead")
    if files == 0:
        errors.append(f"{os.path.relpath(folder, source_dir)}: no sources found (moved?)")
    return errors


def check_back_door(source_dir):
    errors = []
    for root, dirs, names in os.walk(source_dir):
        dirs[:] = [d for d in dirs if d not in SKIP_FOLDERS and not d.startswith("build")]
        for name in names:
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    if BACK_DOOR.match(line):
                        rel = os.path.relpath(path, source_dir)
                        errors.append(f"{rel}:{number}: includes runtime/runtime_internal.hpp; "
                                      "use Runtime::plugin_host()")
    return errors


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    source_dir = os.path.realpath(argv[1])
    errors = check_runtime(source_dir) + check_back_door(source_dir)
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
