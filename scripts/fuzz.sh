#!/usr/bin/env bash
# Runs drx's libFuzzer targets (fuzz/).
#
#   scripts/fuzz.sh TARGET SECONDS [LIBFUZZER_FLAGS...]   program_text, checkpoint, idx, stablehlo
#   scripts/fuzz.sh --ci SECONDS_EACH                    build all, run each; non-zero on a finding
#
# Builds build-fuzz/ (clang-14, ASan + UBSan + libFuzzer) when needed, installing the compiler
# through scripts/setup.sh if it is missing. Each run starts from a copy of the committed seed
# corpus fuzz/corpus/TARGET in a scratch directory, so new corpus entries never land in the
# repository; a crashing input is kept there and its path printed. stablehlo has no committed
# corpus: make_seeds writes its seeds (small hand-written modules) into the scratch directory,
# and when ../shared/stablehlo-testdata/modules exists libFuzzer also reads the modules there,
# as a second corpus directory it never writes to.
# CI uses --ci 60: a clean build-fuzz takes about 2.5 min at -j2 on 2 idle cores (5.5 min
# while another build competes), so build plus four 60 s runs stays within about 10 min.
# Environment: DRX_FUZZ_JOBS (build parallelism, default 2); DRX_FUZZ_KEEP=1 keeps the scratch
# directory after a clean run (to harvest its corpus); DRX_FUZZ_BUILD, another build directory
# (one configured with -DDRX_ROOT=SNAPSHOT fuzzes a fixed copy of the sources).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${DRX_FUZZ_BUILD:-$ROOT/build-fuzz}"
TARGETS=(program_text checkpoint idx stablehlo)
SHLO_MODULES="$ROOT/../shared/stablehlo-testdata/modules"
JOBS="${DRX_FUZZ_JOBS:-2}"

usage() {
  sed -n '4,5p' "$0" | sed 's/^# *//' >&2
  exit 2
}

build() {
  # clang-14 alone lacks the libFuzzer and sanitizer runtimes (libclang-rt-14-dev).
  if ! command -v clang++-14 >/dev/null ||
    [[ ! -e "$(clang++-14 -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a" ]]; then
    bash "$ROOT/scripts/setup.sh"
  fi
  if [[ ! -f "$BUILD/build.ninja" ]]; then
    nice -n 19 cmake -S "$ROOT/fuzz" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
  fi
  local start=$SECONDS
  nice -n 19 cmake --build "$BUILD" -j "$JOBS" -- "$@"
  echo "fuzz: build took $((SECONDS - start)) s"
}

# run_target NAME SECONDS [FLAGS...]: prints the execution count; returns libFuzzer's status.
run_target() {
  local name="$1" seconds="$2"
  shift 2
  local bin="$BUILD/${name}_fuzz"
  [[ -x "$bin" ]] || { echo "fuzz: no target '$name' (one of: ${TARGETS[*]})" >&2; return 2; }
  local scratch
  scratch="$(mktemp -d "${TMPDIR:-/tmp}/drx-fuzz-$name.XXXXXX")"
  mkdir -p "$scratch/corpus" "$scratch/artifacts"
  local extra=() max_len=8192
  if [[ -d "$ROOT/fuzz/corpus/$name" ]]; then
    cp "$ROOT/fuzz/corpus/$name/"* "$scratch/corpus/"
  else
    "$BUILD/make_seeds" "$scratch/seeds" "$name" >/dev/null
    mv "$scratch/seeds/$name/"* "$scratch/corpus/"
    rm -r "$scratch/seeds"
  fi
  if [[ "$name" == stablehlo ]]; then
    max_len=32768  # most of the JAX modules are larger than 8 KiB
    if [[ -d "$SHLO_MODULES" ]]; then extra=("$SHLO_MODULES"); fi
  fi
  local symbolizer
  symbolizer="$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)"
  echo "fuzz: $name for $seconds s in $scratch"
  local dict=()
  [[ -f "$ROOT/fuzz/$name.dict" ]] && dict=(-dict="$ROOT/fuzz/$name.dict")
  local rc=0 start=$SECONDS
  # The corpus copy comes first so libFuzzer adds new inputs there (only there: it reads the
  # directories after it); -max_len leaves room to grow beyond the small seeds.
  ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=0}${symbolizer:+:external_symbolizer_path=$symbolizer}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}" \
    nice -n 19 "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -max_len=$max_len \
    -print_final_stats=1 -artifact_prefix="$scratch/artifacts/" "${dict[@]}" "$@" \
    "$scratch/corpus" "${extra[@]}" \
    >"$scratch/log" 2>&1 || rc=$?
  local execs
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$scratch/log" | tail -1)"
  echo "fuzz: $name: ${execs:-?} executions in $((SECONDS - start)) s, corpus $(ls "$scratch/corpus" | wc -l) files"
  if [[ $rc -ne 0 ]] || compgen -G "$scratch/artifacts/*" >/dev/null; then
    tail -n 60 "$scratch/log" >&2
    echo "fuzz: $name FAILED (status $rc); inputs: $(ls -d "$scratch/artifacts/"* 2>/dev/null | tr '\n' ' ')" >&2
    echo "fuzz: reproduce with: $bin INPUT" >&2
    return 1
  fi
  if [[ "${DRX_FUZZ_KEEP:-0}" == 1 ]]; then
    echo "fuzz: kept $scratch"
  else
    rm -rf "$scratch"
  fi
}

[[ $# -ge 2 ]] || usage
if [[ "$1" == "--ci" ]]; then
  [[ $# -eq 2 && "$2" =~ ^[0-9]+$ ]] || usage
  start=$SECONDS
  build
  failed=()
  for t in "${TARGETS[@]}"; do
    run_target "$t" "$2" || failed+=("$t")
  done
  echo "fuzz: CI run took $((SECONDS - start)) s"
  if [[ ${#failed[@]} -ne 0 ]]; then
    echo "fuzz: findings in: ${failed[*]}" >&2
    exit 1
  fi
  exit 0
fi

name="${1%_fuzz}"
[[ " ${TARGETS[*]} " == *" $name "* && "$2" =~ ^[0-9]+$ ]] || usage
build "${name}_fuzz" make_seeds
run_target "$name" "$2" "${@:3}"
