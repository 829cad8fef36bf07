#!/usr/bin/env bash
# An agent's next turn on the GPU machine, rmx and mlx_lm.server side by side on the same files
# (scripts/bench/side_by_side_gpu.sh, its Llama-3-8B-shaped 4-bit chat model): a long first
# request, then the conversation plus a new message (scripts/bench/agent_turn.py). After the
# staging of docs/perf.md ("How to reproduce"):
#   . /root/rmx-stage/env.sh && scripts/bench/agent_turn_gpu.sh /root/rmx-stage/rmx
# Env: WORDS (first request's words, default 7000), NEW (default 200), RUNS (default 3).
set -euo pipefail
rmx=${1:?usage: agent_turn_gpu.sh RMX_BINARY}
cd "$(dirname "$0")/../.."
exec scripts/bench/side_by_side_gpu.sh "$rmx" scripts/bench/agent_turn.py \
  --prompt-words "${WORDS:-7000}" --new-words "${NEW:-200}" --runs "${RUNS:-3}" \
  --synthetic-vocab 128256
