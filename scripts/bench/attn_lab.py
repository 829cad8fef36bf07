"""Decode-attention lab for the GPU machine: rmx's one-kernel decode step (`decode_attn` in
crates/rmx-models/src/kernels/attn.cuh: q/k norms, rope, the in-place cache write, attention)
against the MLX ops mlx-lm runs for the same step (rms_norm, rope, slice_update, sdpa).

    python3 scripts/bench/attn_lab.py

Prints per shape and context: max |diff| of the attended row against MLX's, whether the cache
got exactly the new k and v at `offset` and nothing else, and the time of each side (eval only).
"""
import time

import mlx.core as mx

from kernel_src import section

HEADER = section("attn")
KERNEL = mx.fast.cuda_kernel(
    name="rmx_decode_attn_lab",
    input_names=["qs", "ks", "vs", "qn", "kn", "inv_freq", "pos", "par", "kc", "vc"],
    output_names=["o"],
    source="rmx::decode_attn<T, H, KV, D, NORM, TRADITIONAL, QOFF, KOFF, VOFF>"
    "(qs, ks, vs, qn, kn, inv_freq, pos, par, kc, vc, o);",
    header=HEADER,
)
BASE, EPS = 1e6, 1e-6


def reference(qkv, qn, kn, kc, vc, offset, h, kv, d, norm):
    q = qkv[: h * d].reshape(1, 1, h, d)
    k = qkv[h * d : (h + kv) * d].reshape(1, 1, kv, d)
    v = qkv[(h + kv) * d :].reshape(1, 1, kv, d).transpose(0, 2, 1, 3)
    if norm:
        q, k = mx.fast.rms_norm(q, qn, EPS), mx.fast.rms_norm(k, kn, EPS)
    q = mx.fast.rope(q.transpose(0, 2, 1, 3), d, traditional=False, base=BASE, scale=1.0, offset=offset)
    k = mx.fast.rope(k.transpose(0, 2, 1, 3), d, traditional=False, base=BASE, scale=1.0, offset=offset)
    keys = mx.concatenate([kc[:, :, :offset], k], axis=2)
    vals = mx.concatenate([vc[:, :, :offset], v], axis=2)
    o = mx.fast.scaled_dot_product_attention(q, keys, vals, scale=d**-0.5)
    return o.reshape(1, 1, -1), k, v


def rmx(qkv, qn, kn, kc, vc, offset, h, kv, d, norm):
    inv_freq = 1.0 / (BASE ** (mx.arange(0, d, 2, dtype=mx.float32) / d))
    return KERNEL(
        inputs=[qkv, qkv, qkv, qn, kn, inv_freq, mx.array([offset, kc.shape[2]], dtype=mx.int32),
                mx.array([EPS, d**-0.5], dtype=mx.float32), kc, vc],
        template=[("T", qkv.dtype), ("H", h), ("KV", kv), ("D", d), ("NORM", norm),
                  ("TRADITIONAL", False), ("QOFF", 0), ("KOFF", h * d), ("VOFF", (h + kv) * d)],
        grid=(h * 1024, 1, 1),
        threadgroup=(1024, 1, 1),
        output_shapes=[(1, 1, h * d)],
        output_dtypes=[qkv.dtype],
    )[0]


def timeit(fn, reps=50):
    for _ in range(3):
        mx.eval(fn())
    t = time.perf_counter()
    for _ in range(reps):
        mx.eval(fn())
    return (time.perf_counter() - t) / reps * 1e6


def main():
    mx.random.seed(0)
    worst = 0.0
    for name, h, kv, d, norm in [("qwen3-0.6b", 16, 8, 128, True), ("llama3-8b", 32, 8, 128, False)]:
        for offset in (0, 7, 200, 1023):
            cap = (offset // 256 + 1) * 256
            dt = mx.bfloat16
            qkv = mx.random.normal(((h + 2 * kv) * d,)).astype(dt)
            qn = (1 + 0.1 * mx.random.normal((d,))).astype(dt)
            kn = (1 + 0.1 * mx.random.normal((d,))).astype(dt)
            kc = mx.random.normal((1, kv, cap, d)).astype(dt)
            vc = mx.random.normal((1, kv, cap, d)).astype(dt)
            mx.eval(qkv, qn, kn, kc, vc)
            ref, k_new, v_new = reference(qkv, qn, kn, kc, vc, offset, h, kv, d, norm)
            before = kc * 1  # a copy: the kernel writes kc's buffer in place
            mx.eval(ref, k_new, v_new, before)
            out = rmx(qkv, qn, kn, kc, vc, offset, h, kv, d, norm)
            mx.eval(out)
            diff = mx.abs(out.astype(mx.float32) - ref.astype(mx.float32)).max().item()
            scale = mx.abs(ref.astype(mx.float32)).max().item()
            # k goes through rope, whose angle MLX computes its own way: a bf16 ulp either way.
            k_err = mx.abs(kc[:, :, offset : offset + 1] - k_new).max().item()
            wrote = k_err <= 0.02 * max(mx.abs(k_new).max().item(), 1) and mx.array_equal(
                vc[:, :, offset : offset + 1], v_new).item()
            rest = mx.array_equal(kc[:, :, :offset], before[:, :, :offset]).item()
            worst = max(worst, diff / max(scale, 1e-6))
            t_rmx = timeit(lambda: rmx(qkv, qn, kn, kc, vc, offset, h, kv, d, norm))
            t_mlx = timeit(lambda: reference(qkv, qn, kn, kc, vc, offset, h, kv, d, norm)[0])
            print(f"{name:11} offset {offset:5}: max|diff| {diff:.4f} (of {scale:.2f}), cache write "
                  f"{'ok' if wrote and rest else 'WRONG'}; rmx {t_rmx:6.1f} us, mlx ops {t_mlx:6.1f} us")
    print(f"worst relative diff {worst:.4f}: {'PASS' if worst < 0.02 else 'FAIL'}")


if __name__ == "__main__":
    main()
