"""Every response, chunk and event rmx sends, validated against the official SDKs' own types.

The SDKs build their objects leniently (`construct`), so a missing field or a wrong type only
surfaces when a user's code touches it. Here each raw JSON body and each server-sent event is
validated with pydantic in strict mode (no coercion: an int where a float belongs is fine, a
float where an int belongs is not; every required field present, every literal one of the
documented values) against the `openai` package's types (chat, completions, Responses,
models, errors) and the `anthropic` package's (messages, count_tokens, errors).

usage: strict_types.py BASE_URL MODEL SCRIPTED_MODEL
  MODEL: a tiny random model; SCRIPTED_MODEL: one that thinks, then calls get_weather (the
  Qwen3.5 tool-call form), so the reasoning and tool-call shapes are checked too.
Prints one line per check passed; exits non-zero at the first failure.
"""
import json
import sys
import typing

import httpx
from anthropic import types as at
from openai.types import Completion, Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.shared import ErrorObject
from anthropic._models import construct_type as anthropic_construct
from openai._models import construct_type as openai_construct
from pydantic import BaseModel, ValidationError

base, model, scripted = sys.argv[1], sys.argv[2], sys.argv[3]
http = httpx.Client(base_url=base, timeout=120)
PARAMS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                  "parameters": PARAMS}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather for a city",
                    "parameters": PARAMS}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather for a city", "input_schema": PARAMS}]
ASK = "What is the weather in Paris?"


FAILURES = []


def strict(cls, obj, where):
    """`obj` as `cls`, strictly. A failure is kept (naming the object and every wrong field)
    and the object is then read leniently, so one run reports every shape that is off."""
    try:
        return cls.model_validate(obj, strict=True)
    except ValidationError as e:
        FAILURES.append(f"{where}: not a strict {cls.__name__}:\n{e}\n--- the object:\n{json.dumps(obj)[:2000]}")
        # As the SDK itself reads an answer: nested objects typed, nothing checked.
        return cls.construct(**obj) if not cls.__module__.startswith(("openai", "anthropic")) \
            else (openai_construct if cls.__module__.startswith("openai") else anthropic_construct)(
                type_=cls, value=obj)


REPORTED = [0]


def ok(name):
    """A group of checks passed, if no object in it failed validation."""
    if len(FAILURES) == REPORTED[0]:
        print("ok", name, flush=True)
    REPORTED[0] = len(FAILURES)


def by_type(union):
    """The event classes of a discriminated union (the SDKs' own, not pydantic's), by `type`."""
    members = typing.get_args(typing.get_args(union)[0]) if typing.get_origin(union) is typing.Annotated \
        else typing.get_args(union)
    table = {}
    for cls in members:
        for literal in typing.get_args(cls.model_fields["type"].annotation):
            table[literal] = cls
    return table


RESPONSE_EVENTS = by_type(ResponseStreamEvent)
ANTHROPIC_EVENTS = by_type(at.RawMessageStreamEvent)


def post(path, body, headers=None):
    r = http.post(path, json=body, headers=headers or {})
    assert r.status_code == 200, (path, r.status_code, r.text)
    return r.json()


def sse(path, body, headers=None):
    """The events of a streamed answer: (event name or None, data) in order. An event is the
    lines up to a blank one; its fields may come in any order."""
    events, name, data = [], None, None
    with http.stream("POST", path, json=body, headers=headers or {}) as r:
        assert r.status_code == 200, (path, r.status_code, r.read())
        for line in list(r.iter_lines()) + [""]:
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data = line[5:].strip()
            elif not line and data is not None:
                events.append((name, data))
                name, data = None, None
    return events


def openai_chat(m, label, **extra):
    body = {"model": m, "messages": [{"role": "user", "content": ASK}], "max_tokens": 24, "temperature": 0,
            **extra}
    whole = strict(ChatCompletion, post("/v1/chat/completions", body), f"chat {label}")
    chunks = sse("/v1/chat/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert chunks[-1][1] == "[DONE]", chunks[-1]
    for i, (_, data) in enumerate(chunks[:-1]):
        strict(ChatCompletionChunk, json.loads(data), f"chat {label} chunk {i}")
    return whole


def openai_completion(label, **extra):
    body = {"model": model, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0, **extra}
    strict(Completion, post("/v1/completions", body), f"completion {label}")
    chunks = sse("/v1/completions", {**body, "stream": True, "stream_options": {"include_usage": True}})
    assert chunks[-1][1] == "[DONE]", chunks[-1]
    for i, (_, data) in enumerate(chunks[:-1]):
        obj = json.loads(data)
        # The SDK types a stream chunk as the whole Completion, whose finish_reason is never
        # null; OpenAI's own API sends null until the choice ends, as rmx does. Only that null
        # is let through, and only before the last chunk that has choices.
        for choice in obj["choices"]:
            if choice.get("finish_reason", "absent") is None and i < len(chunks) - 3:
                choice["finish_reason"] = "length"
        strict(Completion, obj, f"completion {label} chunk {i}")


def responses(m, label, **extra):
    body = {"model": m, "input": ASK, "max_output_tokens": 24, "temperature": 0, **extra}
    whole = strict(Response, post("/v1/responses", body), f"responses {label}")
    kinds = []
    for i, (name, data) in enumerate(sse("/v1/responses", {**body, "stream": True})):
        obj = json.loads(data)
        kind = obj.get("type")
        assert kind in RESPONSE_EVENTS, f"responses {label} event {i}: unknown type {kind!r}"
        assert name in (None, kind), f"responses {label} event {i}: `event: {name}` for a {kind}"
        strict(RESPONSE_EVENTS[kind], obj, f"responses {label} event {i} ({kind})")
        kinds.append(kind)
    assert kinds[0] == "response.created" and kinds[-1] in ("response.completed", "response.incomplete"), kinds
    return whole, kinds


def anthropic(m, label, **extra):
    headers = {"anthropic-version": "2023-06-01", "x-api-key": "unused"}
    body = {"model": m, "max_tokens": 48, "messages": [{"role": "user", "content": ASK}], **extra}
    whole = strict(at.Message, post("/v1/messages", body, headers), f"messages {label}")
    kinds = []
    for i, (name, data) in enumerate(sse("/v1/messages", {**body, "stream": True}, headers)):
        obj = json.loads(data)
        kind = obj.get("type")
        if kind == "ping":
            continue
        assert kind in ANTHROPIC_EVENTS, f"messages {label} event {i}: unknown type {kind!r}"
        assert name == kind, f"messages {label} event {i}: `event: {name}` for a {kind}"
        strict(ANTHROPIC_EVENTS[kind], obj, f"messages {label} event {i} ({kind})")
        kinds.append(kind)
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop", kinds
    return whole, kinds


# OpenAI chat: plain, with logprobs, with tools; the scripted model's thought and tool call.
openai_chat(model, "plain")
openai_chat(model, "logprobs", logprobs=True, top_logprobs=2)
openai_chat(model, "tools offered", tools=OPENAI_TOOLS, tool_choice="auto")
openai_chat(model, "json_object", response_format={"type": "json_object"})
# rmx's speculation: the guesses land in OpenAI's Predicted Outputs counts.
guessed = openai_chat(model, "speculating", speculative="prompt-lookup", draft_tokens=4)
assert guessed.usage.completion_tokens_details.rejected_prediction_tokens is not None, guessed.usage
called = openai_chat(scripted, "thought and tool call", tools=OPENAI_TOOLS)
assert called.choices[0].message.tool_calls, called
assert called.choices[0].finish_reason == "tool_calls", called
ok("chat and chunks")

openai_completion("plain")
openai_completion("logprobs", logprobs=2)
openai_completion("speculating", speculative="prompt-lookup", draft_tokens=4)
ok("completions and chunks")

responses(model, "plain")
whole, kinds = responses(scripted, "thought and tool call", tools=RESPONSES_TOOLS)
assert any(item.type == "function_call" for item in whole.output), whole.output
assert "response.function_call_arguments.done" in kinds, kinds
responses(model, "json_schema", text={"format": {"type": "json_schema", "name": "city",
                                                 "schema": PARAMS, "strict": True}})
ok("responses and events")

anthropic(model, "plain")
anthropic(model, "stop sequence", stop_sequences=["the"])
whole, kinds = anthropic(scripted, "thinking and tool use", tools=ANTHROPIC_TOOLS,
                         thinking={"type": "enabled", "budget_tokens": 1024}, max_tokens=2048)
assert [b.type for b in whole.content][-1] == "tool_use", whole.content
assert whole.stop_reason == "tool_use", whole
assert "thinking" in [b.type for b in whole.content], whole.content
counted = post("/v1/messages/count_tokens", {"model": model, "messages": [{"role": "user", "content": ASK}]},
               {"anthropic-version": "2023-06-01"})
strict(at.MessageTokensCount, counted, "count_tokens")
ok("messages, events, count_tokens")

listed = http.get("/v1/models").json()
assert listed["object"] == "list", listed
for i, m in enumerate(listed["data"]):
    strict(Model, m, f"models entry {i}")
strict(Model, http.get(f"/v1/models/{listed['data'][0]['id']}").json(), "models retrieve")
ok("models")


class OpenAiErrorBody(BaseModel):
    error: ErrorObject


for path, body in [("/v1/chat/completions", {"model": model}),
                   ("/v1/chat/completions", {"model": "no-such-model", "messages": [{"role": "user", "content": "x"}]}),
                   ("/v1/completions", {"model": model, "prompt": "x", "max_tokens": -1}),
                   ("/v1/responses", {"model": model, "input": "x", "text": {"format": {"type": "bogus"}}})]:
    r = http.post(path, json=body)
    assert 400 <= r.status_code < 500, (path, body, r.status_code, r.text)
    strict(OpenAiErrorBody, r.json(), f"{path} error {r.status_code}")
r = http.post("/v1/messages", json={"model": model, "messages": []}, headers={"anthropic-version": "2023-06-01"})
assert r.status_code == 400, (r.status_code, r.text)
strict(at.ErrorResponse, r.json(), "messages error")
ok("errors")

if FAILURES:
    raise SystemExit(f"{len(FAILURES)} objects failed strict validation:\n\n" + "\n\n".join(FAILURES))
