#!/usr/bin/env bash
# Prompt lookup against plain decoding on a code-editing prompt (issue #24): SmolLM2-135M-Instruct
# imported from its GGUF (QUANT, default f32: on a CPU rmx multiplies float32 with its own
# kernels, the fastest form there; bf16, 4bit or 8bit run MLX's CPU kernels), a ~1K-token Rust file (pinned
# to a commit) and "repeat it with one change", greedy, MAX tokens. Prints each run's `rmx run -v` lines: decode tok/s and, with
# --speculative, how many guesses were accepted. Runs a private daemon in a temporary RMX_HOME.
# usage: . scripts/test-env.sh; . scripts/fetch-gguf.sh
#        scripts/bench/speculative_cpu.sh [RMX_BINARY] [MAX_TOKENS] [DRAFT_TOKENS]
set -euo pipefail
rmx=$(realpath "${1:-target/release/rmx}")
max=${2:-400}
k=${3:-6}
# GGUF picks another model (Gemma 3 270M: GGUF=$RMX_TEST_GGUF_GEMMA3).
gguf=${GGUF:-${RMX_TEST_GGUF_SMOLLM2:?source scripts/fetch-gguf.sh first}}
home=$(mktemp -d)
export RMX_HOME=$home
stop() {
  local pid
  pid=$(cat "$home/daemon.lock" 2>/dev/null || true)
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    # A daemon still answering or saving prefixes would load the next run's machine, and
    # writes into the folder being removed.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -rf "$home"
}
trap stop EXIT
"$rmx" import "$gguf" --name smollm2 --quant "${QUANT:-f32}" >/dev/null
# The first 100 lines of crates/rmx-engine/src/sampler.rs at 52f7c14, kept beside this script
# so the prompt is the same wherever it runs (the GPU machine gets no git history).
file=$(cat "$(dirname "$0")/speculative_edit_source.rs.txt")
prompt="Here is a Rust file:

\`\`\`rust
$file
\`\`\`

Repeat the whole file exactly, changing only the name of the function \`choose\` to \`pick\`. Output only the code."
# One warm-up answer loads the model, so no measured run pays for it.
"$rmx" run smollm2 "hi" --max-tokens 4 >/dev/null 2>&1
for round in 1 2; do
  for mode in plain prompt-lookup; do
    args=()
    if [ "$mode" = prompt-lookup ]; then args=(--speculative prompt-lookup --draft-tokens "$k"); fi
    err=$("$rmx" run smollm2 "$prompt" -v --max-tokens "$max" "${args[@]}" 2>&1 >/dev/null)
    echo "round $round, $mode:"
    echo "$err" | grep -E "^(prompt:|speculative)" | sed 's/^/  /'
  done
done
