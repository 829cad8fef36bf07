#!/usr/bin/env bash
# An agent's next turn on the GPU machine, rmx and mlx_lm.server side by side on the same files:
# a Llama-3-8B-shaped 4-bit model (random weights, written by mlx-lm, word-level tokenizer with a
# plain chat template), a long first request, then the conversation plus a new message
# (scripts/bench/agent_turn.py). Run after the staging of docs/perf.md ("How to reproduce"):
#   . /root/rmx-stage/env.sh && scripts/bench/agent_turn_gpu.sh /root/rmx-stage/rmx
# Env: WORDS (first request's words, default 7000), NEW (default 200), RUNS (default 3).
set -euo pipefail
rmx=${1:?usage: agent_turn_gpu.sh RMX_BINARY}
cd "$(dirname "$0")/../.."
model=${MODEL_DIR:-/root/agent-llama3-8b-4bit}
words=${WORDS:-7000}
new=${NEW:-200}
runs=${RUNS:-3}
if [ ! -f "$model/config.json" ]; then
  python3 scripts/bench/mlx_side.py make --shape llama3-8b --quant 4bit --out "$model"
  python3 - "$model" <<'PY'
import json, sys
path = sys.argv[1] + "/tokenizer_config.json"
cfg = json.load(open(path))
cfg["chat_template"] = ("{% for m in messages %}t2 {{ m['content'] }} t3 {% endfor %}"
                        "{% if add_generation_prompt %}t4{% endif %}")
json.dump(cfg, open(path, "w"))
PY
fi
bench() {
  python3 scripts/bench/agent_turn.py --url "$1" --model "$model" --prompt-words "$words" \
    --new-words "$new" --runs "$runs" --synthetic-vocab 128256
}
wait_up() {
  for _ in $(seq 120); do
    curl -sf "$1/models" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "server at $1 did not come up" >&2
  return 1
}
home=$(mktemp -d)
RMX_HOME=$home "$rmx" serve --port 8100 >"$home/serve.log" 2>&1 &
pid=$!
wait_up http://127.0.0.1:8100/v1
echo "== rmx"
bench http://127.0.0.1:8100/v1
kill "$pid"; wait "$pid" 2>/dev/null || true
python3 -m mlx_lm.server --model "$model" --port 8101 >"$home/mlx.log" 2>&1 &
pid=$!
wait_up http://127.0.0.1:8101/v1
echo "== mlx_lm.server"
bench http://127.0.0.1:8101/v1
kill "$pid"; wait "$pid" 2>/dev/null || true
