"""The official `ollama` Python client against a running rmx daemon's native routes.

usage: ollama_client.py BASE_URL MODEL [ALIAS]

ALIAS: a user alias (`rmx alias add`) naming MODEL's folder, which `list()` must show.
"""
import json
import sys

import ollama

base, model = sys.argv[1], sys.argv[2]
alias = sys.argv[3] if len(sys.argv) > 3 else None
client = ollama.Client(host=base, timeout=120)
opts = {"temperature": 0, "num_predict": 8, "seed": 1}


def ok(name):
    print("ok", name, flush=True)


chat = client.chat(model=model, messages=[{"role": "user", "content": "Hello, who are you?"}], options=opts)
text = chat.message.content
assert text and chat.done, chat
streamed = "".join(p.message.content for p in client.chat(
    model=model, messages=[{"role": "user", "content": "Hello, who are you?"}], options=opts, stream=True))
assert streamed == text, (streamed, text)
ok("chat whole and stream")

gen = client.generate(model=model, prompt="Once upon a time", options=opts, raw=True)
assert gen.response and gen.done
gstream = "".join(p.response for p in client.generate(model=model, prompt="Once upon a time", options=opts,
                                                       raw=True, stream=True))
assert gstream == gen.response, (gstream, gen.response)
ok("generate whole and stream")

# format "json" and a schema are enforced as one JSON object (the random model writes none).
jopts = {"temperature": 0.8, "num_predict": 60, "seed": 2}
for fmt in ("json", {"type": "object", "properties": {"a": {"type": "string"}}}):
    r = client.chat(model=model, messages=[{"role": "user", "content": "A cat as JSON"}], format=fmt, options=jopts)
    assert isinstance(json.loads(r.message.content), dict), r.message
    g = client.generate(model=model, prompt="A cat as JSON", format=fmt, options=jopts, raw=True)
    assert isinstance(json.loads(g.response), dict), g.response
ok("format json enforced")

listed = client.list().models
if alias:
    # Issue #20: a model a user alias names (as `rmx import` registers one) is listed, with
    # Ollama's details.
    entry = next((m for m in listed if m.model == alias), None)
    assert entry is not None, listed
    assert entry.details and entry.details.family == "qwen3" and entry.details.parameter_size, entry
    assert entry.size and entry.modified_at, entry
ok("tags")
running = client.ps().models
assert [m.model for m in running], running
assert running[0].details and running[0].details.family == "qwen3", running
ok("ps")

# Issue #20: the client's ShowResponse requires `model_info`; its keys are GGUF's, from the
# model's config.json (tiny Qwen3: 512-token context, make_tiny_qwen3.py's shape).
shown = client.show(model)
info = shown.modelinfo
assert info is not None, shown
arch = info["general.architecture"]
assert arch == "qwen3", info
assert info[f"{arch}.context_length"] == 512, info
assert info["general.parameter_count"] > 0, info
for key in ("embedding_length", "block_count", "attention.head_count", "attention.head_count_kv"):
    assert isinstance(info[f"{arch}.{key}"], int) and info[f"{arch}.{key}"] > 0, (key, info)
d = shown.details
assert d.format == "safetensors" and d.family == "qwen3" and d.families == ["qwen3"], d
assert d.parameter_size and d.parameter_size[-1] in "KMB", d
assert d.quantization_level, d
assert {"completion", "chat"} <= set(shown.capabilities), shown.capabilities
assert shown.template and "<|im_start|>" in shown.template, shown.template
assert shown.modified_at is not None and shown.parameters == "num_ctx 512", shown
ok("show")

# Issue #20: over TCP a folder outside the daemon's model roots is a 404 in the same words as a
# path that does not exist, config.json or not (like ~/.docker).
import tempfile

answers = []
with tempfile.TemporaryDirectory() as outside:
    with open(f"{outside}/config.json", "w") as f:
        f.write('{"auths": {}}')
    for name in (outside, outside + "-missing"):
        try:
            client.show(name)
            raise AssertionError(f"{name} was shown")
        except ollama.ResponseError as e:
            assert e.status_code == 404, e
            answers.append(e.error.replace(name, "NAME"))
assert answers[0] == answers[1] and "config.json" not in answers[0], answers
ok("folders outside the model roots")
