#!/usr/bin/env bash
# Issue 34's CNN round side by side in one run: the drx timing bench
# (fedavg_cnn_round, target drx_fedavg_cnn_round) and the PyTorch peer
# (bench/torch_fedavg_cnn_round.py, variants loop and vmap), f32 and bf16, each
# with 1 and 2 threads, same sizes; then a Markdown table of seconds per round
# and GFLOP/s, the speed-up of drx (torch s/round / drx s/round) at equal
# threads, and best-of-threads (the fastest drx row over the fastest torch f32).
#
#   bash bench/run_cnn_peer_comparison.sh            # cohort 10, 10 steps of batch 32, 5 rounds
#   bash bench/run_cnn_peer_comparison.sh --smoke    # tiny sizes; a missing side is skipped
#
# Options: --smoke, --rounds N, --cohort N, --steps N, --batch N (passed to both
# sides), --threads "1 2" (the thread counts), --precisions "f32 bf16",
# --exe PATH (the drx bench; default BUILD_DIR/bench/drx_fedavg_cnn_round, or
# BUILD_DIR/bench/fedavg_cnn_round; skipped with a note when absent: build it
# with cmake --build BUILD_DIR --target drx_fedavg_cnn_round), --no-drx, --no-peer.
# Environment: BUILD_DIR (default build at the root), PYTHON (default
# /usr/bin/python3, where Debian's torch lives).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build}"
python="${PYTHON:-/usr/bin/python3}"
peer="$root/bench/torch_fedavg_cnn_round.py"

smoke=0 no_drx=0 no_peer=0 exe="" threads="1 2" precisions="f32 bf16"
sizes=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --no-drx) no_drx=1 ;;
    --no-peer) no_peer=1 ;;
    --exe) exe="${2:?--exe needs a path}"; shift ;;
    --threads) threads="${2:?--threads needs a value}"; shift ;;
    --precisions) precisions="${2:?--precisions needs a value}"; shift ;;
    --rounds|--cohort|--steps|--batch) sizes+=("$1" "${2:?$1 needs a value}"); shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_cnn_peer_comparison: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for p in $precisions; do
  [[ $p == f32 || $p == bf16 ]] || { echo "run_cnn_peer_comparison: precision '$p' is not f32 or bf16" >&2; exit 2; }
done

# Both sides get every size once: the defaults (or --smoke's) with the caller's
# flags in their place, so neither side has to accept a flag given twice.
declare -A size=([--cohort]=10 [--steps]=10 [--batch]=32 [--rounds]=5)
if [[ $smoke == 1 ]]; then size=([--cohort]=2 [--steps]=2 [--batch]=4 [--rounds]=2); fi
for ((i = 0; i < ${#sizes[@]}; i += 2)); do size[${sizes[i]}]=${sizes[i + 1]}; done
size_args=()
for f in --cohort --steps --batch --rounds; do size_args+=("$f" "${size[$f]}"); done

if [[ -z "$exe" ]]; then
  exe="$build/bench/drx_fedavg_cnn_round"
  [[ -x "$exe" || ! -x "$build/bench/fedavg_cnn_round" ]] || exe="$build/bench/fedavg_cnn_round"
fi

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

cpu="$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1)"
[[ -n "$cpu" ]] || cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== CPU: ${cpu:-unknown} ($(nproc) cores); load average $(cut -d' ' -f1-3 /proc/loadavg);" \
  "$(date -u +%Y-%m-%dT%H:%MZ)"
echo "== sizes: ${size_args[*]}; threads: $threads; precisions: $precisions"

if [[ $no_drx == 1 ]]; then
  echo "== drx: skipped (--no-drx)"
elif [[ ! -x "$exe" ]]; then
  echo "== drx: skipped, no executable at $exe (cmake --build ${build#"$root"/} --target drx_fedavg_cnn_round, or --exe PATH)"
else
  echo "== drx: $exe"
  for t in $threads; do
    for p in $precisions; do
      if ! out="$("$exe" --json "${size_args[@]}" --threads "$t" --precision "$p")"; then
        echo "run_cnn_peer_comparison: $exe failed with --threads $t --precision $p" >&2
        out="{\"error\": \"drx bench failed\"}"
      fi
      echo "$out"
      # Each JSON line tagged with the side and the settings it was run with.
      grep '^{' <<<"$out" | sed "s/^{/{\"side\": \"drx\", \"run_threads\": $t, \"run_precision\": \"$p\", /" >>"$results" || true
    done
  done
fi

if [[ $no_peer == 1 ]]; then
  echo "== torch: skipped (--no-peer)"
elif ! "$python" -c 'import torch, functorch' >/dev/null 2>&1; then
  echo "== torch: skipped, PyTorch is not installed for $python (bash scripts/setup_bench.sh installs it)"
else
  echo "== torch: $peer"
  for t in $threads; do
    for p in $precisions; do
      if ! out="$("$python" "$peer" "${size_args[@]}" --threads "$t" --precision "$p" --variant both)"; then
        echo "run_cnn_peer_comparison: $peer failed with --threads $t --precision $p" >&2
      fi
      echo "$out"
      grep '^{' <<<"$out" | sed "s/^{/{\"side\": \"torch\", \"run_threads\": $t, \"run_precision\": \"$p\", /" >>"$results" || true
    done
  done
fi

echo
"$python" - "$results" <<'EOF'
import json, sys
rows = []
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    r.setdefault("threads", r["run_threads"])
    r.setdefault("precision", r["run_precision"])
    r["name"] = "drx" if r["side"] == "drx" else "torch-" + r.get("variant", "?")
    rows.append(r)
ok = [r for r in rows if "median_s" in r and "error" not in r]
drx = [r for r in ok if r["side"] == "drx"]
torch = [r for r in ok if r["side"] == "torch"]
def nt(n):
    return f"{n} thread" + ("" if n == 1 else "s")
def fmt(x, spec):
    return format(x, spec) if isinstance(x, (int, float)) else "-"

print("| side | precision | threads | s/round (median) | s/round (min) | GFLOP/s |")
print("|---|---|---:|---:|---:|---:|")
for r in rows:
    if "error" in r or "median_s" not in r:
        print(f"| {r['name']} | {r['precision']} | {r['threads']} | error: {r.get('error', 'no median_s')} | | |")
        continue
    print(f"| {r['name']} | {r['precision']} | {r['threads']} | {r['median_s']:.4f} | "
          f"{fmt(r.get('min_s'), '.4f')} | {fmt(r.get('gflops'), '.1f')} |")

def best(rs):
    return min(rs, key=lambda r: r["median_s"]) if rs else None
if drx and torch:
    print()
    print("Speed-up of drx = torch s/round / drx s/round (median; > 1: drx is faster).")
    print()
    print("| threads | drx precision | drx s/round | best torch, same precision | speed-up | "
          "best torch f32 | speed-up |")
    print("|---:|---|---:|---|---:|---|---:|")
    for d in drx:
        same = best([r for r in torch if r["threads"] == d["threads"] and r["precision"] == d["precision"]])
        f32 = best([r for r in torch if r["threads"] == d["threads"] and r["precision"] == "f32"])
        cells = []
        for t in (same, f32):
            if t:
                cells += [f"{t['name']} {t['median_s']:.4f}", f"{t['median_s'] / d['median_s']:.2f}x"]
            else:
                cells += ["-", "-"]
        print(f"| {d['threads']} | {d['precision']} | {d['median_s']:.4f} | " + " | ".join(cells) + " |")
    bd = best(drx)
    bt = best([r for r in torch if r["precision"] == "f32"])
    print()
    if bt:
        print(f"Best of threads: drx {bd['precision']}, {nt(bd['threads'])}, {bd['median_s']:.4f} s/round "
              f"over the best torch f32 ({bt['name']}, {nt(bt['threads'])}, {bt['median_s']:.4f} s/round): "
              f"**{bt['median_s'] / bd['median_s']:.2f}x**")
    ba = best(torch)
    if ba and ba is not bt:
        print(f"(the best torch row of any precision: {ba['name']} {ba['precision']}, {nt(ba['threads'])}, "
              f"{ba['median_s']:.4f} s/round: {ba['median_s'] / bd['median_s']:.2f}x)")
for d in drx:
    if "first_call_s" in d:
        print(f"drx {d['precision']}, {nt(d['threads'])}: first call (trace + compile + one round) "
              f"{d['first_call_s']:.3f} s" + (f"; CPU time per round (median) {d['cpu_median_s']:.4f} s"
                                              if "cpu_median_s" in d else ""))
if not ok:
    sys.exit("run_cnn_peer_comparison: neither side produced a timing")
EOF
