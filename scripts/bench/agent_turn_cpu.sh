#!/usr/bin/env bash
# An agent's turn on this machine's CPU (issue #19): SmolLM2-135M-Instruct imported from its GGUF
# (bf16), `rmx serve` in a private RMX_HOME, scripts/bench/agent_turn.py against it: a long first
# request, the next turn (the conversation plus a new message: only its new tokens are read),
# then the daemon stopped and started again and one more turn (the hot prefix read back from
# disk). Prints each turn's TTFT and the shares the issue names (next / first, restarted / first).
# usage: . scripts/test-env.sh; . scripts/fetch-gguf.sh
#        scripts/bench/agent_turn_cpu.sh [RMX_BINARY] [PROMPT_WORDS] [RUNS]
# (4,500 words: about 6K tokens, inside SmolLM2's 8,192-token context with the later turns)
set -euo pipefail
rmx=$(realpath "${1:-target/release/rmx}")
words=${2:-4500}
runs=${3:-1}
gguf=${GGUF:-${RMX_TEST_GGUF_SMOLLM2:?source scripts/fetch-gguf.sh first}}
home=$(mktemp -d)
export RMX_HOME=$home
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
serve() {
  "$rmx" serve --port "$port" >>"$home/serve.log" 2>&1 &
  echo $! >"$home/serve.pid"
}
stop_serve() {
  local pid
  pid=$(cat "$home/serve.pid" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    # Its hot prefixes are written when it idles or stops; wait for it to be gone.
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
}
trap 'stop_serve; rm -rf "$home"' EXIT
"$rmx" import "$gguf" --name smollm2 >/dev/null
serve
python3 "$(dirname "$0")/agent_turn.py" --url "http://127.0.0.1:$port/v1" --model smollm2 \
  --prompt-words "$words" --runs "$runs" \
  --restart-cmd "kill \$(cat $home/serve.pid); while kill -0 \$(cat $home/serve.pid) 2>/dev/null; do sleep 0.2; done; $rmx serve --port $port >>$home/serve.log 2>&1 & echo \$! >$home/serve.pid"
