#!/usr/bin/env python3
"""The table of scripts/bench/multi_gpu.sh: one row per model and setup (one GPU; two GPUs in
tensor and in pipeline mode) from the `rmx bench --json` records it left in DIR.

    python3 scripts/bench/multi_gpu_table.py DIR shape:quant ...

Greedy tokens: the peaked copy's 64 tokens (and the timing model's 128) against the one-GPU
run's, as `equal` or the number of leading tokens in common."""
import json
import os
import sys


def load(d, name):
    try:
        with open(os.path.join(d, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def same(a, b):
    if a is None or b is None:
        return "-"
    ta, tb = a["cases"][0]["tokens"], b["cases"][0]["tokens"]
    if ta == tb:
        return f"equal ({len(ta)})"
    n = next(i for i, (x, y) in enumerate(zip(ta + [None], tb + [None])) if x != y)
    return f"first {n} of {len(ta)}"


def main():
    d, cases = sys.argv[1], sys.argv[2:]
    print("| model | setup | decode tok/s (batch 1) | aggregate tok/s | aggregate decode tok/s | "
          "TTFT p95 ms | prefill@2K tok/s | peak GB (rank 0) | greedy tokens vs 1 GPU: peaked / timing |")
    print("|---|---|---|---|---|---|---|---|---|")
    for c in cases:
        shape, quant = c.split(":")
        m = f"{shape}-{quant}"
        one = {k: load(d, f"{m}-one-{k}") for k in ("decode", "prefill", "tokens")}
        for setup, label in (("one", "1 GPU"), ("tensor", "2 GPUs, tensor"),
                             ("pipeline", "2 GPUs, pipeline")):
            r = {k: load(d, f"{m}-{setup}-{k}") for k in ("decode", "prefill", "tokens")}
            if not any(r.values()):
                ran = os.path.exists(os.path.join(d, f"{m}-{setup}-decode.err"))
                if ran:
                    print(f"| {m} | {label} | failed: see {m}-{setup}-*.err | | | | | | |")
                continue
            dec = r["decode"]["cases"][0] if r["decode"] else None
            con = dec["concurrent"][0] if dec and dec.get("concurrent") else None
            pre = r["prefill"]["cases"][0] if r["prefill"] else None
            cell = lambda v, f="{:.1f}": f.format(v) if v is not None else "-"
            streams = f" @{con['streams']}" if con else ""
            print(f"| {m} | {label} | {cell(dec and dec['decode_tps']['median'])} "
                  f"| {cell(con and con['aggregate_tps']['median'])}{streams} "
                  f"| {cell(con and con['aggregate_decode_tps']['median'])} "
                  f"| {cell(con and con['ttft_p95_ms']['median'], '{:.0f}')} "
                  f"| {cell(pre and pre['prefill_tps']['median'], '{:,.0f}')} "
                  f"| {cell(max((x['cases'][0]['peak_memory_bytes'] for x in r.values() if x), default=None) and max(x['cases'][0]['peak_memory_bytes'] for x in r.values() if x) / 1e9, '{:.2f}')} "
                  f"| {same(one['tokens'], r['tokens']) if setup != 'one' else '-'} / "
                  f"{same(one['decode'], r['decode']) if setup != 'one' else '-'} |")


if __name__ == "__main__":
    main()
