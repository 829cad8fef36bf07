#!/usr/bin/env bash
# Issue #24 on the GPU machine, after the staging of docs/perf.md ("How to reproduce"):
#   . /root/rmx-stage/env.sh && scripts/bench/speculative_gpu.sh /root/rmx-stage/rmx SMOLLM2_GGUF [GEMMA3_GGUF]
# 1. Llama-3-8B-shaped 4-bit (random weights written by mlx-lm, scripts/bench/mlx_side.py): a
#    verify step of k = 1..8 drafted tokens against a plain decode step (rmx bench
#    --verify-cost), so the speedup at any acceptance rate can be read off.
# 2. SmolLM2-135M-Instruct (real weights, its GGUF imported): plain against prompt-lookup
#    decoding on the code-editing prompt of scripts/bench/speculative_cpu.sh, and its verify
#    costs.
# 3. With GEMMA3_GGUF, Gemma 3 270M (a base model, which copies the file faithfully) likewise.
# Env: ROUNDS (verify-cost rounds, default 10), MAX (new tokens, default 400), K (default 6),
# QUANT (the imported form, default bf16: on a GPU MLX's bf16 products are the fast ones).
set -euo pipefail
rmx=$(realpath "${1:?usage: speculative_gpu.sh RMX_BINARY SMOLLM2_GGUF}")
gguf=$(realpath "${2:?usage: speculative_gpu.sh RMX_BINARY SMOLLM2_GGUF}")
cd "$(dirname "$0")/../.."
models=${MODELS:-/root/rmx-stage/models}
llama=$models/llama3-8b-4bit
[ -f "$llama/config.json" ] || python3 scripts/bench/mlx_side.py make --shape llama3-8b --quant 4bit --out "$llama" >/dev/null
echo "== Llama-3-8B-shaped 4-bit: verify step of k drafted tokens vs a plain decode step"
"$rmx" bench "$llama" --verify-cost 1,2,3,4,5,6,7,8 --prompt-tokens 512 --rounds "${ROUNDS:-10}"
quant=${QUANT:-bf16}
echo "== SmolLM2-135M-Instruct ($quant from its GGUF): plain vs prompt lookup, code-editing prompt"
QUANT=$quant GGUF=$gguf scripts/bench/speculative_cpu.sh "$rmx" "${MAX:-400}" "${K:-6}"
if [ -n "${3:-}" ]; then
  echo "== Gemma 3 270M ($quant from its GGUF): plain vs prompt lookup, code-editing prompt"
  QUANT=$quant GGUF=$(realpath "$3") scripts/bench/speculative_cpu.sh "$rmx" "${MAX:-400}" "${K:-6}"
fi
home=$(mktemp -d)
RMX_HOME=$home "$rmx" import "$gguf" --name smollm2 --quant "$quant" >/dev/null
echo "== SmolLM2-135M-Instruct: verify steps"
"$rmx" bench "$home/models/smollm2" --verify-cost 1,2,4,6,8 --prompt-tokens 1024 --rounds "${ROUNDS:-10}"
rm -rf "$home"
