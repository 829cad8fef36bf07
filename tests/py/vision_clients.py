"""The official `openai`, `anthropic` and `ollama` clients sending images to a running rmx daemon
(issue #27): an `image_url` data URI, a base64 image block, `images` on chat and generate.

usage: vision_clients.py BASE_URL VLM TEXT_MODEL

VLM takes images (the tiny Gemma 3 of tiny_vlm.py); TEXT_MODEL takes none. Each client gets a
greedy answer to the same question about one image; all four must agree (one user turn, rendered
alike), and another image must change it (the pixels reach the model). Prints `ok <check>` per
check.
"""
import base64
import os
import sys
import tempfile

import anthropic
import numpy as np
import ollama
import openai
from PIL import Image

base, vlm, text_model = sys.argv[1:4]
work = tempfile.mkdtemp(prefix="rmx-vision-clients-")
image, other = os.path.join(work, "noise.png"), os.path.join(work, "bands.png")
Image.fromarray(np.random.default_rng(7).integers(0, 256, (61, 45, 3), dtype=np.uint8)).save(image)
y, x = np.mgrid[0:20, 0:70]
Image.fromarray(np.stack([x * 3, y * 12, (x + y) * 5], -1).astype(np.uint8)).save(other)
QUESTION = "What is in this picture?"
MAX = 8


def ok(name):
    print("ok", name, flush=True)


def b64(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


oa = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)


def openai_answer(model, path):
    r = oa.chat.completions.create(
        model=model, temperature=0, max_tokens=MAX,
        messages=[{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(path)}},
            {"type": "text", "text": QUESTION}]}])
    return r.choices[0].message.content, r.usage.prompt_tokens


got, prompt_tokens = openai_answer(vlm, image)
assert got, got
changed, _ = openai_answer(vlm, other)
assert changed != got, "the answer does not depend on the image"
plain = oa.chat.completions.create(model=vlm, temperature=0, max_tokens=MAX,
                                   messages=[{"role": "user", "content": QUESTION}])
assert prompt_tokens >= plain.usage.prompt_tokens + 16, (prompt_tokens, plain.usage)
ok("openai image_url data URI")

an = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=120)
msg = an.messages.create(
    model=vlm, max_tokens=MAX, extra_body={"temperature": 0},
    messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(image)}},
        {"type": "text", "text": QUESTION}]}])
text = "".join(b.text for b in msg.content if b.type == "text")
assert text == got, (text, got)
ok("anthropic base64 image")

ol = ollama.Client(host=base, timeout=120)
opts = {"temperature": 0, "num_predict": MAX}
chat = ol.chat(model=vlm, options=opts,
               messages=[{"role": "user", "content": QUESTION, "images": [image]}])
assert chat.message.content == got, (chat.message.content, got)
gen = ol.generate(model=vlm, prompt=QUESTION, images=[image], options=opts)
assert gen.response == got, (gen.response, got)
ok("ollama images on chat and generate")

# Each client sees the refusal of an image for a text-only model as its own error, naming it.
try:
    openai_answer(text_model, image)
    raise AssertionError("openai: a text-only model took an image")
except openai.BadRequestError as e:
    assert "takes no images" in str(e) and text_model in str(e), e
try:
    an.messages.create(model=text_model, max_tokens=MAX, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(image)}}]}])
    raise AssertionError("anthropic: a text-only model took an image")
except anthropic.BadRequestError as e:
    assert "takes no images" in str(e), e
try:
    ol.chat(model=text_model, messages=[{"role": "user", "content": QUESTION, "images": [image]}])
    raise AssertionError("ollama: a text-only model took an image")
except ollama.ResponseError as e:
    assert e.status_code == 400 and "takes no images" in e.error, e
ok("errors")
