"""An agent's turn against any OpenAI-compatible server: a long first request (instructions and
tool schemas, as coding agents send), then the same conversation with the answer and a new
message. Prints each turn's time to first token, the server's reported cached tokens, and the
second turn's TTFT as a share of the first.

    python3 scripts/bench/agent_turn.py --url http://127.0.0.1:8000/v1 --model NAME \
        [--prompt-words 9000] [--new-words 150] [--runs 3] [--json] [--synthetic-vocab N] \
        [--restart-cmd "systemctl restart my-server"]

Standard library only, so it runs on a bare machine next to any server (rmx serve,
mlx_lm.server, llama-server, vLLM). Each run uses a fresh first prompt (a run number leads
it), so no run is served from an earlier run's cache.
"""
import argparse
import json
import statistics
import subprocess
import time
import urllib.request

WORDS = (
    "the agent reads files edits code runs tests and reports results to the user while "
    "following the repository conventions described in these instructions carefully"
).split()


SYNTHETIC = 0


def text_of(n, seed):
    if SYNTHETIC:
        # Word-level test tokenizers (scripts/bench/mlx_side.py): word tI is token I.
        return " ".join(f"t{2 + (i * 7919 + seed * 104729) % (SYNTHETIC - 2)}" for i in range(n))
    return " ".join(WORDS[(i * 7 + seed) % len(WORDS)] for i in range(n))


def stream_chat(url, model, messages, max_tokens):
    """(ttft seconds, answer text, usage) of one streamed chat completion."""
    body = json.dumps({
        "model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0,
        "stream": True, "stream_options": {"include_usage": True},
    }).encode()
    req = urllib.request.Request(url.rstrip("/") + "/chat/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    ttft, answer, usage = None, [], {}
    with urllib.request.urlopen(req, timeout=3600) as resp:
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece and ttft is None:
                    ttft = time.perf_counter() - start
                answer.append(piece)
            if chunk.get("usage"):
                usage = chunk["usage"]
    return (ttft if ttft is not None else time.perf_counter() - start), "".join(answer), usage


def cached(usage):
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)


def one_run(args, run):
    system = f"Run {run}. " + text_of(args.prompt_words, run)
    first = [{"role": "system", "content": system},
             {"role": "user", "content": "Summarize the instructions in one sentence."}]
    ttft1, answer, u1 = stream_chat(args.url, args.model, first, args.max_tokens)
    second = first + [{"role": "assistant", "content": answer},
                      {"role": "user", "content": text_of(args.new_words, run + 1)}]
    ttft2, _, u2 = stream_chat(args.url, args.model, second, args.max_tokens)
    out = {}
    if args.restart_cmd:
        # A restarted server: the next turn again, with nothing in memory.
        subprocess.run(args.restart_cmd, shell=True, check=True)
        wait_up(args.url)
        third = second + [{"role": "assistant", "content": "ok"},
                          {"role": "user", "content": text_of(args.new_words, run + 2)}]
        ttft3, _, u3 = stream_chat(args.url, args.model, third, args.max_tokens)
        out = {"restart_ttft_s": ttft3, "restart_prompt_tokens": u3.get("prompt_tokens"),
               "restart_cached_tokens": cached(u3), "restart_ratio": ttft3 / ttft1}
    return out | {
        "first_ttft_s": ttft1, "first_prompt_tokens": u1.get("prompt_tokens"),
        "second_ttft_s": ttft2, "second_prompt_tokens": u2.get("prompt_tokens"),
        "second_cached_tokens": cached(u2), "ratio": ttft2 / ttft1,
    }


def wait_up(url, seconds=300):
    for _ in range(seconds * 10):
        try:
            urllib.request.urlopen(url.rstrip("/") + "/models", timeout=5).read()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not come back after the restart")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000/v1")
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-words", type=int, default=9000,
                    help="words in the first request's instructions (~1.3 tokens each)")
    ap.add_argument("--new-words", type=int, default=150, help="words of the new message")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json", action="store_true", help="one JSON object per run, then the summary")
    ap.add_argument("--restart-cmd", metavar="CMD",
                    help="a shell command that restarts the server; then a third turn measures "
                         "what a restarted server keeps (rmx: hot prefixes on disk)")
    ap.add_argument("--synthetic-vocab", type=int, default=0, metavar="N",
                    help="write words t2..tN-1, for the word-level tokenizers of mlx_side.py models")
    args = ap.parse_args()
    global SYNTHETIC
    SYNTHETIC = args.synthetic_vocab
    runs = [one_run(args, r) for r in range(args.runs)]
    summary = {
        "model": args.model,
        "first_ttft_s": statistics.median(r["first_ttft_s"] for r in runs),
        "second_ttft_s": statistics.median(r["second_ttft_s"] for r in runs),
        "ratio": statistics.median(r["ratio"] for r in runs),
        "first_prompt_tokens": runs[0]["first_prompt_tokens"],
        "second_prompt_tokens": runs[0]["second_prompt_tokens"],
        "second_cached_tokens": runs[0]["second_cached_tokens"],
    }
    if args.restart_cmd:
        summary["restart_ttft_s"] = statistics.median(r["restart_ttft_s"] for r in runs)
        summary["restart_ratio"] = statistics.median(r["restart_ratio"] for r in runs)
        summary["restart_cached_tokens"] = runs[0]["restart_cached_tokens"]
    if args.json:
        for r in runs:
            print(json.dumps(r))
        print(json.dumps(summary))
        return
    for i, r in enumerate(runs):
        print(f"run {i}: first {r['first_ttft_s']*1000:.0f} ms ({r['first_prompt_tokens']} tokens), "
              f"second {r['second_ttft_s']*1000:.0f} ms ({r['second_prompt_tokens']} tokens, "
              f"{r['second_cached_tokens']} cached): {100*r['ratio']:.1f}%"
              + (f"; after a restart {r['restart_ttft_s']*1000:.0f} ms "
                 f"({r['restart_prompt_tokens']} tokens, {r['restart_cached_tokens']} cached): "
                 f"{100*r['restart_ratio']:.1f}%" if args.restart_cmd else ""))
    print(f"median: first {summary['first_ttft_s']*1000:.0f} ms, second "
          f"{summary['second_ttft_s']*1000:.0f} ms, second/first {100*summary['ratio']:.1f}%")


if __name__ == "__main__":
    main()
