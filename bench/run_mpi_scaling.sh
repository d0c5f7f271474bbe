#!/usr/bin/env bash
# Weak scaling over processes (drx/dist): `mpirun -np P drx fedavg` at cohort
# 32·P, one thread per rank, P = 1, 2 and 4 (4 oversubscribes a 2-core machine:
# reported, not judged), beside the thread mesh (`drx fedavg --devices P
# --threads P` in one process) at the same cohorts. Prints the paper-style
# table: median seconds per round as cohort and ranks grow together, the
# efficiency t(1)/t(P), and the most bytes a rank sends a round against the model.
#
#   bash bench/run_mpi_scaling.sh [--drx PATH] [--rounds N] [--ranks "1 2 4"]
#
# Defaults: the drx of build/ (scripts/build.sh makes it), 12 rounds (the
# first two, which compile, are left out of the median), fixed 8 local steps
# of batch 32, 256 clients of Fashion-MNIST.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
drx="$root/build/drx" rounds=12 ranks_list="1 2 4"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --drx) drx=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --ranks) ranks_list=$2; shift ;;
    *) echo "run_mpi_scaling: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$drx" ]] || { echo "run_mpi_scaling: no drx at $drx (build it first)" >&2; exit 1; }
work="$(mktemp -d "${TMPDIR:-/tmp}/drx-mpi-scaling.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export OMPI_MCA_btl_vader_single_copy_mechanism=none OPENBLAS_NUM_THREADS=1
flags=(--clients 256 --local-steps 8 --batch 32 --rounds "$rounds" --eval-every 100000
  --checkpoint-every 100000 --quiet --overwrite)

# Median of the per-round wall clock of rounds 3.. from a run's metrics.csv.
round_seconds() {
  awk -F, 'NR > 1 { if (NR > 3) print $5 - prev; prev = $5 }' "$1/metrics.csv" |
    sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

printf '%-6s %-7s %-14s %-11s %-14s %-11s %-20s %s\n' ranks cohort "ranks s/round" efficiency \
  "mesh s/round" efficiency "max MB/rank/round" "rank 0 ms/round in MPI"
t1_ranks="" t1_mesh=""
for p in $ranks_list; do
  cohort=$((32 * p))
  mpirun --oversubscribe --allow-run-as-root -np "$p" "$drx" fedavg "${flags[@]}" --cohort "$cohort" \
    --threads 1 --out "$work/ranks-$p" >"$work/ranks-$p.log" 2>&1 ||
    { cat "$work/ranks-$p.log" >&2; exit 1; }
  "$drx" fedavg "${flags[@]}" --cohort "$cohort" --devices "$p" --threads "$p" \
    --out "$work/mesh-$p" >"$work/mesh-$p.log" 2>&1 || { cat "$work/mesh-$p.log" >&2; exit 1; }
  tr=$(round_seconds "$work/ranks-$p") tm=$(round_seconds "$work/mesh-$p")
  t1_ranks=${t1_ranks:-$tr} t1_mesh=${t1_mesh:-$tm}
  sent=$(sed -nE 's/.*a rank sent at most ([0-9.e+]+) MB a round; the model is ([0-9.e+]+) MB.*/\1 (model \2)/p' \
    "$work/ranks-$p.log")
  waited=$(sed -nE 's/.*rank 0 communicated ([0-9.]+) ms a round.*/\1/p' "$work/ranks-$p.log")
  printf '%-6s %-7s %-14.4f %-11s %-14.4f %-11s %-20s %s\n' "$p" "$cohort" "$tr" \
    "$(awk -v a="$t1_ranks" -v b="$tr" 'BEGIN { printf "%.0f%%", 100 * a / b }')" "$tm" \
    "$(awk -v a="$t1_mesh" -v b="$tm" 'BEGIN { printf "%.0f%%", 100 * a / b }')" "${sent:-0}" \
    "${waited:-0}"
done
echo "(machine: $(nproc) cores; P above the cores oversubscribes them)"
