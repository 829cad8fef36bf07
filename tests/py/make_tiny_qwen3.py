"""Writes a tiny random Qwen3 in MLX format with the real Qwen3 tokenizer and chat template.

usage: make_tiny_qwen3.py OUT_DIR [CONTEXT]

The output rows of the special tokens are zeroed so the random model does not stop at once
on EOS (DESIGN.md, "Facts for parity tests"): the API tests want several tokens of text.
"""
import json
import os
import shutil
import sys

import mlx.core as mx
from mlx.utils import tree_flatten
from mlx_lm.models import qwen3

out = sys.argv[1]
context = int(sys.argv[2]) if len(sys.argv) > 2 else 512
tok = os.path.join(os.environ["RMX_TEST_FIXTURES"], "npm", "tokenizer-qwen3", "models")
os.makedirs(out, exist_ok=True)
tokenizer = json.load(open(os.path.join(tok, "tokenizer.json")))
first_special = len(tokenizer["model"]["vocab"])
vocab = first_special + 293
cfg = dict(
    model_type="qwen3", hidden_size=64, num_hidden_layers=2, intermediate_size=128,
    num_attention_heads=4, num_key_value_heads=2, head_dim=16, rms_norm_eps=1e-6,
    vocab_size=vocab, max_position_embeddings=context, tie_word_embeddings=False,
    rope_theta=1e6, architectures=["Qwen3ForCausalLM"],
)
mx.random.seed(0)
model = qwen3.Model(qwen3.ModelArgs(**{k: v for k, v in cfg.items() if k != "architectures"}))
weights = {}
for k, v in tree_flatten(model.parameters()):
    if k.endswith("norm.weight"):
        weights[k] = mx.ones(v.shape, mx.float32)
    else:
        weights[k] = mx.random.normal(v.shape) * 0.08
head = weights["lm_head.weight"]
mask = (mx.arange(head.shape[0]) < first_special).astype(mx.float32)[:, None]
weights["lm_head.weight"] = head * mask
mx.save_safetensors(os.path.join(out, "model.safetensors"), weights, metadata={"format": "mlx"})
json.dump(cfg, open(os.path.join(out, "config.json"), "w"))
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(tok, f), out)
print(json.dumps({"dir": out, "vocab": vocab, "context": context}))
