"""N concurrent streaming chat completions against any OpenAI-compatible server: aggregate decode
tok/s, time to first token (median, p95) and per-stream tok/s, for each concurrency asked for.

    python3 scripts/bench/streams.py --url http://127.0.0.1:8000/v1 --model NAME \
        [--streams 1,4,16,32] [--prompt-words 48] [--max-tokens 128] [--json] \
        [--synthetic-vocab N]

Every request asks for --max-tokens new tokens at temperature 0; one that stops early at an EOS
counts what it generated (the server's usage). Standard library only (threads), so it runs next to
any server (rmx serve, mlx_lm.server, llama-server, vLLM). A warm-up round at the highest
concurrency runs first and is not reported: it pays each new batch shape's kernel compilation.
(Named streams.py, not concurrent.py: a script here must not shadow the standard library's
`concurrent` package for the scripts beside it.)
"""
import argparse
import json
import os
import statistics
import threading
import time
import urllib.error
import urllib.request

WORDS = ("please write a short note about the weather the garden the river and the old town "
         "square where people meet in the evening").split()
SYNTHETIC = 0


def prompt_of(n, seed):
    if SYNTHETIC:
        # Word-level test tokenizers (scripts/bench/mlx_side.py): word tI is token I.
        return " ".join(f"t{2 + (i * 7919 + seed * 104729) % (SYNTHETIC - 2)}" for i in range(n))
    return " ".join(WORDS[(i * 5 + seed) % len(WORDS)] for i in range(n))


def stream(url, model, content, max_tokens):
    """(submitted, first token, done) times, completion tokens and text of one streamed request."""
    body = json.dumps({
        "model": model, "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True},
    }).encode()
    req = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    first, pieces, usage, text = None, 0, {}, []
    # A server with a short listen backlog (Python's http.server: 5) resets connections past it;
    # such a request is sent again, its time still counted from the first try.
    for attempt in range(50):
        try:
            resp = urllib.request.urlopen(req, timeout=3600)
            break
        except (ConnectionResetError, ConnectionRefusedError, urllib.error.URLError) as e:
            if attempt == 49 or isinstance(e, urllib.error.HTTPError):
                raise
            time.sleep(0.05)
    with resp:
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    pieces += 1
                    if first is None:
                        first = time.perf_counter()
            if chunk.get("usage"):
                usage = chunk["usage"]
    end = time.perf_counter()
    return start, first or end, end, usage.get("completion_tokens", pieces), "".join(text)


def p95(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]


def round_of(args, n, seed):
    results = [None] * n
    errors = []

    def one(i):
        try:
            results[i] = stream(args.url, args.model, prompt_of(args.prompt_words, seed + i),
                                args.max_tokens)
        except Exception as e:  # reported, and the round fails
            errors.append(f"stream {i}: {e}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit("; ".join(errors))
    wall = time.perf_counter() - t0
    tokens = sum(r[3] for r in results)
    ttfts = [r[1] - r[0] for r in results]
    # A stream's decode speed: tokens after the first over the time after the first.
    per_stream = [(r[3] - 1) / max(r[2] - r[1], 1e-9) for r in results if r[3] > 1]
    # Aggregate decode: every token generated over the span in which all streams decode.
    decode_span = max(r[2] for r in results) - max(r[1] for r in results)
    decoded = sum(r[3] - 1 for r in results)
    row = {
        "streams": n, "completion_tokens": tokens, "wall_s": wall,
        "aggregate_tok_s": tokens / wall,
        "aggregate_decode_tok_s": decoded / decode_span if decode_span > 0 else None,
        "ttft_median_s": statistics.median(ttfts), "ttft_p95_s": p95(ttfts),
        "per_stream_tok_s": statistics.median(per_stream) if per_stream else None,
    }
    if args.check:
        # Batch invariance: each stream's answer against the same request sent alone.
        alone = [stream(args.url, args.model, prompt_of(args.prompt_words, seed + i),
                        args.max_tokens)[4] for i in range(n)]
        common = [len(os.path.commonprefix([a, r[4]])) / max(len(a), 1)
                  for a, r in zip(alone, results)]
        row["same_as_alone"] = sum(a == r[4] for a, r in zip(alone, results))
        row["mean_common_prefix"] = statistics.mean(common)
    return row


def main():
    global SYNTHETIC
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--streams", default="1,4,16,32")
    ap.add_argument("--prompt-words", type=int, default=48)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--check", action="store_true",
                    help="send each stream's request again alone and count identical answers")
    ap.add_argument("--synthetic-vocab", type=int, default=0,
                    help="prompts of word-level test tokens t2..tN (scripts/bench/mlx_side.py)")
    args = ap.parse_args()
    SYNTHETIC = args.synthetic_vocab
    counts = [int(x) for x in args.streams.split(",") if x.strip()]
    round_of(args, max(counts), 10_000)
    rows = [round_of(args, n, 1000 * n) for n in counts]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'streams':>7} {'agg tok/s':>10} {'decode tok/s':>12} {'TTFT med':>9} "
          f"{'TTFT p95':>9} {'per-stream':>10}")
    for r in rows:
        dec = r["aggregate_decode_tok_s"]
        per = r["per_stream_tok_s"]
        print(f"{r['streams']:>7} {r['aggregate_tok_s']:>10.1f} "
              f"{(f'{dec:.1f}' if dec else '-'):>12} {r['ttft_median_s'] * 1000:>7.0f}ms "
              f"{r['ttft_p95_s'] * 1000:>7.0f}ms {(f'{per:.1f}' if per else '-'):>10}"
              + (f"  same as alone {r['same_as_alone']}/{r['streams']}"
                 f" (common prefix {r['mean_common_prefix']:.0%})" if args.check else ""))


if __name__ == "__main__":
    main()
