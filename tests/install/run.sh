#!/usr/bin/env bash
# Installs drx from a build tree into a fresh prefix, then builds and runs an
# outside project against it with find_package(drx CONFIG REQUIRED), as a user would.
#   usage: tests/install/run.sh [BUILD_DIR]      (default: ./build)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "${1:-$here/../../build}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/drx-install-test.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || {
  cat "$work/install.log" >&2
  exit 1
}
for f in include/drx/drx.h bin/drx lib/cmake/drx/drxConfig.cmake; do
  [[ -e "$prefix/$f" ]] || { echo "install test: $prefix/$f was not installed" >&2; exit 1; }
done
ls "$prefix"/lib*/libdrx.a >/dev/null || { echo "install test: libdrx.a was not installed" >&2; exit 1; }

# The outside project sees only the prefix: no include path or target from the source tree.
cmake -S "$here/app" -B "$work/app-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" || { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/app-build" || exit 1
"$work/app-build/drx_install_app"
# The dist component, where drx was built with MPI.
if [[ -f "$prefix/include/drx/dist/dist.h" ]]; then
  [[ -x "$work/app-build/drx_install_dist_app" ]] ||
    { echo "install test: drx::dist is installed but find_package(drx COMPONENTS dist) missed it" >&2; exit 1; }
  OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun --oversubscribe --allow-run-as-root -np 2 \
    "$work/app-build/drx_install_dist_app"
fi

# The Python package, where drx was built with it: `import drx` from the prefix alone (run
# outside the source tree, so the build's package cannot be picked up instead).
pkg=$(ls -d "$prefix"/lib/python3*/*-packages/drx 2>/dev/null || true)
if [[ -n "$pkg" ]]; then
  (cd "$work" && PYTHONPATH="$(dirname "$pkg")" /usr/bin/python3 -c '
import numpy as np, drx, sys
assert drx.__file__.startswith(sys.argv[1]), drx.__file__
assert float(drx.jit(lambda x: (x * x).sum())(np.arange(3.0))) == 5.0
' "$prefix") || { echo "install test: the installed Python package does not work" >&2; exit 1; }
fi

# The installed tool runs too.
"$prefix/bin/drx" help >/dev/null
echo "install test: OK (prefix $prefix)"
