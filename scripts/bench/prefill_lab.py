"""Where a long prefill's time goes, op by op, on the GPU machine (see scripts/gpu-bench.sh):

    python3 scripts/bench/prefill_lab.py [qwen3-0.6b|llama3-8b] [--rows 2048] [--bits 4]

For one layer of the shape at `rows` prompt tokens it times (eval of each op alone, median)
the ops rmx's prefill runs: each projection as MLX's quantized matmul and as dequantize + dense
matmul (fastpath/gemv.rs's dequant_prefill picks by rows and multiply-adds), the norms, rope, causal
attention, SwiGLU; then the layer's sum times the layer count, to set against the TTFT that
`rmx bench --prompt-tokens 2048` reports.
"""
import argparse

import mlx.core as mx

from gemv_lab import timeit

# name: (layers, hidden, heads, kv heads, head dim, ffn, q/k norm)
SHAPES = {
    "llama3-8b": (32, 4096, 32, 8, 128, 14336, False),
    "qwen3-0.6b": (28, 1024, 16, 8, 128, 3072, True),
}
G = 64


def timed(f):
    """gemv_lab's timing (warm-up, median of 10 evals), in ms."""
    return timeit(f) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", nargs="?", default="qwen3-0.6b")
    ap.add_argument("--rows", type=int, default=2048)
    ap.add_argument("--bits", type=int, default=4)
    a = ap.parse_args()
    layers, hid, h, kv, d, f, qk = SHAPES[a.shape]
    n = a.rows
    x = mx.random.normal((1, n, hid)).astype(mx.bfloat16)
    mats = {"qkv": ((h + 2 * kv) * d, hid), "o": (hid, h * d), "gate/up": (2 * f, hid),
            "down": (hid, f)}
    q = {k: mx.quantize((mx.random.normal(s) * 0.02).astype(mx.bfloat16), group_size=G,
                        bits=a.bits) for k, s in mats.items()}
    ins = {k: mx.random.normal((1, n, s[1])).astype(mx.bfloat16) for k, s in mats.items()}
    nw = mx.ones((hid,), mx.bfloat16)
    qh = mx.random.normal((1, h, n, d)).astype(mx.bfloat16)
    kh = mx.random.normal((1, kv, n, d)).astype(mx.bfloat16)
    vh = mx.random.normal((1, kv, n, d)).astype(mx.bfloat16)
    gu = mx.random.normal((1, n, 2 * f)).astype(mx.bfloat16)
    mx.eval(x, q, ins, nw, qh, kh, vh, gu)
    rows = []
    best = 0.0
    for k, (w, s, b) in q.items():
        qmm = timed(lambda: mx.quantized_matmul(ins[k], w, s, b, transpose=True, group_size=G,
                                                bits=a.bits))
        deq = timed(lambda: ins[k] @ mx.dequantize(w, s, b, group_size=G, bits=a.bits).T)
        macs = n * mats[k][0] * mats[k][1]
        rows.append((f"{k} quantized_matmul", qmm))
        rows.append((f"{k} dequantize + matmul ({macs / 2**32:.2f} x 2^32 MACs)", deq))
        best += min(qmm, deq)
    ops = [
        ("rms_norm x2", 2 * timed(lambda: mx.fast.rms_norm(x, nw, 1e-6))),
        ("rope q+k", timed(lambda: [mx.fast.rope(t, d, traditional=False, base=1e6, scale=1.0,
                                                 offset=0) for t in (qh, kh)])),
        ("sdpa causal", timed(lambda: mx.fast.scaled_dot_product_attention(
            qh, kh, vh, scale=d ** -0.5, mask="causal"))),
        ("swiglu (3 ops)", timed(lambda: (lambda g, u: g * mx.sigmoid(g) * u)(
            *mx.split(gu, [f], axis=-1)))),
        ("residual add x2", 2 * timed(lambda: x + x)),
    ]
    if qk:
        ops.append(("q/k rms_norm", timed(lambda: [mx.fast.rms_norm(t, nw[:d], 1e-6)
                                                   for t in (qh, kh)])))
    rows += ops
    for name, ms in rows:
        print(f"  {name:52} {ms:8.3f} ms  x{layers} = {ms * layers:7.2f} ms")
    per = best + sum(ms for _, ms in ops)
    print(f"{a.shape} {a.bits}-bit, {n} rows: one layer (the faster product each) {per:.3f} ms, "
          f"{layers} layers {per * layers:.1f} ms", flush=True)


if __name__ == "__main__":
    main()
