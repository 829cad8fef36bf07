#!/usr/bin/env bash
# Runs on the GPU machine (see ../shared/device/stage.sh and docs/perf.md): writes random-weight
# models of real shapes with mlx-lm, runs rmx and mlx-lm on the same files one after the other,
# and prints one table. Usage: scripts/gpu-bench.sh RMX_BINARY [SHAPE:QUANT ...]
# Shapes: scripts/bench/mlx_side.py's SHAPES (dense: llama3-8b, qwen3-0.6b; MoE: qwen3-30b-a3b,
# gpt-oss-20b (also :mxfp4); hybrid: qwen3.5-9b, qwen3.5-35b-a3b).
set -euo pipefail
RMX=${1:?usage: gpu-bench.sh RMX_BINARY [shape:quant ...]}; shift
CASES=${*:-"llama3-8b:4bit qwen3-0.6b:4bit llama3-8b:8bit llama3-8b:bf16 qwen3-0.6b:8bit qwen3-0.6b:bf16"}
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_DIR:-/tmp/rmx-bench}
rounds=${ROUNDS:-3}
# AB=1 also times rmx with its CUDA fast path off (RMX_FAST_PATH=0), for docs/perf.md's notes;
# AB_ENV='VAR=VALUE ...' sets what the second run changes instead (e.g. RMX_DELTA_STEP=0).
ab=${AB:-0}
ab_env=${AB_ENV:-RMX_FAST_PATH=0}
mkdir -p "$work"
bw=$(python3 "$here/bench/mlx_side.py" copybw | python3 -c 'import json,sys; print(json.load(sys.stdin)["copy_bytes_per_s"])')
printf 'copy bandwidth: %.0f GB/s\n' "$(python3 -c "print($bw/1e9)")"
rows=()
for c in $CASES; do
  shape=${c%%:*}; quant=${c##*:}; dir=$work/$shape-$quant
  [ -f "$dir/config.json" ] || python3 "$here/bench/mlx_side.py" make --shape "$shape" --quant "$quant" --out "$dir"
  m_dec=$(python3 "$here/bench/mlx_side.py" time --model "$dir" --prompt-len 64 --gen 128 --rounds "$rounds")
  m_pre=$(python3 "$here/bench/mlx_side.py" time --model "$dir" --prompt-len 2048 --gen 1 --rounds "$rounds")
  r_dec=$("$RMX" bench "$dir" --prompt-tokens 64 --gen-tokens 128 --rounds "$rounds" --json)
  r_pre=$("$RMX" bench "$dir" --prompt-tokens 2048 --gen-tokens 1 --rounds "$rounds" --json)
  if [ "$ab" = 1 ]; then
    env $ab_env "$RMX" bench "$dir" --prompt-tokens 64 --gen-tokens 128 --rounds "$rounds" --json |
      python3 -c 'import json,sys; c=json.load(sys.stdin)["cases"][0]; print("  '"$shape-$quant"' with '"$ab_env"': decode %.1f tok/s" % c["decode_tps"]["median"])'
    env $ab_env "$RMX" bench "$dir" --prompt-tokens 2048 --gen-tokens 1 --rounds "$rounds" --json |
      python3 -c 'import json,sys; c=json.load(sys.stdin)["cases"][0]; print("  '"$shape-$quant"' with '"$ab_env"': prefill@2K %.0f tok/s" % c["prefill_tps"]["median"])'
  fi
  # Same logits on this backend? (greedy continuation of a 64- and a 1024-token prompt). On a
  # peaked copy of the model (mlx_side.py make --peaked): the timing models' logits are so flat
  # that any kernel passes. PEAKED=0 checks the timing model itself.
  # LOGITS=0 skips the check (a second copy of a 30B model costs minutes of the device's time);
  # LOGITS_ARGS adds to its arguments (--mlx-sdpa-ops: mlx-lm's prompt attention by MLX's ops,
  # which GPT-OSS's sinks need on CUDA to not spend a minute a prompt length; logits_check.py).
  lmodel=$dir
  if [ "${PEAKED:-1}" = 1 ]; then
    lmodel=$work/peaked/$shape-$quant
    [ "${LOGITS:-1}" = 0 ] || [ -f "$lmodel/config.json" ] || python3 "$here/bench/mlx_side.py" make --shape "$shape" --quant "$quant" --out "$lmodel" --peaked >/dev/null
  fi
  [ "${LOGITS:-1}" = 0 ] || python3 "$here/bench/logits_check.py" "$RMX" "$lmodel" --gen 32 --drift ${LOGITS_ARGS:-} | sed 's/^/  logits: /' || echo "  logits: CHECK FAILED for $shape-$quant"
  if [ "$ab" = 1 ] && [ "${LOGITS:-1}" != 0 ]; then
    env $ab_env python3 "$here/bench/logits_check.py" "$RMX" "$lmodel" --gen 32 --drift ${LOGITS_ARGS:-} | sed "s/^/  logits with $ab_env: /" || echo "  logits with $ab_env: CHECK FAILED for $shape-$quant"
  fi
  rows+=("$(python3 - "$dir" "$bw" "$m_dec" "$m_pre" "$r_dec" "$r_pre" <<'PY'
import json, os, sys
d, bw = sys.argv[1], float(sys.argv[2])
md, mp, rd, rp = (json.loads(x) for x in sys.argv[3:7])
rd, rp = rd["cases"][0], rp["cases"][0]
size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".safetensors"))
roof = bw / size
name = os.path.basename(d)
print(f"| {name} | {rd['decode_tps']['median']:.1f} | {md['decode_tps']:.1f} | {rd['decode_tps']['median']/md['decode_tps']:.2f} "
      f"| {100*rd['decode_tps']['median']/roof:.0f}% | {rp['prefill_tps']['median']:.0f} | {mp['prefill_tps']:.0f} "
      f"| {rp['prefill_tps']['median']/mp['prefill_tps']:.2f} | {rp['ttft_ms']['median']:.0f} / {mp['ttft_ms']:.0f} "
      f"| {rd['peak_memory_bytes']/1e9:.2f} / {md['peak_memory_bytes']/1e9:.2f} |")
PY
)")
  echo "${rows[-1]}"
done
echo
echo "| model | rmx decode tok/s | mlx-lm decode | ratio | rmx % of roofline | rmx prefill@2K tok/s | mlx-lm prefill@2K | ratio | TTFT@2K ms rmx / mlx-lm | peak GB rmx / mlx-lm |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
