#!/usr/bin/env bash
# A/B of environment knobs on one model, for docs/perf.md's notes (GPU machine; see
# scripts/gpu-bench.sh). Usage: scripts/bench/knobs.sh RMX MODEL_DIR [VAR=VALUE[,VAR=VALUE] ...]
# Times rmx's decode (64-token prompt, 128 new, median of ROUNDS) with nothing set, with each
# argument's settings, and mlx-lm on the same files, interleaved REPEAT times: the lent
# machines' speed drifts by ±20% between minutes, so only interleaved runs compare.
# METRIC=prefill times prefill of a 2,048-token prompt instead.
set -euo pipefail
RMX=${1:?usage: knobs.sh RMX MODEL_DIR [VAR=VALUE ...]}; dir=${2:?model dir}; shift 2
rounds=${ROUNDS:-3}
repeat=${REPEAT:-3}
if [ "${METRIC:-decode}" = prefill ]; then
  plen=2048; gen=1; key=prefill_tps
else
  plen=64; gen=128; key=decode_tps
fi
here=$(cd "$(dirname "$0")" && pwd)
settings=("(defaults)" "$@" "mlx-lm")
declare -A got
run() {
  if [ "$1" = mlx-lm ]; then
    python3 "$here/mlx_side.py" time --model "$dir" --prompt-len $plen --gen $gen --rounds "$rounds" |
      python3 -c 'import json,sys; print("%.1f" % json.load(sys.stdin)["'$key'"])'
    return
  fi
  local vars=()
  [ "$1" = "(defaults)" ] || IFS=, read -r -a vars <<<"$1"
  env "${vars[@]}" "$RMX" bench "$dir" --prompt-tokens $plen --gen-tokens $gen --rounds "$rounds" --json |
    python3 -c 'import json,sys; c=json.load(sys.stdin)["cases"][0]; print("%.1f" % c["'$key'"]["median"])'
}
for _ in $(seq "$repeat"); do
  for s in "${settings[@]}"; do got[$s]="${got[$s]:-} $(run "$s")"; done
done
echo "$(basename "$dir"): $key, median of $repeat interleaved runs (each run: median of $rounds)"
for s in "${settings[@]}"; do
  printf '  %-44s %s   [%s ]\n' "$s" "$(printf '%s\n' ${got[$s]} | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')" "${got[$s]}"
done
