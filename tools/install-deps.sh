#!/usr/bin/env bash
# Installs the Debian packages Kiln needs (the list in TOOLCHAIN.md). Without arguments: what the
# library, its backends and the `kiln` command build and run with (`make demo`). `--test` adds
# what the tests, benchmarks and CI's checks use (`make test`); `--report` adds Chromium (`make
# bench-report`); `--slurm` adds Slurm and munge (`make slurm-check`).
# Idempotent: when every package is present it does nothing and touches no network.
set -euo pipefail

packages=(
  build-essential cmake make git pkg-config ccache
  libtbb-dev llvm-15-dev libzstd-dev libopenblas-dev libdnnl-dev
  pocl-opencl-icd ocl-icd-opencl-dev opencl-headers opencl-c-headers libclblast-dev
  mesa-vulkan-drivers libvulkan-dev glslang-dev glslang-tools spirv-tools
  nlohmann-json3-dev libcli11-dev python3-dev python3-venv
)
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev python3-numpy
  vulkan-validationlayers vulkan-tools clinfo clang-format
  # Collectives across processes (distributed/, tests/dist/ under mpiexec): Open MPI.
  openmpi-bin libopenmpi-dev
  # The checks in .ci/run: clang-15 builds the sanitizer targets, its omp.h serves
  # onednn_matmul.cpp there (Kiln still links GCC's libgomp); dpkg-source builds a TSan oneTBB.
  clang-15 libomp-15-dev dpkg-dev
)

for arg in "$@"; do
  case "$arg" in
    --test) packages+=("${test_packages[@]}") ;;
    --report) packages+=(chromium) ;;
    --slurm) packages+=(slurm-wlm munge) ;;
    *) echo "install-deps: unknown option '$arg' (valid: --test, --report, --slurm)" >&2; exit 2 ;;
  esac
done

# The Python package builds with nanobind, which is on PyPI only: a venv at .venv (KILN_VENV
# elsewhere) made from the python3 on PATH, the interpreter that will import the package.
venv="${KILN_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}"
py_packages=("nanobind>=2,<4" numpy)
py_check="import nanobind, numpy"
if [[ " $* " == *" --test "* ]]; then
  py_packages+=(pytest ml_dtypes "scikit-build-core>=0.10")
  py_check+=", pytest, ml_dtypes, scikit_build_core"
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

make_venv() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$py_check" 2>/dev/null; then return; fi
  echo "install-deps: making $venv (${py_packages[*]})"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${py_packages[@]}"
}

if ((${#missing[@]} == 0)); then
  make_venv
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# force-unsafe-io: dpkg skips an fsync per unpacked file, as Debian's container images do; on a
# fresh machine that is most of dpkg's time for these ~185 packages.
$SUDO apt-get install -y -qq --no-install-recommends -o Dpkg::Options::=--force-unsafe-io \
  "${missing[@]}" > /dev/null
make_venv
echo "install-deps: done"
