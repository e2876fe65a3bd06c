#!/usr/bin/env bash
# Installs the Debian 12 packages Loom needs to build and test.
# Idempotent: packages already installed are skipped, and apt is not
# touched at all when nothing is missing. Needs root or passwordless sudo
# only when something has to be installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  # compiler cache (the build uses it when present; its cache is kept
  # outside the clone, so a second run on the same machine is faster)
  ccache
  flatbuffers-compiler libflatbuffers-dev
  libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcli11-dev libxxhash-dev
  # compile side only (ONNX import, `loom params create --from-onnx`);
  # the runtime never links these
  libonnx-dev libprotobuf-dev
  # the ONNX backend test data: the oracle of `loom test-onnx`
  libonnx-testdata
  # tests/integration/make_qdq_cnn.py writes the quantized model the
  # fpga-stub CLI test splits (run with /usr/bin/python3)
  python3-onnx python3-numpy
  # the Python package (`import loom`, python/): pybind11 and the Python
  # headers to build it, pytest to test it (tests/python)
  pybind11-dev python3-dev python3-pytest
  # vulkan-compute: Vulkan headers, volk and glslc at build time (volk loads
  # the Vulkan loader at run time: the plugin never links it); lavapipe, the
  # loader and the Khronos validation layer for its tests
  libvulkan-dev libvulkan-volk-dev glslc libvulkan1 mesa-vulkan-drivers vulkan-validationlayers
  # cpu-simd: oneDNN runs its convolutions, matmuls and pooling (only the
  # plugin and the benchmark that measures it against oneDNN link it)
  libdnnl-dev
  # Debian builds oneDNN with its OpenCL GPU runtime, so its CMake package
  # (dnnl-config.cmake) requires the OpenCL headers and libOpenCL.so
  ocl-icd-opencl-dev opencl-c-headers
  # the libFuzzer harnesses (tests/fuzz, scripts/fuzz.sh, test.sh's fuzz
  # step): clang and its fuzzer/sanitizer runtimes
  clang libclang-rt-14-dev
  # loom serve (serve/): cpp-httplib for REST; gRPC C++, protoc and its gRPC
  # plugin for the gRPC service; curl and the Python gRPC client (stubs made
  # with grpc_tools at test time) are the protocol tests' clients
  libcpp-httplib-dev libgrpc++-dev protobuf-compiler protobuf-compiler-grpc curl
  python3-grpcio python3-grpc-tools
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
