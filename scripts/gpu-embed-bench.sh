#!/usr/bin/env bash
# Runs on the GPU machine (see docs/perf.md, "How to reproduce", Embeddings): writes random-weight
# embedding models of real shapes (scripts/bench/embed_side.py make), runs `rmx bench` and
# mlx-embeddings 0.1.0's own model code (embed_side.py time) on the same files, one after the
# other, with the same synthetic token ids, and prints one table.
# Usage: scripts/gpu-embed-bench.sh RMX_BINARY [SHAPE:QUANT ...]
# Shapes: embed_side.py's SHAPES (bge-m3, bge-small, qwen3-embedding-0.6b; tiny-bert and
# tiny-qwen3-embedding for a CPU machine). Quants: bf16, 8bit, 4bit.
# Environment: BENCH_DIR (models, default /tmp/rmx-embed-bench), ROUNDS (default 5),
# TOKENS (input lengths, default 128,512), PYTHON (default python3), MLX_EMBEDDINGS_WHEEL
# (the mlx-embeddings wheel, or a folder holding it: installed --no-deps when python lacks it).
set -euo pipefail
RMX=${1:?usage: gpu-embed-bench.sh RMX_BINARY [shape:quant ...]}; shift
CASES=${*:-"bge-m3:bf16 bge-m3:4bit qwen3-embedding-0.6b:bf16 qwen3-embedding-0.6b:4bit bge-small:bf16"}
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_DIR:-/tmp/rmx-embed-bench}
rounds=${ROUNDS:-5}
tokens=${TOKENS:-128,512}
py=${PYTHON:-python3}
side=$here/bench/embed_side.py

if ! "$py" -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('mlx_embeddings') is None)"; then
  whl=${MLX_EMBEDDINGS_WHEEL:?mlx-embeddings is not installed: set MLX_EMBEDDINGS_WHEEL to its wheel (pip download --no-deps mlx-embeddings==0.1.0 -d .device/d)}
  if [ -d "$whl" ]; then
    whl=$(ls "$whl"/mlx_embeddings-*.whl | head -n 1)
  fi
  echo "installing $(basename "$whl") (--no-deps)"
  "$py" -m pip install -q --no-index --no-deps "$whl"
fi
"$py" -c 'import mlx.core as mx, importlib.metadata as md; print("mlx", mx.__version__, mx.default_device(), "| mlx-embeddings", md.version("mlx-embeddings"))'

mkdir -p "$work"
rows=()
for c in $CASES; do
  shape=${c%%:*}; quant=${c##*:}; dir=$work/$shape-$quant
  [ -f "$dir/config.json" ] || "$py" "$side" make --shape "$shape" --quant "$quant" --out "$dir"
  r=$("$RMX" bench "$dir" --json --rounds "$rounds" --prompt-tokens "$tokens")
  m=$("$py" "$side" time --model "$dir" --tokens "$tokens" --batch 1,32 --rounds "$rounds")
  out=$("$py" - "$dir" "$r" "$m" <<'PY'
import json, os, sys
name = os.path.basename(sys.argv[1])
rmx = json.loads(sys.argv[2])
ref = [json.loads(l) for l in sys.argv[3].splitlines() if l.strip()]
gb = lambda b: f"{b / 1e9:.2f}" if b >= 1e9 else f"{b / 1e9:.3f}"
num = lambda x: f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"
if len(ref) != len(rmx["embedding_cases"]):
    sys.exit(f"{name}: rmx ran {len(rmx['embedding_cases'])} cases, the reference {len(ref)}")
print(f"# {name}: rmx on {rmx['hardware']['device']} [{rmx['backend']}], MLX {rmx['mlx_version']}")
for c, m in zip(rmx["embedding_cases"], ref):
    if (c["input_tokens"], c["batch"]) != (m["tokens"], m["batch"]):
        sys.exit(f"{name}: rmx case {c['input_tokens']}x{c['batch']} against the reference's {m['tokens']}x{m['batch']}")
    ri, mi = c["inputs_per_s"]["median"], m["inputs_per_s"]
    print(f"| {name} | {c['input_tokens']} | {c['batch']} | {num(ri)} | {num(mi)} | {ri / mi:.2f} "
          f"| {num(c['tokens_per_s']['median'])} | {num(m['tokens_per_s'])} "
          f"| {gb(c['peak_memory_bytes'])} / {gb(m['peak_memory_bytes'])} |")
PY
)
  echo "$out"
  while IFS= read -r line; do
    case "$line" in '|'*) rows+=("$line") ;; esac
  done <<<"$out"
done
echo
echo "| model | tokens | batch | rmx inputs/s | reference inputs/s | ratio | rmx tokens/s | reference tokens/s | rmx / reference peak GB |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
