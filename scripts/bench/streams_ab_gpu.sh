#!/usr/bin/env bash
# rmx serve alone, once per settings string, against scripts/bench/streams.py on the GPU
# benchmarks' chat model (scripts/bench/chat_model_gpu.sh): an A/B of engine settings on one warm
# machine. With TRACE=1, the mean host time per decode step by rows (RMX_TRACE_STEPS lines; with
# the next step queued before the last is read, that is the step's wall time); with
# RMX_LAYER_TIMES=1 among a run's settings, also the rows kernel's phases (µs summed over the
# layers, mean by rows: QKV, attention, out, gate/up, down, from `layer times` lines). After the staging
# of docs/perf.md ("How to reproduce"):
#   . /root/rmx-stage/env.sh && STREAMS=1,4,32 CHECK=1 TRACE=1 \
#     scripts/bench/streams_ab_gpu.sh /root/rmx-stage/rmx "RMX_LAYER_ROWS=1" "RMX_LAYER_ROWS=0"
# Env: STREAMS (default 1,4,16,32), MAX_TOKENS (128), CHECK=1 (answers against each alone).
set -uo pipefail
rmx=${1:?usage: streams_ab_gpu.sh RMX_BINARY "VAR=VALUE ..." ...}
shift
cd "$(dirname "$0")/../.."
model=$(scripts/bench/chat_model_gpu.sh)
for envs in "$@"; do
  home=$(mktemp -d)
  # shellcheck disable=SC2086
  # streams.py names the model by its folder: TCP clients may, under RMX_MODEL_ROOTS.
  env RMX_HOME="$home" RMX_MODEL_ROOTS="$(dirname "$model")" $envs ${TRACE:+RMX_TRACE_STEPS=1} \
    "$rmx" serve --port 8100 >"$home/log" 2>&1 &
  pid=$!
  for _ in $(seq 180); do curl -sf http://127.0.0.1:8100/v1/models >/dev/null 2>&1 && break; sleep 1; done
  echo "== $envs"
  timeout 300 python3 scripts/bench/streams.py --url http://127.0.0.1:8100/v1 --model "$model" \
    --streams "${STREAMS:-1,4,16,32}" --max-tokens "${MAX_TOKENS:-128}" --prompt-words 60 \
    --synthetic-vocab 128256 ${CHECK:+--check} || tail -30 "$home/log"
  if [ -n "${TRACE:-}" ]; then
    grep -o 'step rows=[0-9]* joined=0 leave+join=[0-9.]*ms queue=[0-9.]*ms read=[0-9.]*ms' "$home/log" |
      sed 's/[a-z+]*=//g; s/ms//g' |
      awk '{n[$2]++; t[$2]+=$4+$5+$6; q[$2]+=$5} END {for (r in n) if (n[r] > 5) printf "rows=%s steps=%d mean %.2f ms (queue %.2f)\n", r, n[r], t[r]/n[r], q[r]/n[r]}' | sort -t= -k2 -n
    # Every group prefill, in order (the first ones are the warm-up round's, with its JIT).
    grep -o 'group prefill rows=[0-9]* [0-9.]*ms' "$home/log" | sed 's/group prefill //' | tr '\n' ' ' |
      sed 's/^/group prefills: /'; echo
  fi
  grep -o 'layer times rows=[0-9]* .*us' "$home/log" | sed 's/[a-z_]*=//g; s/us$//' |
    awk '{n[$3]++; for (i = 6; i <= 11; i++) t[$3, i] += $i}
         END {for (r in n) if (n[r] > 5) printf "rows=%s launches=%d qkv %.0f attention %.0f out %.0f gate/up %.0f down %.0f total %.0f us\n",
              r, n[r], t[r,6]/n[r], t[r,7]/n[r], t[r,8]/n[r], t[r,9]/n[r], t[r,10]/n[r], t[r,11]/n[r]}' | sort -t= -k2 -n
  grep -iE 'panic|error|fault' "$home/log" | head -5
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
done
