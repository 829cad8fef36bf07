#!/usr/bin/env bash
# Issue #26's model larger than one GPU: Llama-3-70B's dims with 56 layers in bf16 (50.0B
# parameters, 100 GB; mlx_side.py make-streamed), tried on one 80 GB GPU, then split over two
# with `rmx launch -n 2 --backend nccl` (tensor mode; MODES="tensor pipeline" for both). On the
# device tool's nvidia-h100-x2 after the staging of docs/perf.md:
#   . /root/rmx-stage/env.sh && scripts/bench/multi_gpu_big.sh /root/rmx-stage/rmx
# The machine's disk (128 GiB) holds this model or multi_gpu.sh's, not both: CLEAN=1 removes
# the others first. Env: LIMIT (s, 420) bounds each split run, ONE_LIMIT (s, 90) the one-GPU
# attempt; STREAMS (8).
set -euo pipefail
rmx=${1:?usage: multi_gpu_big.sh RMX_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
work=${BENCH_DIR:-/tmp/rmx-bench}
out=${OUT_DIR:-$work/multi}
limit=${LIMIT:-420}
dir=$work/llama3-70b-56l-bf16
mkdir -p "$work" "$out"
if [ "${CLEAN:-0}" = 1 ]; then
  find "$work" -mindepth 1 -maxdepth 2 -name config.json -printf '%h\n' | grep -v "^$dir\$" | xargs -r rm -rf
fi
if [ ! -f "$dir/config.json" ]; then
  t0=$SECONDS
  python3 "$here/mlx_side.py" make-streamed --shape llama3-70b-56l --out "$dir" > /dev/null
  echo "wrote $(du -sh "$dir" | cut -f1) in $((SECONDS - t0)) s"
fi
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
. "$here/run_timed.sh"
for mode in ${MODES:-tensor}; do
  run "big-$mode" "$rmx" launch -n 2 --backend nccl --mode "$mode" -- rmx bench "$dir" \
    --prompt-tokens 64,2048 --gen-tokens 32 --rounds 2 --warmup 1 --streams "${STREAMS:-8}" --json
done
# Expected to fail (out of memory); last, and bounded, so it costs little device time.
limit=${ONE_LIMIT:-90}
run big-one env CUDA_VISIBLE_DEVICES=0 "$rmx" bench "$dir" --prompt-tokens 64 --gen-tokens 8 \
  --rounds 1 --warmup 0 --json
python3 - "$out" ${MODES:-tensor} <<'PY'
import json, os, sys
d = sys.argv[1]
for name in ["big-one"] + [f"big-{m}" for m in sys.argv[2:]]:
    try:
        r = json.load(open(os.path.join(d, name + ".json")))
    except (OSError, ValueError):
        err = open(os.path.join(d, name + ".err")).read().strip().splitlines()
        print(f"{name}: no record; {err[-1][:300] if err else 'no output'}")
        continue
    for c in r["cases"]:
        con = c.get("concurrent") or [None]
        s = con[0]
        print(f"{name}: prompt {c['prompt_tokens']}: prefill {c['prefill_tps']['median']:,.0f} tok/s, "
              f"decode {c['decode_tps']['median']:.1f} tok/s, peak {c['peak_memory_bytes'] / 1e9:.1f} GB"
              + (f", {s['streams']} streams {s['aggregate_tps']['median']:.1f} tok/s" if s else ""))
PY
