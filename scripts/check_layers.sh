#!/usr/bin/env bash
# Fails when a file in drx/ includes a header of a layer above its own.
# The order is the one docs/ARCHITECTURE.md documents, lowest first; a layer
# may include its own headers and those of any layer below it.
set -euo pipefail
cd "$(dirname "$0")/.."

LAYERS=(array ir core ops random trace transforms mapreduce stablehlo exec export jit nn privacy optim data dist)

rank() {
  local i
  for i in "${!LAYERS[@]}"; do
    if [[ "${LAYERS[$i]}" == "$1" ]]; then
      echo "$i"
      return
    fi
  done
  echo -1
}

status=0
checked=0
for dir in drx/*/; do
  layer=$(basename "$dir")
  own=$(rank "$layer")
  if [[ "$own" -lt 0 ]]; then
    echo "check_layers: drx/$layer is not in the documented layer order (scripts/check_layers.sh, docs/ARCHITECTURE.md)" >&2
    status=1
    continue
  fi
  while IFS= read -r line; do
    file=${line%%:*}
    target=$(sed -E 's|.*#include "drx/([a-z_]+)/.*|\1|' <<<"$line")
    checked=$((checked + 1))
    dep=$(rank "$target")
    if [[ "$dep" -lt 0 || "$dep" -gt "$own" ]]; then
      echo "check_layers: $file (layer $layer) includes drx/$target/, a layer above it" >&2
      status=1
    fi
  done < <(grep -HE '^#include "drx/[a-z_]+/' "$dir"*.h "$dir"*.cpp 2>/dev/null || true)
done
# The README's layout table lists the layers in this order too (its rows of drx/ folders).
readme=$(grep -oE '^\| `drx/[a-z_]+/`' README.md | sed -E 's/.*drx\/([a-z_]+)\/.*/\1/' | tr '\n' ' ')
if [[ "$readme" != "${LAYERS[*]} " ]]; then
  echo "check_layers: README.md's layout table lists the layers as: $readme" >&2
  echo "check_layers: expected (this script's order):          ${LAYERS[*]}" >&2
  status=1
fi
if [[ "$status" -eq 0 ]]; then
  echo "check_layers: $checked include lines, every one points down the layer order; README.md's table lists the layers in that order"
fi
exit "$status"
