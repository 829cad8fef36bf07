#!/usr/bin/env bash
# Issue #24 on the GPU machine (after the staging of docs/perf.md "How to reproduce"): a
# speculative verify's block through the layer kernel's rows variant (RMX_LAYER_BLOCK=1, the default,
# decode_layer/rows.rs forward_block) against the op-by-op block (RMX_LAYER_BLOCK=0).
#   . /root/rmx-stage/env.sh && scripts/bench/verify_block_gpu.sh /root/rmx-stage/rmx [SMOLLM2_GGUF]
# 1. Exactness: on a Llama-3-8B-shaped 4-bit model (random weights written by mlx-lm), greedy
#    prompt lookup with the block kernel must print the plain decoding's text (each position's
#    sums are a decode step's there), and so must the op-by-op block.
# 2. Cost: `rmx bench --verify-cost` for k = 1..8 with the block kernel on and off.
# 3. With SMOLLM2_GGUF: SmolLM2-135M imported 4-bit (the layer kernel takes quantized layers),
#    plain against prompt lookup on speculative_cpu.sh's code-editing prompt, block kernel on/off.
# Env: MODELS (default /root/rmx-stage/models), ROUNDS (default 5), MAX (default 200), K (6);
# AB_VAR: the setting turned 1 and 0 (default RMX_LAYER_BLOCK; RMX_LAYER_BLOCK_SHARE for the
# block rows' shared key/value loads); REPEAT: the exactness prompt's repeats of four words
# (default 40; 150 puts the blocks past ~500 positions, where every row gets 64 splits);
# POSITIONS: the cache length the costs are measured at (default 512).
set -euo pipefail
rmx=$(realpath "${1:?usage: verify_block_gpu.sh RMX_BINARY [SMOLLM2_GGUF]}")
cd "$(dirname "$0")/../.."
models=${MODELS:-/root/rmx-stage/models}
llama=$models/llama3-8b-4bit
[ -f "$llama/config.json" ] || python3 scripts/bench/mlx_side.py make --shape llama3-8b --quant 4bit --out "$llama" >/dev/null
home=$(mktemp -d)
stop() {
  for lock in "$home"/*/daemon.lock; do [ -f "$lock" ] && kill "$(cat "$lock")" 2>/dev/null; done
  rm -rf "$home"
}
trap stop EXIT
var=${AB_VAR:-RMX_LAYER_BLOCK}
prompt=$(python3 -c 'print(" ".join(["alpha beta gamma delta"] * '"${REPEAT:-40}"'))')
say() { # the setting's value, then rmx run's arguments: the answer on stdout, -v's lines on stderr
  local block=$1; shift
  RMX_HOME=$home/$block env "$var=$block" "$rmx" run "$llama" --raw --temperature 0 --max-tokens "${MAX:-200}" "$@"
}
echo "== exactness (Llama-3-8B-shaped 4-bit, greedy)"
plain=$(say 0 "$prompt" 2>/dev/null)
for block in 1 0; do
  spec=$(say $block "$prompt" --speculative prompt-lookup --draft-tokens "${K:-6}" -v 2>$home/err)
  grep -E "^speculative" $home/err | sed "s/^/  $var=$block: /" || true
  if [ "$spec" = "$plain" ]; then echo "  $var=$block: same text as plain decoding"; else
    echo "  $var=$block: DIFFERS from plain decoding"; diff <(echo "$plain") <(echo "$spec") | head -5 || true; fi
done
for block in 1 0; do
  echo "== verify cost, $var=$block"
  env "$var=$block" "$rmx" bench "$llama" --verify-cost 1,2,3,4,5,6,7,8 --prompt-tokens "${POSITIONS:-512}" --rounds "${ROUNDS:-5}"
done
if [ -n "${2:-}" ]; then
  for block in 1 0; do
    echo "== SmolLM2-135M 4-bit, prompt lookup, $var=$block"
    env "$var=$block" QUANT=4bit GGUF=$(realpath "$2") scripts/bench/speculative_cpu.sh "$rmx" "${MAX:-200}" "${K:-6}"
  done
fi
