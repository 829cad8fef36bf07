#!/usr/bin/env bash
# Writes (once) the GPU benchmarks' chat model: Llama-3-8B-shaped, 4-bit, random weights written
# by mlx-lm (scripts/bench/mlx_side.py), with a word-level tokenizer and a plain chat template so
# any OpenAI-compatible server can serve it. Prints its folder.
#   scripts/bench/chat_model_gpu.sh [DIR]   (default $MODEL_DIR or /root/agent-llama3-8b-4bit)
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-${MODEL_DIR:-/root/agent-llama3-8b-4bit}}
if [ ! -f "$model/config.json" ]; then
  python3 scripts/bench/mlx_side.py make --shape llama3-8b --quant 4bit --out "$model" >&2
  python3 - "$model" <<'PY'
import json, sys
path = sys.argv[1] + "/tokenizer_config.json"
cfg = json.load(open(path))
cfg["chat_template"] = ("{% for m in messages %}t2 {{ m['content'] }} t3 {% endfor %}"
                        "{% if add_generation_prompt %}t4{% endif %}")
json.dump(cfg, open(path, "w"))
PY
fi
echo "$model"
