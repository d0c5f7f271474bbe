#!/usr/bin/env bash
# Installs the Debian 12 packages that drx's build, tests and examples need.
# Idempotent: when every package is already installed it touches nothing, so
# scripts/test.sh can call it on every run.
set -euo pipefail

PACKAGES=(
  build-essential       # g++ 12, make
  cmake
  ninja-build
  libgtest-dev
  libgmock-dev
  libbenchmark-dev      # bench/
  libopenblas-dev       # dense linear algebra (dot_general kernels)
  zlib1g-dev            # reading .gz datasets
  clang-format          # style check of the sources
  python3
  python3-numpy         # tests/npy_test.cpp checks .npy files against NumPy itself
  dataset-fashion-mnist # the real dataset for the federated benchmark
  clang-14              # scripts/fuzz.sh: libFuzzer targets in fuzz/
  libclang-rt-14-dev    # libFuzzer, ASan and UBSan runtimes (clang-14 does not pull them in)
  llvm-14               # llvm-symbolizer for readable sanitizer stacks
  mlir-19-tools         # mlir-opt-19: tests check exported StableHLO (generic form) parses
  nlohmann-json3-dev    # plan.json of `drx split` and `drx aggregate`
  python3-distributed   # examples/dask_fedavg.py: client work on a Dask LocalCluster
  libopenmpi-dev        # drx/dist: programs across processes and hosts over MPI
  openmpi-bin           # mpirun, for drx/dist and `mpirun -np P drx fedavg`
)
# Extra packages may be asked for by the caller (scripts/setup_bench.sh does).
PACKAGES+=("$@")

missing=()
for p in "${PACKAGES[@]}"; do
  # `dpkg-query -W` succeeds for removed-but-configured packages too; check the status word.
  if [[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)" != "installed" ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: missing packages (${missing[*]}) and not root, and sudo is not available" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
