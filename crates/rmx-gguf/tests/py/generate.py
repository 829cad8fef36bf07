"""Greedy generation with mlx-lm from converted model directories; prints one JSON string (the
generated text) per directory. Directories after the first must share its tokenizer files (the
same GGUF at another precision): their weights are loaded, the tokenizer only once.
Quantized models are slow on MLX's CPU backend, so the later directories can be given fewer
tokens (--later-max-tokens).
usage: generate.py PROMPT DIR [DIR...] [--chat] [--max-tokens N] [--later-max-tokens M]"""
import argparse
import json
from pathlib import Path

from mlx_lm import generate, load
from mlx_lm.utils import load_model

ap = argparse.ArgumentParser()
ap.add_argument("prompt")
ap.add_argument("models", nargs="+")
ap.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
ap.add_argument("--max-tokens", type=int, default=16)
ap.add_argument("--later-max-tokens", type=int, default=None)
a = ap.parse_args()

model, tokenizer = load(a.models[0])
prompt = a.prompt
if a.chat:
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
for i, path in enumerate(a.models):
    if i > 0:
        model, _ = load_model(Path(path))
    # mlx-lm's default sampler is greedy (temperature 0).
    n = a.max_tokens if i == 0 or a.later_max_tokens is None else a.later_max_tokens
    print(json.dumps(generate(model, tokenizer, prompt=prompt, max_tokens=n)))
