"""MLX's quantized matmul at the small row counts of a batch's decode step (Llama-3-8B's matrices,
4-bit), and its fused attention with and without a padding mask, on whatever device MLX runs:
the references rmx's batch path (fastpath/gemv.rs qgemm_rows) is measured against.

    python3 scripts/bench/qmm_lab.py
"""
import time, mlx.core as mx
def t(f, n=50):
    for _ in range(5): mx.eval(f())
    mx.synchronize(); s=time.perf_counter()
    for _ in range(n): mx.eval(f())
    mx.synchronize(); return (time.perf_counter()-s)/n*1e6
for (N,K) in [(14336,4096),(4096,14336),(6144,4096)]:
    w = mx.random.normal((N,K)).astype(mx.bfloat16)
    wq, s, b = mx.quantize(w, group_size=64, bits=4)
    for M in [1,2,4,8,16,32]:
        x = mx.random.normal((M,K)).astype(mx.bfloat16)
        us = t(lambda: mx.quantized_matmul(x, wq, s, b, transpose=True, group_size=64, bits=4))
        print(f"qmm N={N} K={K} M={M}: {us:.1f} us", flush=True)
for B in [1,4,32]:
    q = mx.random.normal((B,32,1,128)).astype(mx.bfloat16)
    k = mx.random.normal((B,8,256,128)).astype(mx.bfloat16)
    m = mx.ones((B,1,1,256), dtype=mx.bool_)
    print("sdpa B",B,"nomask", f"{t(lambda: mx.fast.scaled_dot_product_attention(q,k,k,scale=0.1)):.1f}",
          "mask", f"{t(lambda: mx.fast.scaled_dot_product_attention(q,k,k,scale=0.1,mask=m)):.1f}", flush=True)
