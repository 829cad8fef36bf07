"""Loads two model directories with mlx-lm and compares their logits on the same prompt, and
their tokenizers on a few strings. Prints JSON: {"max_logit_diff", "tokens_equal", "ours", "reference"}.
usage: compare_models.py OURS REFERENCE"""
import json
import sys

import mlx.core as mx
from mlx_lm import load

texts = ["What is the capital of France?", "Hello world 12345 café  naïve\n\n  x", "日本語 😀 <|im_end|>"]
ours, ours_tok = load(sys.argv[1])
ref, ref_tok = load(sys.argv[2])
ids = mx.array([ref_tok.encode(texts[0])])
a, b = ours(ids), ref(ids)
mx.eval(a, b)
print(json.dumps({
    "max_logit_diff": mx.abs(a.astype(mx.float32) - b.astype(mx.float32)).max().item(),
    "tokens_equal": all(ours_tok.encode(t) == ref_tok.encode(t) for t in texts),
    "ours": [ours_tok.encode(t) for t in texts],
    "reference": [ref_tok.encode(t) for t in texts],
}))
