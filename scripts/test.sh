#!/usr/bin/env bash
# The whole check, as CI runs it: install packages, build with warnings as
# errors, run every test (unit tests, CLI, and the install test against an
# outside project). With DRX_SANITIZE_CI=1 (the default when CI=true) it also
# builds an ASan+UBSan tree in build-asan and runs the unit tests there, and a
# ThreadSanitizer tree in build-tsan for the concurrency tests, and runs each
# libFuzzer target (fuzz/) for a bounded time from its committed seed corpus.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

jobs="${DRX_JOBS:-$(nproc)}"
if [[ "${CI:-}" == "true" ]]; then sanitize_default=1; else sanitize_default=0; fi
sanitize="${DRX_SANITIZE_CI:-$sanitize_default}"

stage() { printf '\n== %s (%ds)\n' "$1" "$SECONDS"; }

stage "setup"
bash scripts/setup.sh

stage "configure + build (build/, -Werror)"
cmake -S . -B build -G Ninja -DDRX_WERROR=ON
cmake --build build -j "$jobs"

stage "tests (ctest: unit, cli, install)"
ctest --test-dir build --output-on-failure -j "$jobs"

if [[ "$sanitize" == "1" ]]; then
  # Also the build without MPI (-DDRX_MPI=OFF): drx/dist's mpirun tests stay
  # out of the sanitizer passes, and the executor's side of processes is
  # tested in-process (tests/process_group_test.cpp).
  stage "sanitizers (build-asan/, ASan+UBSan, -DDRX_MPI=OFF)"
  cmake -S . -B build-asan -G Ninja -DDRX_WERROR=ON -DDRX_SANITIZE=ON -DDRX_MPI=OFF -DDRX_PYTHON=OFF \
    -DCMAKE_BUILD_TYPE=Debug
  cmake --build build-asan -j "$jobs" --target drx_tests drx_cli
  # One process for the whole suite: ASan start-up per test would dominate.
  # allocator_may_return_null: a failed allocation returns null, as it does
  # without ASan, so the tests of drx's own out-of-memory errors run here too.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ./build-asan/drx_tests --gtest_brief=1
  ASAN_OPTIONS=detect_leaks=1 ./build-asan/drx demo >/dev/null
  # Without MPI, `drx fedavg --mpi` says so and exits 1.
  if ASAN_OPTIONS=detect_leaks=1 ./build-asan/drx fedavg --mpi --rounds 1 --out build-asan/nompi \
    2>build-asan/nompi.log; then
    echo "drx fedavg --mpi ran in a build without MPI" >&2
    exit 1
  fi
  grep -q "built without MPI" build-asan/nompi.log

  stage "thread sanitizer (build-tsan/, concurrency tests)"
  # oneDNN's OpenMP runtime is not instrumented either: this tree runs bf16 products on drx's
  # own loops (DRX_ONEDNN=OFF).
  cmake -S . -B build-tsan -G Ninja -DDRX_WERROR=ON -DDRX_SANITIZE=thread -DDRX_MPI=OFF -DDRX_ONEDNN=OFF -DDRX_PYTHON=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDRX_BUILD_BENCH=OFF -DDRX_BUILD_EXAMPLES=OFF
  # drx_concurrency_tests: the test files holding the suites below (CMakeLists.txt), not all.
  cmake --build build-tsan -j "$jobs" --target drx_concurrency_tests
  tsan_filter='Concurrency*:Mesh*:MeshTreeStack*:Exec*:Cond*:LoopExec*:NestedPlacements.Bitwise*:ThreadsAsProcesses*:CliFuzzRegression.BlasCall*:CliFuzzRegression.ProductsOnManyDevices*'
  # Every test the filter picks from all of drx_tests must be in the smaller executable.
  if ! diff <(./build/drx_tests --gtest_list_tests --gtest_filter="$tsan_filter") \
    <(./build-tsan/drx_concurrency_tests --gtest_list_tests --gtest_filter="$tsan_filter") >&2; then
    echo "drx_concurrency_tests lacks tests the ThreadSanitizer filter names: add their files" \
      "to DRX_CONCURRENCY_TEST_FILES (CMakeLists.txt)" >&2
    exit 1
  fi
  # OpenBLAS's own threads are not instrumented: keep its work on the caller.
  OPENBLAS_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ./build-tsan/drx_concurrency_tests --gtest_brief=1 --gtest_filter="$tsan_filter"

  stage "fuzzing (build-fuzz/, libFuzzer: program text, checkpoints, IDX files)"
  bash scripts/fuzz.sh --ci "${DRX_FUZZ_SECONDS:-60}"
fi

stage "all checks passed"
