#!/usr/bin/env bash
# `mpirun -np P drx fedavg` against one process, bitwise (tests/mpi/same_run.cpp
# and metrics.csv without elapsed_s), and what happens when a rank dies or
# stops: the job ends with drx's message within a bound, and --resume then
# finishes the run bit-identically.
#   usage: fedavg_ranks.sh MODE DRX SAME_RUN WORKDIR
#   MODE: equal-np2 | equal-np3 | equal-np2-devices2 | kill | stop | diverge
set -uo pipefail
mode=$1 drx=$2 same_run=$3 work=$4
mpirun=(mpirun --oversubscribe --allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf "$work" && mkdir -p "$work"
# The real dataset and model; evaluated (and so compared) every round, which also makes the
# rounds long enough to stop a rank in the middle of the run.
flags=(--rounds 20 --threads 1 --quiet --eval-every 1 --checkpoint-every 1)

fail() { echo "fedavg_ranks $mode: FAIL: $*" >&2; exit 1; }

alone() {  # the reference: one process
  "$drx" fedavg "${flags[@]}" "$@" --out "$work/alone" >"$work/alone.log" 2>&1 ||
    { grep -q "cannot open" "$work/alone.log" && { echo "SKIP: Fashion-MNIST is not installed"; exit 0; }
      cat "$work/alone.log"; fail "the one-process run failed"; }
}

same() {  # DIR: the same run as $work/alone
  "$same_run" "$work/alone/checkpoint.bin" "$1/checkpoint.bin" || fail "checkpoints differ"
  diff <(cut -d, -f1-4,6- "$work/alone/metrics.csv") <(cut -d, -f1-4,6- "$1/metrics.csv") ||
    fail "metrics.csv differs (elapsed_s aside)"
}

# PID of rank R of the job writing to DIR.
rank_pid() {
  local r=$1 dir=$2 p
  for p in $(pgrep -f "fedavg.*--out $dir"); do
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$r"; then
      echo "$p"; return 0
    fi
  done
  return 1
}

# Runs a 2-rank job, sends SIGNAL to rank 1 once round 2's metrics are written (of 20), and
# checks the job ends non-zero within LIMIT seconds; then resumes it to the end.
interrupted() {
  local signal=$1 limit=$2
  shift 2
  local dir="$work/ranks"
  "${mpirun[@]}" -np 2 "$drx" fedavg "${flags[@]}" "$@" --out "$dir" >"$work/job.log" 2>&1 &
  local job=$!
  for _ in $(seq 600); do
    [[ -f "$dir/metrics.csv" ]] && [[ $(wc -l <"$dir/metrics.csv") -ge 3 ]] && break
    sleep 0.1
  done
  local victim
  victim=$(rank_pid 1 "$dir") || { kill -9 $job; fail "no rank 1 found"; }
  kill "-$signal" "$victim"
  local start=$SECONDS
  while kill -0 $job 2>/dev/null; do
    if ((SECONDS - start > limit)); then
      kill -9 "$victim" $job 2>/dev/null
      fail "the job still runs $limit s after SIG$signal of rank 1"
    fi
    sleep 0.2
  done
  wait $job && fail "the job exited 0 after SIG$signal of rank 1 (had it finished already?)"
  [[ $(wc -l <"$dir/metrics.csv") -le 20 ]] || fail "the job finished all its rounds before SIG$signal"
  echo "SIG$signal of rank 1: the job ended non-zero after $((SECONDS - start)) s"
  kill -9 "$victim" 2>/dev/null
  pkill -9 -f "fedavg.*--out $dir" 2>/dev/null
  cat "$work/job.log"
  "${mpirun[@]}" -np 2 "$drx" fedavg "${flags[@]}" "$@" --resume --out "$dir" \
    >"$work/resume.log" 2>&1 || { cat "$work/resume.log"; fail "--resume failed"; }
  same "$dir"
}

case "$mode" in
  equal-np2)
    # Exactly `drx fedavg --rounds 20` against `mpirun -np 2 drx fedavg --rounds 20`, each
    # with its default threads (all cores; under mpirun the cores shared by the ranks).
    flags=(--rounds 20 --quiet)
    alone
    "${mpirun[@]}" -np 2 "$drx" fedavg "${flags[@]}" --out "$work/ranks" \
      >"$work/ranks.log" 2>&1 || { cat "$work/ranks.log"; fail "the mpirun job failed"; }
    same "$work/ranks"
    ;;
  equal-np3)
    alone
    "${mpirun[@]}" -np 3 "$drx" fedavg "${flags[@]}" --out "$work/ranks" \
      >"$work/ranks.log" 2>&1 || { cat "$work/ranks.log"; fail "the mpirun job failed"; }
    same "$work/ranks"
    ;;
  equal-np2-devices2)
    alone --devices 2
    "${mpirun[@]}" -np 2 "$drx" fedavg "${flags[@]}" --devices 2 --out "$work/ranks" \
      >"$work/ranks.log" 2>&1 || { cat "$work/ranks.log"; fail "the mpirun job failed"; }
    same "$work/ranks"
    ;;
  kill)
    alone
    interrupted KILL 60
    ;;
  stop)
    alone
    interrupted STOP 60 --mpi-timeout 3
    grep -q "rank 1 stopped responding during .* of round [0-9]" "$work/job.log" ||
      fail "no 'rank 1 stopped responding during ... of round N' message"
    ;;
  diverge)
    # Rank 0 decides that round 2 diverged and tells rank 1: both stop there, exit code 3,
    # with the outputs of one process (the checkpoint of round 1, metrics with nan).
    flags=(--rounds 10 --threads 1 --quiet --max-examples 6000 --client-lr 1000)
    "$drx" fedavg "${flags[@]}" --out "$work/alone" >"$work/alone.log" 2>&1
    code=$?
    grep -q "cannot open" "$work/alone.log" && { echo "SKIP: Fashion-MNIST is not installed"; exit 0; }
    [[ $code == 3 ]] || { cat "$work/alone.log"; fail "one process: exit code $code, expected 3"; }
    grep -q "diverged at round 2" "$work/alone.log" || fail "no 'diverged at round 2' message"
    "${mpirun[@]}" -np 2 "$drx" fedavg "${flags[@]}" --out "$work/ranks" >"$work/ranks.log" 2>&1
    code=$?
    [[ $code == 3 ]] || { cat "$work/ranks.log"; fail "mpirun -np 2: exit code $code, expected 3"; }
    grep -q "diverged at round 2" "$work/ranks.log" || fail "no 'diverged at round 2' from the job"
    same "$work/ranks"
    ;;
  *) fail "unknown mode" ;;
esac
echo "fedavg_ranks $mode: bitwise equal to one process"
