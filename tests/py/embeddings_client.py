"""The official `openai` and `ollama` clients' embedding calls against a running rmx daemon.

usage: embeddings_client.py BASE_URL EMBEDDING_MODEL CHAT_MODEL   (BASE_URL without /v1)
Prints one line per check passed; exits non-zero at the first failure.
"""
import base64
import math
import struct
import sys

import ollama
import openai

base, model, chat_model = sys.argv[1], sys.argv[2], sys.argv[3]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
native = ollama.Client(host=base, timeout=120)
texts = ["The cat sat on the mat.", "Vectors for retrieval", "a third, shorter one"]


def ok(name):
    print("ok", name, flush=True)


def f32(v):
    """JSON floats read back as the f32 values they were printed from (the shortest decimal of
    an f32 read as a double is not always that f32's value)."""
    return list(struct.unpack(f"<{len(v)}f", struct.pack(f"<{len(v)}f", *v)))


def norm(v):
    return math.sqrt(sum(x * x for x in v))


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))


# The SDK asks for base64 unless told otherwise, and decodes it to floats itself.
default = client.embeddings.create(model=model, input=texts)
assert default.object == "list" and default.model == model, default
assert [d.index for d in default.data] == [0, 1, 2], default.data
assert all(d.object == "embedding" for d in default.data)
assert default.usage.prompt_tokens > 0 and default.usage.total_tokens == default.usage.prompt_tokens
vectors = [d.embedding for d in default.data]
assert all(isinstance(x, float) for x in vectors[0]), type(vectors[0][0])
assert all(abs(norm(v) - 1) < 1e-4 for v in vectors), [norm(v) for v in vectors]
ok("embeddings default (base64 decoded by the SDK)")

floats = client.embeddings.create(model=model, input=texts, encoding_format="float")
assert [f32(d.embedding) for d in floats.data] == vectors, "float and base64 give the same f32s"
raw = client.embeddings.create(model=model, input=texts[0], encoding_format="base64")
blob = base64.b64decode(raw.data[0].embedding)
assert list(struct.unpack(f"<{len(blob) // 4}f", blob)) == vectors[0]
ok("embeddings float and explicit base64 equal")

one = client.embeddings.create(model=model, input=texts[1], encoding_format="float")
assert cosine(one.data[0].embedding, vectors[1]) > 0.9999
cut = client.embeddings.create(model=model, input=texts[1], dimensions=8, encoding_format="float")
assert len(cut.data[0].embedding) == 8 and abs(norm(cut.data[0].embedding) - 1) < 1e-5
ok("embeddings one input, dimensions")

try:
    client.embeddings.create(model=chat_model, input="hello")
    raise AssertionError("a chat model made embeddings")
except openai.BadRequestError as e:
    assert "does not make embeddings" in e.message, e.message
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi"}])
    raise AssertionError("an embedding model chatted")
except openai.BadRequestError as e:
    assert "embedding model" in e.message, e.message
ok("embeddings errors")

# Ollama: /api/embed answers unit vectors; the older /api/embeddings the model's own.
embed = native.embed(model=model, input=texts)
assert embed.model == model and len(embed.embeddings) == 3, embed
for a, b in zip(embed.embeddings, vectors):
    assert cosine(a, b) > 0.9999
assert embed.prompt_eval_count == default.usage.prompt_tokens, (embed.prompt_eval_count, default.usage)
single = native.embed(model=model, input=texts[0], truncate=True, dimensions=8, keep_alive="1m")
assert len(single.embeddings) == 1 and len(single.embeddings[0]) == 8
legacy = native.embeddings(model=model, prompt=texts[2])
assert cosine(legacy.embedding, vectors[2]) > 0.9999
try:
    native.embed(model=chat_model, input="hello")
    raise AssertionError("a chat model made embeddings")
except ollama.ResponseError as e:
    assert e.status_code == 400 and "does not make embeddings" in e.error, (e.status_code, e.error)
ok("ollama embed and embeddings")
