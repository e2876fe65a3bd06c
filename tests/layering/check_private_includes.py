#!/usr/bin/env python3
"""Keeps core/src private (README, "Layout"; core/CMakeLists.txt).

Usage: check_private_includes.py SOURCE_DIR COMPILE_COMMANDS PUBLIC_ONLY... [--headers DIR...]

1. Every compile command in COMPILE_COMMANDS (CMake's compile_commands.json)
   of a source under one of the PUBLIC_ONLY folders (relative to SOURCE_DIR:
   tools/loom, sdk/examples) must not name SOURCE_DIR/core/src, or a folder
   inside it, as an include folder: those programs use Loom's public headers
   only. Each PUBLIC_ONLY folder must have at least one compile command, so
   that a moved folder cannot make the check pass by matching nothing.
2. No header under the --headers folders (core/include, the public headers
   of the conformance library and tools/program_builder) includes a header that only
   core/src has: "x/y.hpp" (or <x/y.hpp>) found as SOURCE_DIR/core/src/x/y.hpp
   and not beside the including header or under its public folder.

Prints one line per violation, naming the file, and exits 1 when there is one.
"""
import json
import os
import re
import shlex
import sys

INCLUDE_FLAG = re.compile(r"^(-I|-isystem|-iquote|-idirafter)(.*)$")
INCLUDE_LINE = re.compile(r'^\s*#\s*include\s+["<]([^">]+)[">]', re.MULTILINE)


def is_within(path, folder):
    return path == folder or path.startswith(folder + os.sep)


def real_sources(source):
    """The sources a compile command compiles: the file itself, or for a
    CMake unity file (.../Unity/unity_N_cxx.cxx) the files it includes."""
    if os.sep + "Unity" + os.sep not in source or not os.path.basename(source).startswith("unity_"):
        return [source]
    with open(source, encoding="utf-8") as f:
        return [os.path.realpath(p) for p in INCLUDE_LINE.findall(f.read())]


def check_compile_commands(source_dir, commands_file, public_only):
    private = os.path.realpath(os.path.join(source_dir, "core", "src"))
    folders = [os.path.realpath(os.path.join(source_dir, f)) for f in public_only]
    seen = {f: 0 for f in folders}
    errors = []
    with open(commands_file, encoding="utf-8") as f:
        entries = json.load(f)
    for entry in entries:
        directory = entry.get("directory", "")
        source = os.path.realpath(os.path.join(directory, entry["file"]))
        # A unity build (CMAKE_UNITY_BUILD, as scripts/test.sh configures)
        # compiles generated files that include the real sources: the
        # command belongs to each source its file includes.
        owners = [f for f in folders if any(is_within(s, f) for s in real_sources(source))]
        if not owners:
            continue
        for owner in owners:
            seen[owner] += 1
        args = entry.get("arguments") or shlex.split(entry["command"])
        for i, arg in enumerate(args):
            m = INCLUDE_FLAG.match(arg)
            if not m:
                continue
            value = m.group(2) or (args[i + 1] if i + 1 < len(args) else "")
            path = os.path.realpath(os.path.join(directory, value))
            if is_within(path, private):
                rel = os.path.relpath(source, source_dir)
                errors.append(f"{rel}: compiled with {m.group(1)}{value} (core/src is private; "
                              "include loom/... public headers, or move what it needs there)")
    for folder, count in seen.items():
        if count == 0:
            errors.append(f"{os.path.relpath(folder, source_dir)}: no compile command in "
                          f"{commands_file} (moved? update tests/layering/CMakeLists.txt)")
    return errors


def check_public_headers(source_dir, header_dirs):
    private = os.path.join(source_dir, "core", "src")
    errors = []
    checked = 0
    for top in header_dirs:
        top = os.path.join(source_dir, top)
        for root, _, files in os.walk(top):
            for name in sorted(files):
                if not name.endswith((".h", ".hpp")):
                    continue
                header = os.path.join(root, name)
                checked += 1
                with open(header, encoding="utf-8") as f:
                    text = f.read()
                for included in INCLUDE_LINE.findall(text):
                    if os.path.exists(os.path.join(root, included)):
                        continue
                    if os.path.exists(os.path.join(top, included)):
                        continue
                    if os.path.exists(os.path.join(private, included)):
                        rel = os.path.relpath(header, source_dir)
                        errors.append(f'{rel}: includes "{included}", a private header '
                                      f"(core/src/{included}); public headers include public ones only")
    if checked == 0:
        errors.append(f"no public header found under {', '.join(header_dirs)}")
    return errors


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    source_dir = os.path.realpath(argv[1])
    commands_file = argv[2]
    rest = argv[3:]
    header_dirs = []
    if "--headers" in rest:
        at = rest.index("--headers")
        rest, header_dirs = rest[:at], rest[at + 1:]
    errors = check_compile_commands(source_dir, commands_file, rest)
    if header_dirs:
        errors += check_public_headers(source_dir, header_dirs)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        return 1
    print(f"public-only sources ({', '.join(rest)}) compile without core/src; "
          f"public headers ({', '.join(header_dirs)}) include no private header")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
