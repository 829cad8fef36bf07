#!/usr/bin/env bash
# Concurrent streams on the GPU machine, rmx and mlx_lm.server side by side on the same files
# (scripts/bench/side_by_side_gpu.sh, its Llama-3-8B-shaped 4-bit chat model): 1, 4, 16 and 32
# streams, 64-token prompts, 128 new tokens each (scripts/bench/streams.py). After the
# staging of docs/perf.md ("How to reproduce"):
#   . /root/rmx-stage/env.sh && scripts/bench/streams_gpu.sh /root/rmx-stage/rmx
# Env: STREAMS (default 1,4,16,32), MAX_TOKENS (default 128), CHECK=1 (each answer against the
# same request alone).
set -euo pipefail
rmx=${1:?usage: streams_gpu.sh RMX_BINARY}
cd "$(dirname "$0")/../.."
# 60 words of the chat model's word-level tokenizer, with the template's 3 tokens and the BOS:
# a 64-token prompt.
exec scripts/bench/side_by_side_gpu.sh "$rmx" scripts/bench/streams.py \
  --streams "${STREAMS:-1,4,16,32}" --max-tokens "${MAX_TOKENS:-128}" --prompt-words 60 ${CHECK:+--check} \
  --synthetic-vocab 128256
