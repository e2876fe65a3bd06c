#!/usr/bin/env bash
# Installs a Loom build tree into a scratch prefix and checks what a user of
# the prefix gets, from the prefix alone:
#  - the layout: programs, libloom's SONAME chain, headers (each compiles on
#    its own with only the prefix on the include path), plugins with their
#    manifests (shipped ones only), the CMake package, the pkg-config files;
#  - the installed loom: --version, `loom devices` lists the shipped plugins
#    as loaded (their manifests' hashes still match) and the folders searched;
#  - out-of-tree consumers (tests/install/consumer, copied out of the tree):
#    with find_package(Loom), a plugin through loom_add_plugin (C++17) and a
#    host program through Loom::runtime; the same with pkg-config; both
#    plugins are listed by the installed loom and by the host programs;
#  - every sdk/examples/*/CMakeLists.txt project, built from the prefix, and
#    its check.sh PREFIX BUILD_DIR when it has one.
# Compile commands of the consumers may name only the prefix, their own
# folders and system folders: nothing of Loom's source or build tree.
#
# Usage: check_install.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR VERSION PLUGIN...
set -euo pipefail

build=$(cd "$1" && pwd -P)
src=$(cd "$2" && pwd -P)
scratch=$3
version=$4
shift 4
plugins=("$@")

fail() {
  echo "check_install: FAIL: $*" >&2
  exit 1
}
step() { echo "== $*"; }

rm -rf "$scratch"
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd -P)
prefix=$scratch/prefix
# An ONNX model the compile-side consumer compiles (libonnx-testdata).
onnx_relu=/usr/share/libonnx-testdata/data/node/test_relu/model.onnx
xdg=$scratch/xdg-empty  # the per-user folder of every run here: absent
mkdir -p "$xdg"
# Nothing of the caller's plugin settings reaches the programs below.
unset LOOM_PLUGIN_PATH LOOM_PLUGIN_HOST
export XDG_DATA_HOME=$xdg
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
launcher=()
command -v ccache > /dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

step "cmake --install into $prefix"
cmake --install "$build" --prefix "$prefix" > "$scratch/install.log" ||
  { cat "$scratch/install.log"; fail "cmake --install $build failed"; }

step "layout"
for f in bin/loom bin/loom-manifest bin/loom-plugin-host; do
  [ -x "$prefix/$f" ] || fail "$f is missing or not executable"
done
major=${version%%.*}
lib=$prefix/lib
[ "$(readlink "$lib/libloom.so")" = "libloom.so.$major" ] ||
  fail "lib/libloom.so should link to libloom.so.$major, is: $(ls -l "$lib/libloom.so" 2>&1)"
[ "$(readlink "$lib/libloom.so.$major")" = "libloom.so.$version" ] ||
  fail "lib/libloom.so.$major should link to libloom.so.$version, is: $(ls -l "$lib/libloom.so.$major" 2>&1)"
[ -f "$lib/libloom.so.$version" ] && [ ! -L "$lib/libloom.so.$version" ] ||
  fail "lib/libloom.so.$version is not a file"
soname=$(objdump -p "$lib/libloom.so.$version" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libloom.so.$major" ] || fail "libloom's SONAME is '$soname', not libloom.so.$major"
[ "$(readlink "$lib/libloom-conformance.so")" = "libloom-conformance.so.$major" ] &&
  [ "$(readlink "$lib/libloom-conformance.so.$major")" = "libloom-conformance.so.$version" ] ||
  fail "lib/libloom-conformance.so is not linked to .$major and .$version: $(ls -l "$lib"/libloom-conformance.so* 2>&1)"
# The suite's library exports its own namespace only.
stray=$(nm -D --defined-only "$lib/libloom-conformance.so.$version" | awk '{ print $3 }' | c++filt |
          { grep -v "loom::conformance::" || true; } | head -5)
[ -z "$stray" ] || fail "libloom-conformance exports more than loom::conformance::: $stray"
# The compile side's library: linked the same way, its own namespace only,
# and libloom itself never needs it.
[ "$(readlink "$lib/libloom-compiler.so")" = "libloom-compiler.so.$major" ] &&
  [ "$(readlink "$lib/libloom-compiler.so.$major")" = "libloom-compiler.so.$version" ] ||
  fail "lib/libloom-compiler.so is not linked to .$major and .$version: $(ls -l "$lib"/libloom-compiler.so* 2>&1)"
stray=$(nm -D --defined-only "$lib/libloom-compiler.so.$version" | awk '{ print $3 }' | c++filt |
          { grep -v "loom::compiler::" || true; } | head -5)
[ -z "$stray" ] || fail "libloom-compiler exports more than loom::compiler::: $stray"
! objdump -p "$lib/libloom.so.$version" | grep -q "NEEDED.*loom-compiler" ||
  fail "libloom.so needs libloom-compiler.so"
for f in lib/cmake/Loom/LoomConfig.cmake lib/cmake/Loom/LoomConfigVersion.cmake \
         lib/cmake/Loom/LoomTargets.cmake lib/cmake/Loom/LoomPlugin.cmake \
         lib/pkgconfig/loom.pc lib/pkgconfig/loom-sdk.pc lib/pkgconfig/loom-conformance.pc \
         lib/pkgconfig/loom-compiler.pc include/loom/compiler.hpp \
         include/loom/conformance.hpp share/loom/schemas/graph.fbs \
         include/loom/version.hpp include/loom/graph/graph_generated.h; do
  [ -f "$prefix/$f" ] || fail "$f is missing"
done
# Every SDK header, and every runtime header but the compile side's.
while IFS= read -r h; do
  [ -f "$prefix/include/$h" ] || fail "include/$h (from sdk/include) is missing"
done < <(cd "$src/sdk/include" && find . -type f | sed 's|^\./||')
while IFS= read -r h; do
  [ -f "$prefix/include/$h" ] || fail "include/$h (from core/include) is missing"
done < <(cd "$src/core/include" && find . -type f ! -name onnx_initializers.hpp | sed 's|^\./||')
[ ! -e "$prefix/include/loom/onnx_initializers.hpp" ] || fail "include/loom/onnx_initializers.hpp is installed (libloom has no ONNX reader)"
for p in "${plugins[@]}"; do
  [ -f "$lib/loom/plugins/libloom_$p.so" ] || fail "lib/loom/plugins/libloom_$p.so is missing"
  [ -f "$lib/loom/plugins/$p.loom-plugin.json" ] || fail "lib/loom/plugins/$p.loom-plugin.json is missing"
done
manifests=$(find "$lib/loom/plugins" -name '*.loom-plugin.json' | wc -l)
[ "$manifests" = "${#plugins[@]}" ] ||
  fail "lib/loom/plugins has $manifests manifests, expected ${#plugins[@]} (${plugins[*]}): $(ls "$lib/loom/plugins")"
"$src/tests/install/check_plugin_exports.sh" "$lib"/loom/plugins/*.so > /dev/null

step "each installed header compiles alone from the prefix"
compile_header() {  # LANGUAGE STANDARD HEADER
  local out
  out=$(echo "#include \"$3\"" | ${CXX:-c++} -x "$1" "-std=$2" -fsyntax-only -Wall -Werror \
          -I"$prefix/include" - 2>&1) || fail "$3 does not compile alone (-x $1 -std=$2 -I$prefix/include): $out"
}
# The SDK's headers are C11 (.h) and C++17 (.hpp), the runtime's C++20.
while IFS= read -r h; do
  case "$h" in
    *.h) compile_header c c11 "$h"; compile_header c++ c++17 "$h" ;;
    *.hpp) compile_header c++ c++17 "$h" ;;
  esac
done < <(cd "$src/sdk/include" && find . -type f | sed 's|^\./||')
compile_header c++ c++17 loom/graph/graph_generated.h
# The C host API is C11 and C++.
compile_header c c11 loom/loom.h
compile_header c++ c++17 loom/loom.h
while IFS= read -r h; do
  compile_header c++ c++20 "$h"
done < <(cd "$prefix/include" && find loom -maxdepth 1 -name '*.hpp' | sort | while read -r f; do
           [ -f "$src/core/include/$f" ] || [ "$f" = loom/version.hpp ] || [ "$f" = loom/conformance.hpp ] && echo "$f"; done)

step "installed loom"
[ "$("$prefix/bin/loom" --version)" = "loom $version" ] ||
  fail "loom --version says '$("$prefix/bin/loom" --version)', expected 'loom $version'"
devices=$(cd / && "$prefix/bin/loom" devices 2>&1) || fail "loom devices failed: $devices"
for p in cpu-simd fpga-stub; do
  grep -q "^plugin $p .*\[loaded" <<< "$devices" || fail "loom devices does not list $p as loaded:
$devices"
done
if grep -q "rejected" <<< "$devices"; then fail "loom devices rejects a plugin:
$devices"; fi
grep -qF "  $prefix/lib/loom/plugins  (program)" <<< "$devices" ||
  fail "loom devices does not name $prefix/lib/loom/plugins as searched:
$devices"
grep -qF "  $xdg/loom/plugins  (user; does not exist)" <<< "$devices" ||
  fail "loom devices does not name the per-user folder $xdg/loom/plugins as missing:
$devices"

# A loom with no plugin anywhere says where it looked and how to add one.
mkdir -p "$scratch/bare/bin"
cp "$prefix/bin/loom" "$scratch/bare/bin/loom"
out=$("$scratch/bare/bin/loom" devices 2>&1) || fail "loom devices without plugins failed: $out"
grep -q "^No plugins found.*\$LOOM_PLUGIN_PATH" <<< "$out" && grep -qF "  $scratch/bare/lib/loom/plugins  (program; does not exist)" <<< "$out" ||
  fail "loom devices without plugins does not say where it looked and how to add one:
$out"

# Fails when a compile command of the project in BUILD_DIR names an include
# folder other than the prefix's, the project's own (SOURCE_DIR, BUILD_DIR)
# and the system's.
check_include_paths() {  # BUILD_DIR SOURCE_DIR
  python3 - "$1/compile_commands.json" "$prefix" "$1" "$2" "$src" "$build" << 'PY'
import json, os, re, shlex, sys
commands, prefix, own_build, own_src, loom_src, loom_build = sys.argv[1:]
allowed = [prefix, own_build, own_src]
bad = []
for entry in json.load(open(commands)):
    args = entry.get("arguments") or shlex.split(entry["command"])
    for i, a in enumerate(args):
        m = re.match(r"^(-I|-isystem|-iquote|-idirafter)(.*)$", a)
        if not m:
            continue
        path = m.group(2) or args[i + 1]
        path = os.path.realpath(os.path.join(entry["directory"], path))
        if any(path == d or path.startswith(d + "/") for d in allowed):
            continue
        if path.startswith("/usr/"):
            continue
        bad.append(f"{entry['file']}: {a} {'' if m.group(2) else path}")
if bad:
    print("include folders outside the prefix:\n  " + "\n  ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
}

# The consumer's host program and the installed loom, with PLUGIN_DIR on
# $LOOM_PLUGIN_PATH, both list the install-check plugin's device.
check_consumer_runs() {  # WHAT HOST_PROGRAM PLUGIN_DIR
  local out err
  err=$scratch/host.err
  out=$(cd / && LOOM_PLUGIN_PATH=$3 "$2" 2> "$err") || fail "$1: $2 failed: $(cat "$err")"
  for line in "plugin install-check loaded" "device install-check://0" "plugin cpu-simd loaded" \
              "folder LOOM_PLUGIN_PATH $3" "folder library $prefix/lib/loom/plugins"; do
    grep -qxF "$line" <<< "$out" || fail "$1: the host program's output has no line '$line':
$out
$(cat "$err")"
  done
  # It found the installed loom-plugin-host (no 'probe skipped' warning).
  if grep -q "loom-plugin-host" "$err"; then fail "$1: $(cat "$err")"; fi
  out=$(LOOM_PLUGIN_PATH=$3 "$prefix/bin/loom" devices 2>&1) || fail "$1: loom devices failed: $out"
  grep -q "^plugin install-check 2.3.4  \[loaded" <<< "$out" && grep -q "^  device install-check://0 " <<< "$out" ||
    fail "$1: the installed loom does not list the install-check plugin from $3:
$out"
}

# The conformance driver runs the installed suite on the installed cpu-simd.
check_conformance_driver() {  # WHAT PROGRAM
  local out report=$scratch/conformance-report.json
  rm -f "$report"
  out=$(cd / && "$2" "$prefix/lib/loom/plugins/cpu-simd.loom-plugin.json" "$report" 2>&1) ||
    fail "$1: $2 failed: $out"
  grep -q "^totals cpu-simd: [1-9][0-9]* passed, 0 failed" <<< "$out" && grep -qx "pass abi.negotiate" <<< "$out" ||
    fail "$1: the conformance driver's output is wrong:
$out"
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["totals"]["failed"] == 0 and r["plugin"]["name"] == "cpu-simd", r' \
    "$report" || fail "$1: the conformance driver's report is wrong: $(head -c 400 "$report")"
}

step "consumer with find_package(Loom)"
cp -r "$src/tests/install/consumer" "$scratch/consumer"
cbuild=$scratch/consumer-build
cmake -S "$scratch/consumer" -B "$cbuild" "${generator[@]}" "${launcher[@]}" \
      -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$scratch/consumer.log" 2>&1 ||
  { cat "$scratch/consumer.log"; fail "configuring the consumer failed"; }
grep -qxF "Loom_DIR:PATH=$prefix/lib/cmake/Loom" "$cbuild/CMakeCache.txt" ||
  fail "find_package(Loom) found $(grep '^Loom_DIR' "$cbuild/CMakeCache.txt"), not the prefix"
cmake --build "$cbuild" >> "$scratch/consumer.log" 2>&1 ||
  { cat "$scratch/consumer.log"; fail "building the consumer failed"; }
check_include_paths "$cbuild" "$scratch/consumer" || fail "the consumer's include path"
grep -q -- "-std=c++17" "$cbuild/compile_commands.json" || fail "the consumer plugin is not built as C++17"
"$src/tests/install/check_plugin_exports.sh" "$cbuild/lib/loom/plugins/libloom_install-check.so" > /dev/null
grep -q '"version": "2.3.4"' "$cbuild/lib/loom/plugins/install-check.loom-plugin.json" ||
  fail "the consumer plugin's manifest does not carry the project's version 2.3.4"
check_consumer_runs "find_package consumer" "$cbuild/list_devices" "$cbuild/lib/loom/plugins"
check_conformance_driver "find_package consumer" "$cbuild/run_conformance"
# It compiles an ONNX model itself (Loom::compiler) and runs the program.
out=$(cd / && "$cbuild/compile_model" "$onnx_relu" "$scratch/relu.loom" 2>&1) ||
  fail "find_package consumer: compile_model failed: $out"
grep -qx "nodes 1 on cpu-simd 1" <<< "$out" && grep -qx "0 0 0 1" <<< "$out" ||
  fail "find_package consumer: compile_model printed: $out"

step "consumer with pkg-config"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
pc=$scratch/pkg-config-build
mkdir -p "$pc/plugins"
sdk_cflags=$(pkg-config --cflags loom-sdk | xargs)
[ "$(realpath -m "${sdk_cflags#-I}")" = "$prefix/include" ] || fail "pkg-config --cflags loom-sdk says '$sdk_cflags'"
printf '{\n  global: loom_plugin_query;\n  local: *;\n};\n' > "$pc/exports.map"
# shellcheck disable=SC2046
${CXX:-c++} -std=c++17 -O1 -fPIC -shared -fvisibility=hidden -Wl,--no-undefined \
  -Wl,--version-script="$pc/exports.map" $(pkg-config --cflags loom-sdk) \
  "$scratch/consumer/install_check_plugin.cpp" -o "$pc/plugins/libloom_install-check.so" ||
  fail "building the plugin with pkg-config loom-sdk failed"
"$(pkg-config --variable=manifest_tool loom-sdk)" --library "$pc/plugins/libloom_install-check.so" \
  --name install-check --version 2.3.4 --abi-min 1.0 --abi-max 1.2 --loader-key install-check \
  --output "$pc/plugins/install-check.loom-plugin.json" || fail "loom-manifest failed"
# shellcheck disable=SC2046
${CXX:-c++} -std=c++20 -O1 "$scratch/consumer/list_devices.cpp" -o "$pc/list_devices" \
  $(pkg-config --cflags --libs loom) -Wl,-rpath,"$(pkg-config --variable=libdir loom)" ||
  fail "building the host program with pkg-config loom failed"
check_consumer_runs "pkg-config consumer" "$pc/list_devices" "$pc/plugins"
# A C application on the C host API (loom/loom.h), C11 and pedantic.
# shellcheck disable=SC2046
${CC:-cc} -std=c11 -pedantic -Wall -Werror -O1 "$scratch/consumer/list_devices_c.c" -o "$pc/list_devices_c" \
  $(pkg-config --cflags --libs loom) -Wl,-rpath,"$(pkg-config --variable=libdir loom)" ||
  fail "building the C host program with pkg-config loom failed"
out=$(cd / && LOOM_PLUGIN_PATH=$pc/plugins "$pc/list_devices_c" 2>&1) || fail "the C host program failed: $out"
grep -qx "device install-check://0" <<< "$out" && grep -qx "device cpu-simd://0" <<< "$out" ||
  fail "the C host program's output lacks the install-check and cpu-simd devices: $out"
objdump -T "$pc/list_devices_c" | grep -q "(LOOM_1) *loom_runtime_create$" ||
  fail "the C host program does not bind loom_runtime_create@LOOM_1: $(objdump -T "$pc/list_devices_c" | grep loom_)"
${CXX:-c++} -std=c++20 -O1 "$scratch/consumer/run_conformance.cpp" -o "$pc/run_conformance" \
  $(pkg-config --cflags --libs loom-conformance) -Wl,-rpath,"$(pkg-config --variable=libdir loom)" ||
  fail "building the conformance driver with pkg-config loom-conformance failed"
check_conformance_driver "pkg-config consumer" "$pc/run_conformance"

step "the Python package from the prefix"
if [ -d "$prefix/lib/python3/dist-packages/loom" ]; then
  out=$(cd / && PYTHONPATH=$prefix/lib/python3/dist-packages /usr/bin/python3 -c \
    'import loom; print(loom.__file__); print(" ".join(d["uri"] for d in loom.devices()))' 2>&1) ||
    fail "import loom from the prefix failed: $out"
  grep -q "^$prefix/lib/python3/dist-packages/loom/__init__.py$" <<< "$out" ||
    fail "import loom did not take the installed package: $out"
  grep -q "cpu-simd://0" <<< "$out" || fail "the installed package lists no cpu-simd device: $out"
elif [ -f "$build/python/loom/__init__.py" ]; then
  fail "the build has the Python package but the install put none in lib/python3/dist-packages/loom"
fi

step "SDK examples"
for cm in "$src"/sdk/examples/*/CMakeLists.txt; do
  [ -e "$cm" ] || continue
  example_src=$(dirname "$cm")
  name=$(basename "$example_src")
  ebuild=$scratch/examples/$name
  echo "-- $name"
  cmake -S "$example_src" -B "$ebuild" "${generator[@]}" "${launcher[@]}" \
        -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$scratch/example-$name.log" 2>&1 &&
    cmake --build "$ebuild" >> "$scratch/example-$name.log" 2>&1 ||
    { cat "$scratch/example-$name.log"; fail "building sdk/examples/$name from the prefix failed"; }
  check_include_paths "$ebuild" "$example_src" || fail "sdk/examples/$name's include path"
  if [ -f "$example_src/check.sh" ]; then
    bash "$example_src/check.sh" "$prefix" "$ebuild" || fail "sdk/examples/$name/check.sh failed"
  fi
  # The same example without CMake: the compiler, pkg-config's loom-sdk
  # flags and the installed loom-manifest, as a vendor's own build would.
  echo "-- $name with pkg-config"
  pbuild=$scratch/examples-pc/$name
  mkdir -p "$pbuild/plugins"
  printf '{ global: loom_plugin_query; local: *; };\n' > "$pbuild/exports.map"
  ${CXX:-c++} -std=c++17 -O1 -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden \
    -Wl,--no-undefined -Wl,--version-script="$pbuild/exports.map" \
    $(pkg-config --cflags loom-sdk) "$example_src"/src/*.cpp \
    -o "$pbuild/plugins/libloom_$name.so" > "$scratch/example-pc-$name.log" 2>&1 ||
    { cat "$scratch/example-pc-$name.log"; fail "building sdk/examples/$name with pkg-config loom-sdk failed"; }
  "$(pkg-config --variable=manifest_tool loom-sdk)" --library "$pbuild/plugins/libloom_$name.so" \
    --name "$name" --version 0.1.0 --abi-min 1.0 --abi-max 1.2 --loader-key "$name" \
    --output "$pbuild/plugins/$name.loom-plugin.json" ||
    fail "loom-manifest for the pkg-config build of $name failed"
  if [ -f "$example_src/check.sh" ]; then
    bash "$example_src/check.sh" "$prefix" "$pbuild" || fail "sdk/examples/$name/check.sh failed on the pkg-config build"
  fi
done

rm -rf "$scratch"
echo "check_install: all checks passed"
