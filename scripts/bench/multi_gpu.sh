#!/usr/bin/env bash
# Issue #26 on a machine with 2 GPUs: each model on one GPU, then split over both with
# `rmx launch -n 2 --backend nccl` in tensor and in pipeline mode, one after the other on the same
# files; one table (scripts/bench/multi_gpu_table.py). After the staging of docs/perf.md ("How
# to reproduce"), on the device tool's nvidia-h100-x2:
#   . /root/rmx-stage/env.sh && scripts/bench/multi_gpu.sh /root/rmx-stage/rmx [shape:quant ...]
# Shapes: mlx_side.py's SHAPES (default llama3-8b:4bit and qwen3-30b-a3b:4bit). Per setup:
# decode at batch 1 and STREAMS sequences at once (64-token prompts, 128 new tokens), prefill
# at 2,048 tokens, and the greedy tokens of a peaked copy (mlx_side.py make --peaked: logits far
# from ties) against the one-GPU run's. Env: ROUNDS (3), STREAMS (32), TOKENS=0 skips the peaked
# copy, LIMIT (s, 300) bounds each rmx run so a hang fails its row instead of the call,
# SETUPS (default "one tensor pipeline"), BACKEND (nccl; ring runs the same on a CPU machine).
set -euo pipefail
rmx=${1:?usage: multi_gpu.sh RMX_BINARY [shape:quant ...]}; shift
cases=${*:-"llama3-8b:4bit qwen3-30b-a3b:4bit"}
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_DIR:-/tmp/rmx-bench}
out=${OUT_DIR:-$work/multi}
rounds=${ROUNDS:-3}
streams=${STREAMS:-32}
limit=${LIMIT:-300}
mkdir -p "$work" "$out"

. "$here/run_timed.sh"

for c in $cases; do
  shape=${c%%:*}; quant=${c##*:}; dir=$work/$shape-$quant; peaked=$work/peaked/$shape-$quant
  [ -f "$dir/config.json" ] || python3 "$here/mlx_side.py" make --shape "$shape" --quant "$quant" --out "$dir"
  if [ "${TOKENS:-1}" != 0 ] && [ ! -f "$peaked/config.json" ]; then
    python3 "$here/mlx_side.py" make --shape "$shape" --quant "$quant" --out "$peaked" --peaked > /dev/null
  fi
  for setup in ${SETUPS:-one tensor pipeline}; do
    if [ "$setup" = one ]; then
      pre=(env CUDA_VISIBLE_DEVICES=0 "$rmx")
    else
      pre=("$rmx" launch -n 2 --backend "${BACKEND:-nccl}" --mode "$setup" -- rmx)
    fi
    run "$shape-$quant-$setup-decode" "${pre[@]}" bench "$dir" --prompt-tokens 64 --gen-tokens 128 \
      --rounds "$rounds" --streams "$streams" --json
    run "$shape-$quant-$setup-prefill" "${pre[@]}" bench "$dir" --prompt-tokens 2048 --gen-tokens 1 \
      --rounds "$rounds" --json
    if [ "${TOKENS:-1}" != 0 ]; then
      run "$shape-$quant-$setup-tokens" "${pre[@]}" bench "$peaked" --prompt-tokens 64 --gen-tokens 64 \
        --rounds 1 --warmup 0 --json
    fi
  done
done
python3 "$here/multi_gpu_table.py" "$out" $cases
