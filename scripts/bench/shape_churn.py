#!/usr/bin/env python3
"""Does MLX pay per new shape on this device? (issue #24: a speculative step of 7 tokens took
~4x what `rmx bench --verify-cost` measured for the same block at one fixed cache length.)

A verify step reads k+1 tokens against a cache one block longer each time, so every step has
a key length attention has not seen before. This times, ms per call:

  sdpa same L      fused attention, 7 queries, the same key length every call
  sdpa new L       the same, the key length one longer every call
  sdpa new L pad   a new length padded up to a multiple of 256, with an additive mask
  model same       mlx-lm's model on 7 tokens, the cache cut back to the same length each call
  model new        mlx-lm's model on 7 tokens, the cache growing by 7 each call (what
                   speculation does)
  model 1 new      one token per call, the cache growing (a plain decode step)

With --sinks N (session 31: a GPT-OSS request of a new prompt length sat a minute in host work),
also GPT-OSS's attention for a 64-token prompt chunk, N calls each, seconds a call: sinks with a
causal mask, and sinks with a window mask array, at the same key length and at new ones (keep N
small: a new shape may cost a minute).

  python3 shape_churn.py [MODEL_DIR] [--calls N] [--sinks N]
"""
import argparse, time

import mlx.core as mx


def timed(fn, calls):
    fn(0)
    mx.synchronize()
    t = time.perf_counter()
    for i in range(1, calls + 1):
        mx.eval(fn(i))
    return (time.perf_counter() - t) * 1e3 / calls


def sdpa(calls, heads=32, kv=8, dim=128, q_len=7, base=1000, dtype=mx.bfloat16):
    cap = base + calls * q_len + 512
    keys = mx.random.normal((1, kv, cap, dim)).astype(dtype)
    values = mx.random.normal((1, kv, cap, dim)).astype(dtype)
    q = mx.random.normal((1, heads, q_len, dim)).astype(dtype)
    mx.eval(keys, values, q)
    scale = dim ** -0.5

    def same(i):
        L = base
        return mx.fast.scaled_dot_product_attention(q, keys[:, :, :L], values[:, :, :L], scale=scale, mask="causal")

    def new(i):
        L = base + i
        return mx.fast.scaled_dot_product_attention(q, keys[:, :, :L], values[:, :, :L], scale=scale, mask="causal")

    def pad(i):
        L = base + i
        P = (L + 255) // 256 * 256
        pos = mx.arange(P)[None, :]
        row = (L - q_len) + mx.arange(q_len)[:, None]
        mask = mx.where(pos <= row, 0.0, -mx.inf).astype(dtype)
        return mx.fast.scaled_dot_product_attention(q, keys[:, :, :P], values[:, :, :P], scale=scale, mask=mask)

    return timed(same, calls), timed(new, calls), timed(pad, calls)


def sinks_runs(calls, heads=64, kv=8, dim=64, q_len=64, base=200, window=128, dtype=mx.bfloat16):
    """Seconds a call: (causal same, causal new, window same, window new), GPT-OSS-20B's heads."""
    cap = base + (calls + 1) * q_len
    keys = mx.random.normal((1, kv, cap, dim)).astype(dtype)
    values = mx.random.normal((1, kv, cap, dim)).astype(dtype)
    q = mx.random.normal((1, heads, q_len, dim)).astype(dtype)
    sinks = mx.random.normal((heads,)).astype(dtype)
    mx.eval(keys, values, q, sinks)

    def call(L, windowed):
        mask = "causal"
        if windowed:
            rows = (L - q_len) + mx.arange(q_len)[:, None]
            pos = mx.arange(L)[None, :]
            mask = (pos <= rows) & (pos > rows - window)
        return mx.fast.scaled_dot_product_attention(
            q, keys[:, :, :L], values[:, :, :L], scale=dim ** -0.5, mask=mask, sinks=sinks)

    def secs(windowed, grow):
        mx.eval(call(base, windowed))
        mx.synchronize()
        t = time.perf_counter()
        for i in range(1, calls + 1):
            mx.eval(call(base + (i * q_len if grow else 0), windowed))
        mx.synchronize()
        return (time.perf_counter() - t) / calls

    return secs(False, False), secs(False, True), secs(True, False), secs(True, True)


def model_runs(path, calls, q_len=7):
    from mlx_lm import load
    from mlx_lm.models.cache import make_prompt_cache

    model, _ = load(path)
    prompt = mx.array([list(range(1, 513))])
    toks = mx.array([list(range(5, 5 + q_len))])
    one = mx.array([[5]])

    def fresh():
        cache = make_prompt_cache(model)
        mx.eval(model(prompt, cache=cache))
        return cache

    cache = fresh()

    def same(i):
        out = model(toks, cache=cache)
        for c in cache:
            c.offset -= q_len
        return out

    same_ms = timed(same, calls)
    cache = fresh()
    new_ms = timed(lambda i: model(toks, cache=cache), calls)
    cache = fresh()
    one_ms = timed(lambda i: model(one, cache=cache), calls)
    return same_ms, new_ms, one_ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--sinks", type=int, default=0, help="calls of GPT-OSS's attention with sinks")
    a = ap.parse_args()
    if a.sinks:
        cs, cn, ws, wn = sinks_runs(a.sinks)
        print(f"sinks causal same L {cs:8.3f} s, new L {cn:8.3f} s; "
              f"window mask same L {ws:8.3f} s, new L {wn:8.3f} s", flush=True)
    s, n, p = sdpa(a.calls)
    print(f"sdpa same L     {s:8.3f} ms")
    print(f"sdpa new L      {n:8.3f} ms")
    print(f"sdpa new L pad  {p:8.3f} ms")
    if a.model:
        s, n, o = model_runs(a.model, a.calls)
        name = a.model.rstrip("/").split("/")[-1]
        print(f"{name}: model same {s:8.3f} ms, model new {n:8.3f} ms, model 1 new {o:8.3f} ms")


if __name__ == "__main__":
    main()
