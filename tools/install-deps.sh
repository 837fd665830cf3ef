#!/usr/bin/env bash
# Installs every Debian package Kiln builds, tests or benchmarks with (the list in TOOLCHAIN.md).
# Idempotent: when every package is present it does nothing and touches no network.
set -euo pipefail

packages=(
  build-essential cmake make git pkg-config
  libtbb-dev llvm-15-dev clang-15 libzstd-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers opencl-c-headers opencl-clhpp-headers clinfo
  mesa-vulkan-drivers libvulkan-dev vulkan-tools vulkan-validationlayers
  glslang-dev glslang-tools spirv-tools
  libopenblas-dev libdnnl-dev libclblast-dev
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev ccache
  python3-numpy clang-format
  # The checks in .ci/run: clang-15's omp.h (onednn_matmul.cpp in the clang sanitizer builds;
  # Kiln still links GCC's libgomp) and dpkg-dev's dpkg-source (tools/build-tsan-tbb.sh).
  libomp-15-dev dpkg-dev
)

# `make bench-report` renders the benchmark report in headless Chromium: only that target asks.
if [ "${1:-}" = "--report" ]; then packages+=(chromium); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
