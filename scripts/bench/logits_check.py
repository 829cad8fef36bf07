#!/usr/bin/env python3
"""Do rmx and mlx-lm compute the same logits on this machine's backend?

    python3 scripts/bench/logits_check.py RMX_BINARY MODEL_DIR [--prompt-len N ...] [--gen M]
        [--drift] [--launch "-n 2 --backend nccl --mode tensor"]

Starts `rmx serve` on a free port (temporary RMX_HOME), asks /v1/completions for a greedy
continuation of a random prompt with the top-5 log-probabilities of every step, then runs mlx-lm
on the same files along rmx's tokens (teacher-forced, step by step with a KV cache, as decode
does) and compares: the largest |logprob difference| over rmx's top-5 tokens, and at each step
where the greedy tokens differ, mlx-lm's gap between its own top token and rmx's. Prints one
JSON line per prompt length as soon as it is measured (with the seconds each side took: a
device call that runs out of time keeps the lengths done); exits 1 when a greedy difference is
not explained by a near-tie.

A near-tie is a gap of at most --tol or one bf16 step at the size of that step's largest logit
(or of its top log-probability, if larger: greedy compares bf16 log-probabilities), whichever is
more: the logits come out of the model in bf16, so two of them 16-32 apart from zero
differ by 0.125 at the least, and a 0.1 bar alone would call the closest possible pair a
disagreement (Llama-3-8B's peaked copies: every mismatch was exactly 0.125, session 6).

--drift also measures mlx-lm against itself: the same model in float32 along the same tokens.
Its largest |logprob difference| over mlx-lm's top 5 is what bf16 rounding alone does to this
model and prompt (`mlx_bf16_vs_f32`; rmx's against the same float32 run is `rmx_vs_f32`); two correct bf16 engines can each be that far from the float32 answer, in
opposite directions, so a gap up to twice it is a near-tie too. On deep random models one bf16
rounding flipped early grows to a few tenths of a log-probability (Llama-3-8B's peaked 4-bit
copy: 0.34-0.37 for mlx-lm against itself, session 7), far past one bf16 step.
"""
import argparse, json, os, re, sys, time

import mlx.core as mx

from rmx_serve import post, serving


def rmx_run(base, model, ids, gen):
    r = post(f"{base}/v1/completions", {"model": model, "prompt": " ".join(f"t{i}" for i in ids),
                                        "max_tokens": gen, "temperature": 0, "logprobs": 5})
    lp = r["choices"][0]["logprobs"]
    num = lambda t: int(re.search(r"t(\d+)", t).group(1))
    toks = [num(t) for t in lp["tokens"]]
    tops = [{num(k): v for k, v in d.items()} for d in lp["top_logprobs"]]
    return toks, tops


def mlx_along(model, ids, toks):
    from mlx_lm.models.cache import make_prompt_cache
    cache = make_prompt_cache(model)
    logits = model(mx.array(ids)[None], cache=cache)[0, -1]
    out = []
    for t in toks:
        lp = logits - mx.logsumexp(logits.astype(mx.float32))
        out.append((lp.astype(mx.float32), mx.abs(logits).max().astype(mx.float32)))
        logits = model(mx.array([[t]]), cache=cache)[0, -1]
    mx.eval(out)
    return out


def float32_drift(model, ids, toks, tops, ref):
    """mlx-lm's largest |logprob difference| over its own top 5 between the bf16 model (`ref`,
    already computed along rmx's tokens) and the same weights in float32 (floating parameters
    cast; quantized weights keep their packing), teacher-forced along the same tokens; and rmx's
    over its own top 5 against the same float32 run (how far each bf16 engine is from the float32
    answer: rmx's within mlx-lm's is the issues' "within mlx-lm's own bf16 drift"). The model is
    cast for the run and given its own parameters back after (bf16 -> float32 -> bf16 is exact),
    so each prompt length is reported as soon as it is measured (mlx_side.py's `drift` measures
    the same on its own greedy tokens)."""
    from mlx_side import forced_logprobs, to_float32
    own = model.parameters()
    to_float32(model)
    try:
        lp32 = forced_logprobs(model, ids, toks)
        mx.eval(lp32)
    finally:
        model.update(own)
    worst = rmx_worst = 0.0
    for step, (lp, _) in enumerate(ref):
        top = mx.argsort(-lp)[:5]
        worst = max(worst, mx.abs(lp[top] - lp32[step][top]).max().item())
        for i, v in tops[step].items():
            rmx_worst = max(rmx_worst, abs(v - lp32[step][i].item()))
    return worst, rmx_worst


def sdpa_by_ops():
    """mx.fast.scaled_dot_product_attention for more than one query computed as MLX's own
    fallback computes it (mlx/fast.cpp: scaled queries, products, the mask, sinks as a first
    softmax column, a precise softmax, products), so a CUDA run never builds the fused kernel:
    with GPT-OSS's sinks and window masks that build took 60-100 s for each new prompt length
    (an H200, session 31), on mlx-lm's side as on rmx's before it took products too. Decode
    steps (one query) keep the fused kernel."""
    fused = mx.fast.scaled_dot_product_attention

    def sdpa(q, k, v, *, scale, mask=None, sinks=None, **kw):
        if q.shape[2] == 1 or kw:
            return fused(q, k, v, scale=scale, mask=mask, sinks=sinks, **kw)
        b, heads, l, d = q.shape
        kv, t = k.shape[1], k.shape[2]
        rep = heads // kv
        q = mx.array(scale, q.dtype) * q
        if rep > 1:
            q = q.reshape(b, kv, rep, l, d)
            k, v = mx.expand_dims(k, 2), mx.expand_dims(v, 2)
        scores = q @ mx.swapaxes(k, -1, -2)
        if isinstance(mask, str):
            mask = mx.arange(t - l, t)[:, None] >= mx.arange(t)[None]
        if mask is not None:
            if rep > 1 and mask.ndim >= 3:
                mask = (mx.expand_dims(mask, -3) if mask.shape[-3] == 1
                        else mask.reshape(*mask.shape[:-3], kv, rep, *mask.shape[-2:]))
            scores = (mx.where(mask, scores, mx.array(mx.finfo(scores.dtype).min, scores.dtype))
                      if mask.dtype == mx.bool_ else scores + mask)
        if sinks is not None:
            s = sinks.astype(scores.dtype).reshape((1, kv, rep, 1, 1) if rep > 1 else (1, heads, 1, 1))
            scores = mx.concatenate([mx.broadcast_to(s, (*scores.shape[:-1], 1)), scores], -1)
        scores = mx.softmax(scores, -1, precise=True)
        if sinks is not None:
            scores = scores[..., 1:]
        out = scores @ v
        return out.reshape(b, heads, l, d) if rep > 1 else out

    mx.fast.scaled_dot_product_attention = sdpa


def bf16_step(x):
    """The spacing of bf16 values at magnitude x (8 significant bits)."""
    import math
    return 2.0 ** (math.floor(math.log2(max(abs(x), 1e-30))) - 7)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rmx"); ap.add_argument("model")
    ap.add_argument("--prompt-len", type=int, nargs="+", default=[64, 1024])
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--tol", type=float, default=0.1,
                    help="logprob gap under which two candidates count as tied in bf16")
    ap.add_argument("--drift", action="store_true",
                    help="also run mlx-lm in float32 along the same tokens; near-ties up to twice "
                         "its difference from mlx-lm in bf16")
    ap.add_argument("--launch", default="",
                    help="serve split over ranks: `rmx launch ARGS -- rmx serve` (e.g. \"-n 2 "
                         "--backend nccl --mode tensor\"), checked against mlx-lm in one process")
    ap.add_argument("--mlx-sdpa-ops", action="store_true",
                    help="mlx-lm's attention for prompts by MLX's fallback ops, not its fused "
                         "kernel (on CUDA built anew for each prompt length: minutes a length "
                         "with GPT-OSS's sinks)")
    a = ap.parse_args()
    if a.mlx_sdpa_ops:
        sdpa_by_ops()
    from mlx_lm.utils import load_model
    import pathlib
    model, _ = load_model(pathlib.Path(a.model))
    launch = ["launch", *a.launch.split(), "--", "rmx"] if a.launch else []
    ok = True
    with serving(a.rmx, a.model, launch) as (base, home):
        from mlx_side import vocab_size
        vocab = vocab_size(model)
        for n in a.prompt_len:
            ids = mx.random.randint(0, vocab * 3 // 4, (n,), key=mx.random.key(n)).tolist()
            # Where the time goes (on a GPU the first request pays rmx's kernel compiles).
            t0 = time.perf_counter()
            toks, tops = rmx_run(base, a.model, ids, a.gen)
            t1 = time.perf_counter()
            ref = mlx_along(model, ids, toks)
            t2 = time.perf_counter()
            drift, rmx_drift = float32_drift(model, ids, toks, tops, ref) if a.drift else (None, None)
            t3 = time.perf_counter()
            bound = a.tol if drift is None else max(a.tol, 2 * drift)
            max_diff, max_decode, mismatches, worst_gap, worst_steps = 0.0, 0.0, 0, 0.0, 0.0
            # Where along the path the engines part (a difference that starts at the step a
            # sliding window first wraps, say, points at the cache rather than the products).
            step_diffs, mismatch_steps = [], []
            for step, (t, top, (lp, big)) in enumerate(zip(toks, tops, ref)):
                m = int(mx.argmax(lp).item())
                # Greedy picks the largest bf16 log-probability (mlx-lm's generate_step and
                # rmx alike), so candidates tie within a bf16 step at the logits' size or at
                # the top log-probability's, whichever is larger: flat logits (a tiny random
                # model's, all near -ln(vocab)) round to one log-probability and the first wins.
                ulp = bf16_step(max(big.item(), abs(lp[m].item())))
                step_diff = 0.0
                for i, v in top.items():
                    diff = abs(v - lp[i].item())
                    step_diff = max(step_diff, diff)
                    max_diff = max(max_diff, diff)
                    if step > 0:  # step 0's logits come from the prefill, the rest from decode
                        max_decode = max(max_decode, diff)
                step_diffs.append(round(step_diff, 3))
                if m != t:
                    mismatch_steps.append(step)
                    mismatches += 1
                    gap = lp[m].item() - lp[t].item()
                    worst_gap = max(worst_gap, gap)
                    worst_steps = max(worst_steps, gap / ulp)
                    ok &= gap <= max(bound, ulp)
            out = {"model": os.path.basename(a.model.rstrip("/")), "prompt_len": n,
                   "steps": len(toks), "max_abs_logprob_diff": round(max_diff, 4),
                   "max_abs_logprob_diff_decode": round(max_decode, 4),
                   "greedy_mismatches": mismatches, "worst_mismatch_gap": round(worst_gap, 4),
                   "worst_mismatch_bf16_steps": round(worst_steps, 2), "tol": a.tol,
                   "mismatch_steps": mismatch_steps, "step_diffs": step_diffs}
            if drift is not None:
                out.update(mlx_bf16_vs_f32=round(drift, 4), rmx_vs_f32=round(rmx_drift, 4),
                           near_tie_bound=round(bound, 4))
            out["seconds"] = {"rmx": round(t1 - t0, 1), "mlx_lm": round(t2 - t1, 1),
                              "float32": round(t3 - t2, 1)}
            print(json.dumps(out), flush=True)
    if not ok:
        sys.stderr.write(open(os.path.join(home, "serve.log")).read()[-4000:])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
