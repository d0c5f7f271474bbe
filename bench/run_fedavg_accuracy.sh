#!/usr/bin/env bash
# Issue 6's accuracy table: `drx fedavg` and the PyTorch peer
# (bench/torch_fedavg_fmnist.py) with the same hyperparameters on Fashion-MNIST,
# for IID and Dirichlet(alpha) label skew with alpha = 0.1 and 0.5. Prints the
# final test accuracy and the seconds each run took, as a Markdown table.
#
#   bash bench/run_fedavg_accuracy.sh               # drx fedavg's defaults
#   bash bench/run_fedavg_accuracy.sh --smoke       # 3 rounds on 6000 examples
#
# Options: --exe PATH (the drx program; default ./build/drx, built if absent),
# --no-peer, --smoke; anything after -- goes to both sides (e.g. -- --rounds 100).
# Environment: PYTHON (default /usr/bin/python3, where Debian's torch lives).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
[[ $smoke == 1 ]] && extra=(--rounds 3 --eval-every 1 --max-examples 6000 --clients 20 --cohort 4 "${extra[@]}")
if [[ $no_peer == 0 ]] && ! "$python" -c 'import torch' >/dev/null 2>&1; then
  echo "== peer: skipped, PyTorch is not installed for $python (bash scripts/setup_bench.sh)"
  no_peer=1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| partition | drx accuracy | drx seconds | PyTorch accuracy | PyTorch seconds |"
echo "|---|---:|---:|---:|---:|"
for setting in "iid" "dirichlet 0.1" "dirichlet 0.5"; do
  read -r partition alpha <<<"$setting"
  flags=(--partition "$partition")
  [[ -n "${alpha:-}" ]] && flags+=(--alpha "$alpha")
  out="$work/${partition}${alpha:-}"
  start=$(date +%s%N)
  "$exe" fedavg "${flags[@]}" "${extra[@]}" --out "$out" --quiet >/dev/null
  drx_s=$(awk -v ns=$(($(date +%s%N) - start)) 'BEGIN { print ns / 1e9 }')
  drx_acc=$(awk -F, 'NR > 1 && $4 != "" { a = $4 } END { print a }' "$out/metrics.csv")
  peer_acc="-" peer_s="-"
  if [[ $no_peer == 0 ]]; then
    line=$("$python" "$root/bench/torch_fedavg_fmnist.py" "${flags[@]}" "${extra[@]}" | tail -n 1)
    peer_acc=$(echo "$line" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["test_accuracy"])')
    peer_s=$(echo "$line" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
  fi
  printf '| %s | %.4f | %.1f | %s | %s |\n' "$setting" "$drx_acc" "$drx_s" "$peer_acc" "$peer_s"
done
