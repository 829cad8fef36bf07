#!/usr/bin/env python3
"""Where a constrained decode step's extra time goes, at MLX's level (issue #20: with a JSON
schema rmx decodes ~0.2-0.3 ms a token slower on the GPU than without).

A constrained step cannot sample token n+1 before the host has read token n (the grammar's mask
for n+1 depends on it), so rmx queues the forward of n+1 as one evaluation and the masked
sampling as a second one, computing the mask on the host while the forward runs. This times
mlx-lm's model decoding greedily in patterns that take that structure apart, ms per token:

  free        forward + argmax in one async evaluation, the next queued before reading
              (mlx-lm's generate_step, rmx's free path)
  split       forward as one evaluation, argmax as a second, token read in between
  split+host  split, with HOST_MS of busy host work after the read (the mask's time): if the
              forward runs meanwhile it costs nothing, if not it adds HOST_MS
  split+bits  split, the sampling masked by a fresh all-ones bit row each step (uploaded,
              expanded as rmx does: take, floor_divide, remainder, not_equal, where)
  split+bools split, masked by a fresh [vocab] bool row each step
  split+same  split+bits with the same device mask array every step (no upload, no expansion)
  sync        free, but each token read before the next step is queued (no pipelining)

  python3 split_step.py MODEL_DIR [--tokens N] [--host-ms MS]
"""
import argparse, time

import mlx.core as mx
import numpy as np
from mlx_lm import load
from mlx_lm.models.cache import make_prompt_cache


def run(model, pattern, tokens, host_ms, vocab):
    cache = make_prompt_cache(model)
    prompt = mx.array([[1, 2, 3, 4, 5, 6, 7, 8]])
    logits = model(prompt, cache=cache)[:, -1, :]
    y = mx.argmax(logits, axis=-1)
    mx.eval(y)
    words = np.full((vocab + 31) // 32, 0xFFFFFFFF, dtype=np.uint32)
    word_of = mx.arange(vocab, dtype=mx.uint32) // 32
    bit_of = mx.left_shift(mx.array(1, dtype=mx.uint32), mx.arange(vocab, dtype=mx.uint32) % 32)
    bools = np.ones(vocab, dtype=np.bool_)
    same = mx.ones((1, vocab), dtype=mx.bool_)
    mx.eval(word_of, bit_of, same)

    def fwd(tok):
        return model(tok.reshape(1, 1), cache=cache)[:, -1, :]

    def mask():
        if pattern == "split+bits":
            w = mx.array(words)
            return mx.not_equal(mx.remainder(mx.floor_divide(w[word_of], bit_of), 2), 0).reshape(1, -1)
        if pattern == "split+bools":
            return mx.array(bools).reshape(1, -1)
        if pattern == "split+same":
            return same
        return None

    def pick(lg, m):
        if m is not None:
            lg = mx.where(m, lg, -mx.inf)
        lp = lg - mx.logsumexp(lg, axis=-1, keepdims=True)
        return mx.argmax(lp, axis=-1)

    def busy(ms):
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end:
            pass

    t0 = None
    for i in range(tokens + 8):
        if i == 8:
            mx.synchronize()
            t0 = time.perf_counter()
        if pattern == "free":
            nxt = pick(fwd(y), None)
            mx.async_eval(nxt)
            y.item()
            y = nxt
        elif pattern == "sync":
            y = pick(fwd(y), None)
            mx.eval(y)
            y.item()
        else:
            lg = fwd(y)
            mx.async_eval(lg)
            y.item()
            if pattern == "split+host":
                busy(host_ms)
            y = pick(lg, mask())
            mx.async_eval(y)
    y.item()
    return (time.perf_counter() - t0) * 1e3 / tokens


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--tokens", type=int, default=200)
    ap.add_argument("--host-ms", type=float, default=0.3)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    model, _ = load(a.model)
    vocab = model.args.vocab_size
    patterns = ["free", "split", "split+host", "split+bits", "split+bools", "split+same", "sync"]
    best = {p: float("inf") for p in patterns}
    for _ in range(a.rounds):
        for p in patterns:
            best[p] = min(best[p], run(model, p, a.tokens, a.host_ms, vocab))
    base = best["free"]
    for p in patterns:
        print(f"{a.model.rstrip('/').split('/')[-1]:28s} {p:12s} {best[p]:7.3f} ms/token "
              f"({best[p] - base:+.3f})" + (f"  [host {a.host_ms} ms]" if p == "split+host" else ""))


if __name__ == "__main__":
    main()
