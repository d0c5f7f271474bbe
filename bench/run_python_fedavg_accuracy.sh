#!/usr/bin/env bash
# FedAvg on Fashion-MNIST from Python (examples/python/fedavg_fmnist.py) beside
# `drx fedavg`, both with drx fedavg's defaults (IID, 100 clients, cohort 10,
# MLP 784-200-200-10, 1 local epoch of batch-32 SGD at lr 0.1, FedAvg, 650
# rounds, evaluation every 10). Runs drx fedavg, then the example with the C++
# MLP round (--round cpp), then with the generic round and a Python loss
# (--round python), one at a time, and prints a Markdown table: the final test
# accuracy, the mean over the last 10 evaluations and each process's wall time
# (data loading and compilation included).
#
#   bash bench/run_python_fedavg_accuracy.sh
#   bash bench/run_python_fedavg_accuracy.sh -- --rounds 100   # flags for every run
#
# Options: --exe PATH (default ./build/drx), --pythonpath DIR (default
# ./build/python); anything after -- goes to every run (the flags both sides
# share: --data, --rounds, --clients, --cohort, --seed, --eval-every).
# Environment: PYTHON (default /usr/bin/python3).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-/usr/bin/python3}"
exe="$root/build/drx" pythonpath="$root/build/python"
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --exe) exe="${2:?--exe needs a path}"; shift ;;
    --pythonpath) pythonpath="${2:?--pythonpath needs a directory}"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_python_fedavg_accuracy: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x "$exe" ]] || { echo "run_python_fedavg_accuracy: no drx program at '$exe' (build it first)" >&2; exit 1; }
data=/usr/share/datasets/fashion-mnist
for ((i = 0; i < ${#extra[@]}; ++i)); do
  case "${extra[i]}" in
    --data) data="${extra[i + 1]:-}" ;;
    --data=*) data="${extra[i]#--data=}" ;;
  esac
done
[[ -d "$data" ]] || { echo "run_python_fedavg_accuracy: no Fashion-MNIST in '$data'" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
now_ns() { date +%s%N; }
seconds_since() { awk -v ns=$(($(now_ns) - $1)) 'BEGIN { printf "%.1f", ns / 1e9 }'; }
# "final last-10-mean" from a list of accuracies, oldest first.
summarize() { awk '{ a[NR] = $1 } END { n = NR < 10 ? NR : 10; for (i = NR - n + 1; i <= NR; ++i) s += a[i];
                     printf "%.4f %.4f\n", a[NR], s / n }'; }

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| run | final test accuracy | mean of last 10 evals | seconds |"
echo "|---|---:|---:|---:|"

start=$(now_ns)
"$exe" fedavg "${extra[@]}" --out "$work/drx" --quiet >/dev/null
s=$(seconds_since "$start")
read -r final mean < <(awk -F, 'NR > 1 && $4 != "" { print $4 }' "$work/drx/metrics.csv" | summarize)
printf '| drx fedavg | %s | %s | %s |\n' "$final" "$mean" "$s"

for kind in cpp python; do
  start=$(now_ns)
  PYTHONPATH="$pythonpath" "$python" "$root/examples/python/fedavg_fmnist.py" --round "$kind" \
    "${extra[@]}" >"$work/py-$kind.log"
  s=$(seconds_since "$start")
  read -r final mean < <(sed -n 's/^round .*test accuracy \([0-9.]*\).*/\1/p' "$work/py-$kind.log" | summarize)
  printf '| fedavg_fmnist.py --round %s | %s | %s | %s |\n' "$kind" "$final" "$mean" "$s"
done
