#!/usr/bin/env python3
"""What does a request of a prompt length the server has not seen cost? (session 31: on an H200
a GPT-OSS request of a new length sat 60-100 s in host work, where a known one took well under
a second.)

    python3 scripts/bench/new_lengths.py RMX_BINARY MODEL_DIR [--lengths 72 90 110] [--timeout S]

Starts `rmx serve` (temporary RMX_HOME), then asks /v1/completions for 2 greedy tokens of
random prompts (no two share a first token, so the prefix cache reuses nothing): one at each
length, then each length again with other tokens (a shape already met). Prints one JSON line a
request, as it returns: the prompt length, whether the length was met before, the seconds.
"""
import argparse, json, os, random, time

from rmx_serve import post, serving


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rmx"); ap.add_argument("model")
    ap.add_argument("--lengths", type=int, nargs="+", default=[72, 90, 110])
    ap.add_argument("--timeout", type=float, default=300)
    a = ap.parse_args()
    with serving(a.rmx, a.model) as (base, _):
        cfg = json.load(open(os.path.join(a.model, "config.json")))
        vocab = cfg.get("vocab_size") or cfg["text_config"]["vocab_size"]
        rng = random.Random(0)
        firsts = rng.sample(range(1, vocab), 2 * len(a.lengths) + 1)
        # A warm-up request (kernel compiles, the model's load) at a length not measured.
        plan = [(8, None)] + [(n, False) for n in a.lengths] + [(n, True) for n in a.lengths]
        for (n, seen), first in zip(plan, firsts):
            ids = [first] + [rng.randrange(1, vocab) for _ in range(n - 1)]
            body = {"model": a.model, "prompt": " ".join(f"t{i}" for i in ids), "max_tokens": 2,
                    "temperature": 0}
            t = time.perf_counter()
            post(f"{base}/v1/completions", body, timeout=a.timeout)
            secs = round(time.perf_counter() - t, 3)
            what = "warm-up" if seen is None else ("seen" if seen else "new")
            print(json.dumps({"prompt_len": n, "length": what, "seconds": secs}), flush=True)


if __name__ == "__main__":
    main()
