#!/usr/bin/env bash
# Runs one OpenAI-client benchmark against `rmx serve`, then against `mlx_lm.server`, on the same
# files (scripts/bench/chat_model_gpu.sh's model unless MODEL_DIR names another), one server at a
# time on the GPU machine. Run after the staging of docs/perf.md ("How to reproduce"):
#   . /root/rmx-stage/env.sh && scripts/bench/side_by_side_gpu.sh /root/rmx-stage/rmx \
#       scripts/bench/streams.py --streams 1,4,16,32 --synthetic-vocab 128256
# The benchmark gets `--url` and `--model` added. RMX_ENV (e.g. "RMX_MAX_BATCH=16") is passed
# to rmx serve; MLX_ARGS to mlx_lm.server.
set -euo pipefail
rmx=${1:?usage: side_by_side_gpu.sh RMX_BINARY BENCH.py [ARGS...]}
shift
cd "$(dirname "$0")/../.."
model=$(scripts/bench/chat_model_gpu.sh)
home=$(mktemp -d)
wait_up() {
  for _ in $(seq 180); do
    curl -sf "$1/models" >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "server at $1 did not come up" >&2
  return 1
}
side() {
  local name=$1 url=$2 log=$3
  shift 3
  "$@" >"$log" 2>&1 &
  local pid=$!
  if wait_up "$url"; then
    echo "== $name"
    python3 "${BENCH[@]:0:1}" --url "$url" --model "$model" "${BENCH[@]:1}" || tail -20 "$log"
  else
    tail -20 "$log"
  fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
BENCH=("$@")
# shellcheck disable=SC2086
# The clients name the model by its folder, which TCP clients may do under RMX_MODEL_ROOTS only.
side rmx http://127.0.0.1:8100/v1 "$home/rmx.log" \
  env RMX_HOME="$home" RMX_MODEL_ROOTS="$(dirname "$model")" ${RMX_ENV:-} "$rmx" serve --port 8100
# shellcheck disable=SC2086
side mlx_lm.server http://127.0.0.1:8101/v1 "$home/mlx.log" \
  python3 -m mlx_lm.server --model "$model" --port 8101 ${MLX_ARGS:-}
