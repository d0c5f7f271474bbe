#!/usr/bin/env bash
# FedAvg on Fashion-MNIST as a batch job, every client in a process of its own.
# (Without per-client processes, one command runs a whole exported round from its files:
#   drx mapreduce run round-1/parts/plan.json --server round-1/server --clients round-1/clients --out OUT)
#
# `drx fedavg --export-rounds` trains in process and writes each round as a job: the round's
# MapReduce parts (drx split of the round over the clients' own data), the server's inputs and
# each client's data. This script then runs the rounds from those files alone:
#   server_prepare (drx run) -> each client's work, a separate `drx run` process on that
#   client's own .npy files, launched by xargs -P -> drx aggregate (canonical order, streaming)
#   -> server_update (drx run),
# feeding each round's params and state into the next, and checks that every round's results
# are bitwise those of drx fedavg in process. The plan names its values after the round's
# arguments and results (params/dense0/w, state/..., x, y, mask, weights, loss): a value NAME is
# the file NAME.npy, a '/' a subfolder, and a round's params/... and state/... results are the
# next round's inputs of the same names.
#
#   examples/batch_fedavg.sh [WORK_DIR]
# Environment: DRX (the drx program), ROUNDS (3), JOBS (client processes at a time, 2), DATA
# (the Fashion-MNIST folder), FEDAVG_FLAGS (drx fedavg's population and model; a small run by
# default: FEDAVG_FLAGS= gives drx fedavg's own defaults).
set -euo pipefail

DRX=${DRX:-drx}
ROUNDS=${ROUNDS:-3}
JOBS=${JOBS:-2}
WORK=${1:-$(mktemp -d)}
DATA_FLAG=()
[[ -n "${DATA:-}" ]] && DATA_FLAG=(--data "$DATA")

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

# run_part PARTS BASE OUT_DIR IN_DIR...: drx run PARTS/BASE.drx with its inputs (named in
# BASE.inputs) read from the first IN_DIR holding NAME.npy, its outputs written to OUT_DIR.
run_part() {
  local parts=$1 base=$2 out=$3
  shift 3
  local args=() name dir file
  while read -r name; do
    file=""
    for dir in "$@"; do
      if [[ -e "$dir/$name.npy" ]]; then file="$dir/$name.npy"; break; fi
    done
    if [[ -z "$file" ]]; then echo "batch_fedavg: $base: no input $name.npy in $*" >&2; return 1; fi
    args+=(--arg "$file")
  done < "$parts/$base.inputs"
  mkdir -p "$out"
  while read -r name; do
    mkdir -p "$(dirname "$out/$name.npy")"
    args+=(--out "$out/$name.npy")
  done < "$parts/$base.outputs"
  "$DRX" run "$parts/$base.drx" "${args[@]}"
}
export -f run_part
export DRX

rm -rf "$WORK/fedavg" "$WORK/rounds" "$WORK/batch"
read -r -a FLAGS <<< "${FEDAVG_FLAGS---clients 20 --cohort 4 --max-examples 3000 --hidden 32 --local-steps 4}"
"$DRX" fedavg "${DATA_FLAG[@]}" "${FLAGS[@]}" --rounds "$ROUNDS" --quiet --out "$WORK/fedavg" \
  --export-rounds "$WORK/rounds"

previous=""
for ((r = 1; r <= ROUNDS; r++)); do
  job="$WORK/rounds/round-$r"
  parts="$job/parts"
  server="$WORK/batch/round-$r/server"
  mkdir -p "$server"
  # The server's inputs: round 1's initial params and state, then the previous round's results
  # of the same names.
  from="$job/server"
  [[ -n "$previous" ]] && from="$previous"
  (cd "$job/server" && find . -name '*.npy') | while read -r name; do
    mkdir -p "$(dirname "$server/$name")"
    cp "$from/$name" "$server/$name"
  done
  clients=$(ls "$job/clients" | wc -l)
  stages=$(ls "$parts"/stage*.client_work.drx | wc -l)
  for ((s = 0; s < stages; s++)); do
    run_part "$parts" "stage$s.server_prepare" "$server" "$server"
    outs="$WORK/batch/round-$r/clients$s"
    t0=$(now)
    # One process per client, reading only its own data and what the server broadcast.
    seq 0 $((clients - 1)) | xargs -P "$JOBS" -I{} bash -c \
      'run_part "$1" "$2" "$3/{}" "$4/{}" "$5"' _ "$parts" "stage$s.client_work" "$outs" \
      "$job/clients" "$server"
    t1=$(now)
    "$DRX" aggregate "$parts/plan.json" --stage "$s" --clients "$outs" --out "$server" > /dev/null
    t2=$(now)
    run_part "$parts" "stage$s.server_update" "$server" "$server"
    echo "round $r stage $s: $clients client processes in $(elapsed "$t0" "$t1") s" \
      "($JOBS at a time), aggregate $(elapsed "$t1" "$t2") s"
  done
  # Every result of the round, bitwise against drx fedavg in process.
  while read -r name; do
    if ! cmp -s "$job/expected/$name" "$server/$name"; then
      echo "batch_fedavg: round $r: $name differs from drx fedavg's" >&2
      exit 1
    fi
  done < <(cd "$job/expected" && find . -name '*.npy')
  previous="$server"
done
echo "batch_fedavg: $ROUNDS rounds in separate processes, bitwise equal to drx fedavg"
