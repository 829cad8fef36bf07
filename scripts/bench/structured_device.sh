#!/usr/bin/env bash
# Decode speed with and without a JSON schema (`rmx bench --json-schema`), on the lent GPU
# machine, for docs/perf.md's structured-output section. Staging (here): see docs/perf.md.
#   gpu: RMX=... scripts/bench/structured_device.sh gpu QWEN3_TOKENIZER_DIR [LLAMA3_TOKENIZER_DIR]
#        random-weight Qwen3-0.6B (4-bit, bf16) and, given its tokenizer, Llama-3-8B (4-bit)
#        (mlx_side.py make) with the real tokenizer copied in (the schema needs real text
#        tokens), on the CUDA backend.
#   cpu: RMX=... scripts/bench/structured_device.sh cpu MODEL_DIR
#        a model folder (the tests' tiny Qwen3) on the CPU backend, with LD_LIBRARY_PATH
#        pointing at the CPU libmlx.
# Writes one `rmx bench --json` record per model to $OUT (or /tmp) and prints a summary line;
# SOLO=1 also benches each model with RMX_MAX_BATCH=1 (the free run on the same one-sequence
# path as the constrained one), TRACE=1 averages RMX_TRACE_STEPS's constrained-step lines.
set -euo pipefail
mode=${1:?usage: structured_device.sh gpu QWEN3_TOKENIZER_DIR [LLAMA3_TOKENIZER_DIR] | cpu MODEL_DIR}
arg=${2:?usage: structured_device.sh gpu QWEN3_TOKENIZER_DIR [LLAMA3_TOKENIZER_DIR] | cpu MODEL_DIR}
here=$(cd "$(dirname "$0")" && pwd)
RMX=${RMX:?set RMX to the rmx binary}
out=${OUT:-/tmp}
rounds=${ROUNDS:-5}
gen=${GEN:-256}
schema=$here/structured_schema.json

bench() { # NAME MODEL_DIR
  "$RMX" bench "$2" --prompt-tokens 128 --gen-tokens "$gen" --rounds "$rounds" --warmup 1 \
    --json-schema "$schema" --json > "$out/$1.json"
  if [ "${TRACE:-0}" = 1 ]; then
    RMX_TRACE_STEPS=1 "$RMX" bench "$2" --prompt-tokens 128 --gen-tokens "$gen" --rounds 1 \
      --warmup 0 --json-schema "$schema" --json 2>&1 >/dev/null | grep 'constrained step' |
      sed 's/[a-z+]*=//g; s/ms//g' | awk '{q+=$4; r+=$5; m+=$6; s+=$7; n++}
        END {printf "  host per constrained step: queue %.3f, read+emit %.3f, mask %.3f, sample %.3f ms (%d steps)\n", q/n, r/n, m/n, s/n, n}'
  fi
  python3 - "$out/$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["cases"][0]
s = c["constrained"]
print(f"{sys.argv[2]} [{r['backend']}, {r['hardware']['device']}]: decode free "
      f"{c['decode_tps']['median']:.1f} tok/s (±{100*(c['decode_tps']['max']-c['decode_tps']['min'])/2/c['decode_tps']['median']:.0f}%), "
      f"with schema {s['decode_tps']['median']:.1f} tok/s over {s['gen_tokens']['median']:.0f} tokens, "
      f"ratio {s['decode_ratio']:.3f}")
PY
  if [ "${SOLO:-0}" = 1 ]; then
    RMX_MAX_BATCH=1 "$RMX" bench "$2" --prompt-tokens 128 --gen-tokens "$gen" --rounds "$rounds" \
      --warmup 1 --json-schema "$schema" --json > "$out/$1-solo.json"
    python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cases"][0]; print("  RMX_MAX_BATCH=1: decode free %.1f, with schema %.1f tok/s, ratio %.3f" % (c["decode_tps"]["median"], c["constrained"]["decode_tps"]["median"], c["constrained"]["decode_ratio"]))' "$out/$1-solo.json"
  fi
}

case $mode in
  gpu)
    cases="qwen3-0.6b:4bit:$arg qwen3-0.6b:bf16:$arg"
    [ -z "${3:-}" ] || cases="$cases llama3-8b:4bit:$3"
    for c in $cases; do
      IFS=: read -r shape quant tok <<<"$c"
      dir=/tmp/structured-$shape-$quant
      [ -f "$dir/config.json" ] ||
        python3 "$here/mlx_side.py" make --shape "$shape" --quant "$quant" --out "$dir" >/dev/null
      cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$dir/"
      bench "$shape-$quant-gpu" "$dir"
    done
    ;;
  cpu)
    bench "tiny-qwen3-cpu" "$arg"
    ;;
  *)
    echo "mode: gpu or cpu" >&2
    exit 2
    ;;
esac
