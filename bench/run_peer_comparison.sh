#!/usr/bin/env bash
# W1 side by side in one run: the PyTorch peer (shared/peers/torch_fedavg.py,
# every variant) and drx (bench/fedavg_w1.cpp), same sizes, then a table of
# seconds per round, GFLOP/s and the speed-up of drx over the best peer variant.
#
#   bash bench/run_peer_comparison.sh            # full W1, builds drx (Release)
#   bash bench/run_peer_comparison.sh --smoke    # tiny sizes; no torch -> peer skipped
#
# Options: --smoke, --rounds N, --cohort N, --steps N, --batch N, --hidden N
# (passed to both sides), --threads N (thread count for both sides; default: each
# side runs twice, with 1 thread and with every core, since on a loaded machine
# one thread can be the faster), --exe PATH (use this drx_fedavg_w1 instead of
# building), --scaling-exe PATH (likewise for drx_scaling), --no-peer,
# --no-scaling (skip weak scaling and memory).
# After W1: weak scaling (cohort 32*D on a mesh of D devices, D = 1, 2) and the
# peak memory of one round at cohort 32 and 1024 with index-based client data.
# Environment: BUILD_DIR (default build-bench at the root), JOBS (default 2),
# PEER (the peer script; default ../shared/peers/torch_fedavg.py next to the
# repository), PYTHON (default /usr/bin/python3, where Debian's torch lives).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${BUILD_DIR:-$root/build-bench}"
python="${PYTHON:-/usr/bin/python3}"
peer="${PEER:-$(cd "$root/.." && pwd)/shared/peers/torch_fedavg.py}"

smoke=0 no_peer=0 no_scaling=0 exe="" scaling_exe="" threads=""
sizes=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --no-peer) no_peer=1 ;;
    --exe) exe="${2:?--exe needs a path}"; shift ;;
    --scaling-exe) scaling_exe="${2:?--scaling-exe needs a path}"; shift ;;
    --no-scaling) no_scaling=1 ;;
    --threads) threads="${2:?--threads needs a value}"; shift ;;
    --rounds|--cohort|--steps|--batch|--hidden) sizes+=("$1" "${2:?$1 needs a value}"); shift ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_peer_comparison: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The smoke sizes of fedavg_w1 --smoke, spelled out so the peer runs the same.
if [[ $smoke == 1 ]]; then
  sizes=(--cohort 4 --steps 2 --batch 8 --hidden 16 --rounds 2 "${sizes[@]}")
fi

thread_counts=("${threads:-1}")
if [[ -z "$threads" && "$(nproc)" -gt 1 ]]; then thread_counts+=("$(nproc)"); fi

if [[ -z "$exe" ]]; then
  generator=()
  if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDRX_BUILD_BENCH=ON \
      -DDRX_BUILD_TESTS=OFF -DDRX_BUILD_EXAMPLES=OFF >/dev/null
  fi
  cmake --build "$build" --target drx_fedavg_w1 drx_scaling -j "${JOBS:-2}" >/dev/null
  exe="$build/bench/drx_fedavg_w1"
fi
[[ -n "$scaling_exe" ]] || scaling_exe="$(dirname "$exe")/drx_scaling"
[[ -x "$exe" ]] || { echo "run_peer_comparison: no executable at $exe" >&2; exit 1; }

results="$(mktemp)"
trap 'rm -f "$results"' EXIT

# Other load skews wall-clock times; the load average says how much there was.
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')," \
  "load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
if [[ $no_peer == 1 ]]; then
  echo "== peer: skipped (--no-peer)"
elif [[ ! -f "$peer" ]]; then
  if [[ $smoke == 1 ]]; then echo "== peer: skipped, $peer not found"
  else echo "run_peer_comparison: peer script $peer not found (set PEER=...)" >&2; exit 1; fi
elif ! "$python" -c 'import torch, functorch' >/dev/null 2>&1; then
  if [[ $smoke == 1 ]]; then
    echo "== peer: skipped, PyTorch is not installed for $python (bash scripts/setup_bench.sh installs it)"
  else
    echo "run_peer_comparison: PyTorch is not installed for $python;" \
      "run bash scripts/setup_bench.sh, or pass --no-peer" >&2
    exit 1
  fi
else
  echo "== peer: $peer"
  for t in "${thread_counts[@]}"; do
    "$python" "$peer" "${sizes[@]}" --variant both --threads "$t" | tee -a "$results"
  done
fi

echo "== drx: $exe"
drx_args=(--json "${sizes[@]}")
# The smoke run also checks the drx round against its float64 reference.
[[ $smoke == 1 ]] && drx_args+=(--check --sgemm-n 128 --dispatch-calls 500)
for t in "${thread_counts[@]}"; do
  # The sgemm and dispatch figures once, with the last (default: largest) count.
  extra=(--skip-sgemm --skip-dispatch)
  [[ "$t" == "${thread_counts[-1]}" ]] && extra=()
  "$exe" "${drx_args[@]}" --threads "$t" "${extra[@]}" | tee -a "$results"
done

if [[ $no_scaling == 0 ]]; then
  [[ -x "$scaling_exe" ]] || { echo "run_peer_comparison: no executable at $scaling_exe" >&2; exit 1; }
  echo "== drx scaling: $scaling_exe"
  scale_args=(--json)
  [[ $smoke == 1 ]] && scale_args+=(--smoke)
  "$scaling_exe" --weak-scaling "${scale_args[@]}" | tee -a "$results"
  big=1024
  [[ $smoke == 1 ]] && big=64
  for cohort in 32 "$big"; do
    "$scaling_exe" --memory --cohort "$cohort" --rounds 1 "${scale_args[@]}" | tee -a "$results"
  done
  "$scaling_exe" --memory --cohort "$big" --rounds 1 --no-chunk "${scale_args[@]}" | tee -a "$results"
fi

echo
python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
w1 = [r for r in rows if "peer" in r or r.get("bench") == "drx-w1"]
peers = [r for r in w1 if "peer" in r]
drx = [r for r in w1 if "bench" in r]
best = min(peers, key=lambda r: r["median_s"]) if peers else None
print(f"{'variant':<16} {'threads':>7} {'s/round (median)':>17} {'s/round (min)':>14} "
      f"{'GFLOP/s':>9} {'peer_best / this':>17}")
for r in w1:
    name = r.get("peer") or r["bench"]
    ratio = f"{best['median_s'] / r['median_s']:.3f}" if best else "-"
    threads = r.get("threads", "-")
    print(f"{name:<16} {threads:>7} {r['median_s']:>17.5f} {r['min_s']:>14.5f} {r['gflops']:>9.3f} {ratio:>17}")
print()
for d in drx:
    print(f"drx, {d['threads']} threads: first call (trace + compile + one round) "
          f"{d['first_call_s']:.3f} s; CPU time per round (median) {d['cpu_median_s']:.5f} s")
if best and drx:
    d = min(drx, key=lambda r: r["median_s"])
    print(f"W1 speed-up of drx (best: {d['threads']} threads) over the best peer variant "
          f"({best['peer']}, {best['threads']} threads): {best['median_s'] / d['median_s']:.3f}x "
          f"(issue 5 target: >= 2.5x)")
for r in rows:
    if r.get("bench") == "sgemm":
        if "skipped" in r: print(f"sgemm: skipped ({r['skipped']})")
        else: print(f"sgemm {r['n']}^3 ({r['blas']}, {r['threads']} threads): {r['gflops']:.2f} GFLOP/s")
    if r.get("bench") == "jit-dispatch":
        print(f"jit dispatch, {r['ops']}-op program on {r['shape']}: {r['us_per_call']:.2f} us/call "
              f"(target: < 20 us)")
weak = [r for r in rows if r.get("bench") == "weak-scaling"]
for r in weak:
    print(f"weak scaling: {r['devices']} device(s), cohort {r['cohort']}: {r['median_s']:.4f} s/round, "
          f"{r['gflops']:.2f} GFLOP/s, efficiency {100 * r['efficiency']:.1f}% (target: >= 90%)")
mem = [r for r in rows if r.get("bench") == "memory"]
for r in mem:
    print(f"memory: cohort {r['cohort']}, {'chunked' if r['chunked'] else 'unchunked'}: peak RSS "
          f"{r['peak_rss_mb']:.1f} MiB - inputs {r['inputs_mb']:.1f} MiB = {r['peak_minus_inputs_mb']:.1f} MiB")
chunked = sorted([r for r in mem if r["chunked"]], key=lambda r: r["cohort"])
if len(chunked) >= 2:
    lo, hi = chunked[0], chunked[-1]
    print(f"memory growth from cohort {lo['cohort']} to {hi['cohort']} (chunked): "
          f"{hi['peak_minus_inputs_mb'] / lo['peak_minus_inputs_mb']:.2f}x (target: < 2x)")
if not drx:
    sys.exit("run_peer_comparison: drx produced no W1 result")
EOF
