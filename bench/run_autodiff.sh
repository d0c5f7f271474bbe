#!/usr/bin/env bash
# Builds (Release) and runs the autodiff benchmark. Extra arguments go to the
# benchmark, e.g. --benchmark_min_time=2 --benchmark_repetitions=5.
# BUILD_DIR overrides the build folder (default: build-bench at the root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDRX_BUILD_BENCH=ON \
    -DDRX_BUILD_TESTS=OFF
fi
cmake --build "$build" --target drx_autodiff_bench -j "${JOBS:-2}"
exec "$build/bench/drx_autodiff_bench" "$@"
