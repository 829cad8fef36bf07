"""A tiny Qwen3 that always answers with one fixed text, then stops.

Agents like Codex send no token limit, and a random-weight model never stops, so tests that
drive an agent end to end need a model that ends its answer, and a known answer to look for.
This rewrites the weights of a tiny Qwen3 (tiny_models.py's, with the real Qwen3 tokenizer) so
that the next token depends only on the current one, and the chain of next tokens spells the
reply:

- every attention and MLP output projection is zero, so the residual stream at a position is
  the embedding of the token there, whatever came before;
- the tokens of the chain (the prompt's possible last tokens, the reply's tokens) get
  orthogonal embeddings, and the lm_head row of each successor points at its predecessor's
  embedding, so it wins by a wide margin (every other row is zero).

It is still a real model run by the real engine: the prompt is tokenized, prefilled through
every layer, sampled and detokenized as any other.

    python scripted_model.py --base <tiny qwen3 dir> --reply "Hello from rmx" --out <dir>
"""

import argparse
import json
import shutil
from pathlib import Path

import mlx.core as mx
from tokenizers import Tokenizer

# The chat template's generation prompt ends with one of these (with or without an empty
# think block): "\n" and "\n\n".
PROMPT_ENDS = ["\n", "\n\n"]
# Logit margin per unit: the successor's logit is SCALE * sqrt(hidden), every other one 0.
SCALE = 4.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--reply", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    base, out = Path(a.base), Path(a.out)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(base, tmp)
    cfg = json.loads((base / "config.json").read_text())
    tok = Tokenizer.from_file(str(base / "tokenizer.json"))
    reply = tok.encode(a.reply, add_special_tokens=False).ids
    eos = cfg["eos_token_id"]
    eos = eos[0] if isinstance(eos, list) else eos
    starts = [tok.encode(s, add_special_tokens=False).ids for s in PROMPT_ENDS]
    assert all(len(s) == 1 for s in starts), starts
    starts = [s[0] for s in starts]
    chain = reply + [eos]
    # Each token has one successor: a repeated token (or one that ends prompts) would fork it.
    assert len(set(reply)) == len(reply) and not set(reply) & set(starts), (reply, starts)
    nodes = starts + reply
    hidden = cfg["hidden_size"]
    assert len(nodes) <= hidden, "the reply has more tokens than the model has dimensions"

    w = mx.load(str(base / "model.safetensors"))
    dtype = w["lm_head.weight"].dtype
    for k in list(w):
        if k.endswith("o_proj.weight") or k.endswith("down_proj.weight"):
            w[k] = mx.zeros_like(w[k])
        if k.endswith("norm.weight") and not k.endswith(("q_norm.weight", "k_norm.weight")):
            w[k] = mx.ones_like(w[k])
    embed = w["model.embed_tokens.weight"].astype(mx.float32)
    head = mx.zeros(w["lm_head.weight"].shape, dtype=mx.float32)
    eye = mx.eye(hidden, dtype=mx.float32)
    for i, t in enumerate(nodes):
        embed[t] = eye[i]
    successor = {s: chain[0] for s in starts}
    successor.update(zip(reply, chain[1:]))
    for prev, nxt in successor.items():
        head[nxt] = head[nxt] + SCALE * eye[nodes.index(prev)]
    w["model.embed_tokens.weight"] = embed.astype(dtype)
    w["lm_head.weight"] = head.astype(dtype)
    mx.save_safetensors(str(tmp / "model.safetensors"), w, metadata={"format": "mlx"})
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(json.dumps({"reply_tokens": reply, "eos": eos}))


if __name__ == "__main__":
    main()
