#!/usr/bin/env bash
# Packs what benchmarks/gpu/run_checks.sh needs on a GPU machine that lacks
# Loom's Debian packages into one folder (default .gpu, which git ignores
# through .git/info/exclude): the loom CLI, loom-test-compare and
# backend_ops_bench, stripped; the plugins, stripped, with their manifests
# written again for the stripped files; and the shared libraries they take
# from Debian except glibc and libstdc++/libgcc (newer ones on the GPU
# machine serve), oneDNN xz-compressed (run_checks.sh unpacks it).
#
# usage: benchmarks/gpu/pack.sh [BUILD_DIR] [OUT_DIR]   (default build .gpu)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$repo/build}
out=${2:-$repo/.gpu}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/loom/plugins" "$out/deps"
for b in loom loom-test-compare backend_ops_bench; do
  strip -o "$out/bin/$b" "$build/bin/$b"
done
for so in "$build"/lib/loom/plugins/libloom_*.so; do
  strip -o "$out/lib/loom/plugins/$(basename "$so")" "$so"
done
for name in cpu-simd vulkan-compute fpga-stub; do
  json=$build/lib/loom/plugins/$name.loom-plugin.json
  keys=$(python3 -c 'import json,sys; print(" ".join("--loader-key " + k for k in json.load(open(sys.argv[1]))["loader_keys"]))' "$json")
  read -r abi_min abi_max version < <(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["abi"]["min"], m["abi"]["max"], m["version"])' "$json")
  # shellcheck disable=SC2086
  "$build/bin/loom-manifest" --library "$out/lib/loom/plugins/libloom_$name.so" --name "$name" \
    --version "$version" --abi-min "$abi_min" --abi-max "$abi_max" $keys \
    --output "$out/lib/loom/plugins/$name.loom-plugin.json"
done
for f in "$out"/bin/* "$out"/lib/loom/plugins/*.so; do
  ldd "$f" | awk '/=> \//{print $3}'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libstdc++.so.*|libgcc_s.so.*) continue ;;
  esac
  cp -L "$lib" "$out/deps/"
done
# The Vulkan loader (the plugin opens libvulkan.so.1 at run time) and GLVND,
# which NVIDIA's Vulkan driver (libGLX_nvidia) needs and a bare CUDA image lacks.
for lib in libvulkan.so.1 libGLdispatch.so.0 libGLX.so.0 libEGL.so.1 libOpenGL.so.0 libGL.so.1; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')" "$out/deps/"
done
xz -T2 -6 "$out/deps/libdnnl.so.2"
du -sh "$out"
