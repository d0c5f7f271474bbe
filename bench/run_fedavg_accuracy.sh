#!/usr/bin/env bash
# Issue 6's accuracy table: `drx fedavg` and the PyTorch peer
# (bench/torch_fedavg_fmnist.py) with the same hyperparameters on Fashion-MNIST,
# for IID and Dirichlet(alpha) label skew with alpha = 0.1 and 0.5. Prints the
# final test accuracy, the mean over the last 10 evaluations (FedAvg's test
# accuracy swings from round to round, most under label skew, so one
# evaluation is a noisy comparison) and the seconds each run took, as a
# Markdown table.
#
#   bash bench/run_fedavg_accuracy.sh               # drx fedavg's defaults
#   bash bench/run_fedavg_accuracy.sh --smoke       # 3 rounds on 6000 examples
#
# Options: --exe PATH (the drx program; default ./build/drx, built if absent),
# --no-peer, --smoke; anything after -- goes to both sides (e.g. -- --rounds 100).
# Environment: PYTHON (default /usr/bin/python3, where Debian's torch lives).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/last_flag_wins.sh
source "$root/bench/last_flag_wins.sh"
python="${PYTHON:-/usr/bin/python3}"
exe="" no_peer=0 smoke=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --exe) exe="${2:?--exe needs a path}"; shift ;;
    --no-peer) no_peer=1 ;;
    --smoke) smoke=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_fedavg_accuracy: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ -z "$exe" ]]; then
  exe="$root/build/drx"
  [[ -x "$exe" ]] || { cmake -S "$root" -B "$root/build" -G Ninja >/dev/null && cmake --build "$root/build" --target drx_cli >/dev/null; }
fi
# The peer gets drx fedavg's default number of rounds unless told otherwise.
rounds=$("$exe" help fedavg | sed -n 's/^ *--rounds N .*(default \([0-9]*\)).*/\1/p')
[[ -n "$rounds" ]] || { echo "run_fedavg_accuracy: cannot read the default --rounds from '$exe help fedavg'" >&2; exit 1; }
smoke_flags=()
[[ $smoke == 1 ]] && smoke_flags=(--rounds 3 --eval-every 1 --max-examples 6000 --clients 20 --cohort 4)
# Later flags win on both sides: the defaults, then --smoke's, then the caller's.
extra=(--rounds "$rounds" "${smoke_flags[@]}" "${extra[@]}")
if [[ $no_peer == 0 ]] && ! "$python" -c 'import torch' >/dev/null 2>&1; then
  echo "== peer: skipped, PyTorch is not installed for $python (bash scripts/setup_bench.sh)"
  no_peer=1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| partition | drx final | drx last-10 mean | drx seconds | PyTorch final | PyTorch last-10 mean | PyTorch seconds |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for setting in "iid" "dirichlet 0.1" "dirichlet 0.5"; do
  read -r partition alpha <<<"$setting"
  flags=(--partition "$partition")
  [[ -n "${alpha:-}" ]] && flags+=(--alpha "$alpha")
  out="$work/${partition}${alpha:-}"
  start=$(date +%s%N)
  last_flag_wins "${flags[@]}" "${extra[@]}" --out "$out" --quiet
  "$exe" fedavg "${flags_once[@]}" >/dev/null
  drx_s=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { print ns / 1e9 }')
  # The evaluated rows' accuracies, oldest first.
  drx_accs=$(awk -F, 'NR > 1 && $4 != "" { print $4 }' "$out/metrics.csv")
  drx_acc=$(echo "$drx_accs" | tail -n 1)
  drx_mean=$(echo "$drx_accs" | tail -n 10 | awk '{ s += $1 } END { printf "%.4f", s / NR }')
  peer_acc="-" peer_mean="-" peer_s="-"
  if [[ $no_peer == 0 ]]; then
    "$python" "$root/bench/torch_fedavg_fmnist.py" "${flags[@]}" "${extra[@]}" >"$out/peer.jsonl"
    read -r peer_acc peer_mean peer_s < <("$python" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
evals = [r["test_accuracy"] for r in rows if "round" in r][-10:]
last = rows[-1]
print("%.4f %.4f %.1f" % (last["test_accuracy"], sum(evals) / len(evals), last["seconds"]))
' "$out/peer.jsonl")
  fi
  printf '| %s | %.4f | %s | %.1f | %s | %s | %s |\n' "$setting" "$drx_acc" "$drx_mean" "$drx_s" \
    "$peer_acc" "$peer_mean" "$peer_s"
done
