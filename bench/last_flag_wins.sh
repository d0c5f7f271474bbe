# Sourced by the comparison scripts. last_flag_wins ARGS... sets the array `flags_once` to ARGS
# with each --flag once, at its first place, with its last value: drx's training commands refuse
# a flag given twice, while these scripts let a caller's flag override a default.
# A --flag followed by a word that is not a --flag takes it as its value.
last_flag_wins() {
  local -a args=("$@") order=()
  local -A value=() valued=()
  local i=0 f
  while ((i < ${#args[@]})); do
    f=${args[i]}
    [[ -v "value[$f]" ]] || order+=("$f")
    if [[ $f == --* && $f != *=* ]] && ((i + 1 < ${#args[@]})) && [[ ${args[i + 1]} != --* ]]; then
      value[$f]=${args[i + 1]} valued[$f]=1
      i=$((i + 2))
    else
      value[$f]="" valued[$f]=""
      i=$((i + 1))
    fi
  done
  flags_once=()
  for f in "${order[@]}"; do
    flags_once+=("$f")
    [[ -n "${valued[$f]}" ]] && flags_once+=("${value[$f]}")
  done
  return 0
}
