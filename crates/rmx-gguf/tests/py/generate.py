"""Greedy generation with mlx-lm from a converted model directory; prints the text.
usage: generate.py DIR PROMPT [--chat] [--max-tokens N]"""
import argparse

from mlx_lm import generate, load

ap = argparse.ArgumentParser()
ap.add_argument("model")
ap.add_argument("prompt")
ap.add_argument("--chat", action="store_true", help="wrap the prompt in the model's chat template")
ap.add_argument("--max-tokens", type=int, default=20)
a = ap.parse_args()

model, tokenizer = load(a.model)
prompt = a.prompt
if a.chat:
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=False)
# mlx-lm's default sampler is greedy (temperature 0).
print(generate(model, tokenizer, prompt=prompt, max_tokens=a.max_tokens))
