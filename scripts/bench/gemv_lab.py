"""Quantized GEMV lab for the GPU machine: rmx's CUDA kernels (crates/rmx-models/src/kernels/
qgemv.cuh, the same source the engine JITs) against MLX's own quantized_matmul, on the weight
set of one real model token (every matrix distinct, so nothing is served from L2).

    python3 scripts/bench/gemv_lab.py [llama3-8b|qwen3-0.6b ...]

Prints, per model and bit width: correctness (max |diff| against mx.quantized_matmul relative to
the output's scale), the time of all of one token's GEMVs in one eval, and effective bandwidth.
"""
import statistics
import sys
import time

import mlx.core as mx

from kernel_src import section

HEADER = section("qgemv")

SHAPES = {
    # name: (layers, hidden, q_out, kv_out, ffn)
    "llama3-8b": (32, 4096, 4096, 1024, 14336),
    "qwen3-0.6b": (28, 1024, 2048, 1024, 3072),
}

_kernels = {}


def kernel(kind):
    if kind not in _kernels:
        fn = {"plain": "qgemv", "swiglu": "qgemv_swiglu"}[kind]
        _kernels[kind] = mx.fast.cuda_kernel(
            name=f"rmx_{fn}",
            input_names=["x", "w", "scales", "biases"],
            output_names=["y"],
            source=f"rmx::{fn}<T, BITS, G, ROWS, K>(x, w, scales, biases, y, N);",
            header=HEADER,
        )
    return _kernels[kind]


def qgemv(x, w, s, b, bits, g, rows, tg, kind="plain"):
    M, K = x.shape
    N = w.shape[0] // (2 if kind == "swiglu" else 1)
    warps = (N + rows - 1) // rows
    k = kernel(kind)
    # N is a template constant too (one compile per shape is fine: a model has a handful).
    return k(
        inputs=[x, w, s, b],
        template=[("T", x.dtype), ("BITS", bits), ("G", g), ("ROWS", rows), ("K", K), ("N", N)],
        grid=(warps * 32, M, 1),
        threadgroup=(tg, 1, 1),
        output_shapes=[(M, N)],
        output_dtypes=[x.dtype],
    )[0]


def timeit(fn, reps=10):
    for _ in range(3):
        mx.eval(fn())
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        mx.eval(fn())
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def timeit_eval(fn, reps=10):
    """Time of mx.eval alone (graph built before the clock starts): what an engine that builds
    graphs cheaply would see."""
    for _ in range(3):
        mx.eval(fn())
    ts = []
    for _ in range(reps):
        outs = fn()
        t = time.perf_counter()
        mx.eval(outs)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def check(bits, g=64):
    mx.random.seed(0)
    worst = 0.0
    for (N, K) in [(4096, 4096), (1024, 4096), (4096, 14336), (3072, 1024), (256, 512)]:
        w = mx.random.normal((N, K)).astype(mx.bfloat16) * 0.02
        wq, s, b = mx.quantize(w, group_size=g, bits=bits)
        for M in (1, 3):
            x = mx.random.normal((M, K)).astype(mx.bfloat16)
            ref = mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=g, bits=bits)
            for rows, tg in [(1, 128), (2, 128), (4, 128), (4, 256)]:
                y = qgemv(x, wq, s, b, bits, g, rows, tg)
                err = (mx.abs(y.astype(mx.float32) - ref.astype(mx.float32)).max()
                       / (mx.abs(ref.astype(mx.float32)).max() + 1e-6)).item()
                worst = max(worst, err)
    # swiglu against the unfused ops
    N, K = 3072, 1024
    wg = mx.random.normal((2 * N, K)).astype(mx.bfloat16) * 0.02
    wq, s, b = mx.quantize(wg, group_size=g, bits=bits)
    x = mx.random.normal((1, K)).astype(mx.bfloat16)
    both = mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=g, bits=bits)
    gate, up = both[:, :N], both[:, N:]
    ref = (gate * mx.sigmoid(gate)) * up
    y = qgemv(x, wq, s, b, bits, g, 2, 128, kind="swiglu")
    serr = (mx.abs(y.astype(mx.float32) - ref.astype(mx.float32)).max()
            / (mx.abs(ref.astype(mx.float32)).max() + 1e-6)).item()
    print(f"check {bits}-bit g{g}: max rel err plain {worst:.2e}, swiglu {serr:.2e}", flush=True)


def token_set(model, bits, g=64):
    L, H, Q, KV, F = SHAPES[model]
    mats = []
    for _ in range(L):
        for (n, k) in [(Q, H), (KV, H), (KV, H), (H, Q), (F, H), (F, H), (H, F)]:
            w = mx.random.randint(0, 2**31 - 1, (n, k * bits // 32)).astype(mx.uint32)
            s = (mx.random.normal((n, k // g)) * 0.01).astype(mx.bfloat16)
            b = (mx.random.normal((n, k // g)) * 0.01).astype(mx.bfloat16)
            mats.append((w, s, b))
    mx.eval(mats)
    nbytes = sum(w.nbytes + s.nbytes + b.nbytes for w, s, b in mats)
    return mats, nbytes


def fuse(a, b):
    return tuple(mx.concatenate([p, q], axis=0) for p, q in zip(a, b))


def bench(model, bits, g=64):
    L, H, Q, KV, F = SHAPES[model]
    mats, nbytes = token_set(model, bits, g)
    xs = {k: mx.random.normal((1, k)).astype(mx.bfloat16) for k in {H, Q, F}}
    mx.eval(xs)

    def run_mlx():
        return [mx.quantized_matmul(xs[w.shape[1] * 32 // bits], w, s, b, transpose=True,
                                    group_size=g, bits=bits) for w, s, b in mats]

    def run_rmx(rows, tg):
        return [qgemv(xs[w.shape[1] * 32 // bits], w, s, b, bits, g, rows, tg) for w, s, b in mats]

    t_mlx = timeit(run_mlx)
    print(f"{model} {bits}-bit: {len(mats)} GEMVs, {nbytes/1e9:.2f} GB; "
          f"mlx quantized_matmul {t_mlx*1e3:.2f} ms ({nbytes/t_mlx/1e9:.0f} GB/s)", flush=True)
    t_mlx_e = timeit_eval(run_mlx)
    print(f"  mlx eval only {t_mlx_e*1e3:.2f} ms", flush=True)
    for rows, tg in [(1, 128), (2, 128), (4, 128)]:
        t = timeit(lambda: run_rmx(rows, tg))
        print(f"  rmx rows={rows} tg={tg}: {t*1e3:.2f} ms ({nbytes/t/1e9:.0f} GB/s, "
              f"{t_mlx/t:.2f}x)", flush=True)
    # Fused: QKV as one matrix, gate+up as one matrix with the swiglu epilogue: 4 kernels/layer.
    fused = []
    for l in range(L):
        q, k, v, o, gt, up, dn = mats[7 * l: 7 * l + 7]
        fused.append((fuse(fuse(q, k), v), o, fuse(gt, up), dn))
    mx.eval(fused)
    del mats

    def run_fused(rows, tg):
        out = []
        for qkv, o, gu, dn in fused:
            out.append(qgemv(xs[H], *qkv, bits, g, rows, tg))
            out.append(qgemv(xs[Q], *o, bits, g, rows, tg))
            out.append(qgemv(xs[H], *gu, bits, g, rows, tg, kind="swiglu"))
            out.append(qgemv(xs[F], *dn, bits, g, rows, tg))
        return out

    for rows, tg in [(2, 128), (4, 128), (2, 64)]:
        t = timeit(lambda: run_fused(rows, tg))
        te = timeit_eval(lambda: run_fused(rows, tg))
        print(f"  rmx fused (4/layer) rows={rows} tg={tg}: {t*1e3:.2f} ms "
              f"({nbytes/t/1e9:.0f} GB/s, {t_mlx/t:.2f}x); eval only {te*1e3:.2f} ms "
              f"({nbytes/te/1e9:.0f} GB/s)", flush=True)
    # The largest matrices alone: bandwidth with launch overhead amortized.
    big = [gu for _, _, gu, _ in fused]
    nb = sum(w.nbytes + s.nbytes + b.nbytes for w, s, b in big)
    for rows in (1, 2, 4):
        te = timeit_eval(lambda: [qgemv(xs[H], *gu, bits, g, rows, 128, kind="swiglu") for gu in big])
        print(f"  gate+up only ({len(big)} x {big[0][0].shape[0]} rows) rows={rows}: "
              f"{te*1e3:.2f} ms ({nb/te/1e9:.0f} GB/s)", flush=True)
    del fused
    mx.clear_cache()


def dispatch_cost():
    x = mx.ones((1, 16))
    mx.eval(x)

    def chain():
        y = x
        for _ in range(1000):
            y = y + 1
        return y
    t = timeit(chain, reps=5)
    print(f"dispatch: chain of 1000 tiny adds {t*1e3:.2f} ms ({t*1e3:.1f} us/op)", flush=True)


def prefill(model, bits, g=64, M=2048):
    """One layer's projections on a 2K-token chunk: quantized_matmul vs dequantize + bf16 matmul."""
    L, H, Q, KV, F = SHAPES[model]
    shapes = [(Q, H), (KV, H), (KV, H), (H, Q), (F, H), (F, H), (H, F)]
    mats = []
    for n, k in shapes:
        w = (mx.random.normal((n, k)) * 0.02).astype(mx.bfloat16)
        mats.append(mx.quantize(w, group_size=g, bits=bits))
    xs = {k: mx.random.normal((M, k)).astype(mx.bfloat16) for k in {H, Q, F}}
    mx.eval(mats, xs)

    def kdim(w):
        return w.shape[1] * 32 // bits

    t_q = timeit(lambda: [mx.quantized_matmul(xs[kdim(w)], w, s, b, transpose=True,
                                              group_size=g, bits=bits) for w, s, b in mats])
    t_d = timeit(lambda: [xs[kdim(w)] @ mx.dequantize(w, s, b, group_size=g, bits=bits).T
                          for w, s, b in mats])
    print(f"prefill {model} {bits}-bit M={M}, one layer: quantized_matmul {t_q*1e3:.2f} ms, "
          f"dequantize+matmul {t_d*1e3:.2f} ms ({t_q/t_d:.2f}x)", flush=True)


if __name__ == "__main__":
    print(mx.default_device(), flush=True)
    dispatch_cost()
    for bits in (4, 8):
        check(bits)
    for model in sys.argv[1:] or ["qwen3-0.6b", "llama3-8b"]:
        for bits in (4, 8):
            for m in (2048, 1024, 512, 256):
                prefill(model, bits, M=m)
            bench(model, bits)
