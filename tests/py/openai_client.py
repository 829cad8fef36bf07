"""The official `openai` SDK against a running rmx daemon.

usage: openai_client.py BASE_URL MODEL   (BASE_URL without /v1)
Prints one line per check passed; exits non-zero at the first failure.
"""
import json
import sys

import openai

base, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
msgs = [{"role": "user", "content": "Hello, who are you?"}]
greedy = dict(temperature=0, seed=1, max_tokens=8)


def ok(name):
    print("ok", name, flush=True)


# Chat, whole.
whole = client.chat.completions.create(model=model, messages=msgs, **greedy)
text = whole.choices[0].message.content
assert whole.object == "chat.completion", whole
assert text, "empty answer from the tiny model"
assert whole.choices[0].finish_reason in ("stop", "length"), whole.choices[0].finish_reason
assert whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens > 0, whole.usage
assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
assert whole.usage.prompt_tokens_details is not None and whole.usage.prompt_tokens_details.cached_tokens >= 0
ok("chat whole")

# Chat, streamed, with the usage chunk: the same text at temperature 0.
chunks = list(client.chat.completions.create(
    model=model, messages=msgs, stream=True, stream_options={"include_usage": True}, **greedy))
streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert streamed == text, (streamed, text)
assert chunks[0].choices[0].delta.role == "assistant"
finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
assert finishes == [whole.choices[0].finish_reason], finishes
assert chunks[-1].choices == [] and chunks[-1].usage is not None, chunks[-1]
assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
assert all(c.usage is None for c in chunks[:-1])
ok("chat stream equals whole, usage chunk")

# Tools: accepted and rendered (the prompt grows by the tool definitions).
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}]
with_tools = client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice="auto", **greedy)
assert with_tools.usage.prompt_tokens > whole.usage.prompt_tokens + 20, (with_tools.usage, whole.usage)
assert with_tools.choices[0].finish_reason in ("stop", "length", "tool_calls")
history = msgs + [
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
]
client.chat.completions.create(model=model, messages=history, tools=tools, tool_choice="required", **greedy)
client.chat.completions.create(model=model, messages=history, tools=tools,
                               tool_choice={"type": "function", "function": {"name": "get_time"}}, **greedy)
ok("tools accepted and rendered, tool history")

# Constrained decoding: the tiny model's free output is random text, so only an enforced
# constraint makes these parse.
for seed, fmt in ((1, {"type": "json_object"}),
                  (2, {"type": "json_schema", "json_schema": {"name": "cat", "schema": {"type": "object"}}})):
    r = client.chat.completions.create(model=model, messages=msgs, response_format=fmt, temperature=0.8,
                                       seed=seed, max_tokens=60)
    assert isinstance(json.loads(r.choices[0].message.content), dict), r.choices[0].message
    assert r.choices[0].finish_reason == "stop", r.choices[0]
schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                                          "unit": {"enum": ["C", "F"]}}, "required": ["city", "days", "unit"]}
r = client.chat.completions.create(model=model, messages=msgs, temperature=0.8, seed=6, max_tokens=60,
                                   response_format={"type": "json_schema",
                                                    "json_schema": {"name": "forecast", "schema": schema}})
obj = json.loads(r.choices[0].message.content)
assert list(obj) == ["city", "days", "unit"], obj
assert isinstance(obj["city"], str) and isinstance(obj["days"], int) and obj["unit"] in ("C", "F"), obj
ok("response_format json_object enforced")

for seed, choice, allowed in ((3, "required", {"get_weather", "get_time"}),
                              (4, {"type": "function", "function": {"name": "get_time"}}, {"get_time"})):
    r = client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice=choice,
                                       temperature=0.8, seed=seed, max_tokens=80)
    c = r.choices[0]
    assert c.finish_reason == "tool_calls", c
    assert len(c.message.tool_calls) == 1, c.message
    assert c.message.tool_calls[0].function.name in allowed, c.message
    assert isinstance(json.loads(c.message.tool_calls[0].function.arguments), dict), c.message
    assert r.usage.completion_tokens_details is not None, r.usage
    # Streamed, the same constraint: the call arrives in deltas that add up to JSON arguments.
    chunks = list(client.chat.completions.create(model=model, messages=msgs, tools=tools, tool_choice=choice,
                                                 temperature=0.8, seed=seed, max_tokens=80, stream=True))
    deltas = [tc for ch in chunks if ch.choices for tc in (ch.choices[0].delta.tool_calls or [])]
    name = "".join(d.function.name or "" for d in deltas if d.function)
    args = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert name in allowed and isinstance(json.loads(args), dict), (name, args)
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason] == ["tool_calls"]
ok("tool_choice required and named enforced")

# Logprobs.
lp = client.chat.completions.create(model=model, messages=msgs, logprobs=True, top_logprobs=2, **greedy)
content = lp.choices[0].logprobs.content
assert len(content) == lp.usage.completion_tokens, (len(content), lp.usage)
assert all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content)
ok("logprobs")

# response_format, stop, penalties, max_completion_tokens, reasoning_content on input.
client.chat.completions.create(
    model=model, temperature=0, max_completion_tokens=4, stop=["\n\n"], presence_penalty=0.5, frequency_penalty=0.5,
    response_format={"type": "json_object"},
    messages=[{"role": "system", "content": "json"},
              {"role": "user", "content": [{"type": "text", "text": "hi"}]},
              {"role": "assistant", "content": "x", "reasoning_content": "thought"},
              {"role": "user", "content": "again"}],
    extra_body={"chat_template_kwargs": {"enable_thinking": False}})
ok("response_format, stop, penalties, chat_template_kwargs")

# Completions, whole and streamed.
comp = client.completions.create(model=model, prompt="Once upon a time", max_tokens=8, temperature=0)
ctext = comp.choices[0].text
assert ctext and comp.usage.completion_tokens > 0
cstream = "".join(c.choices[0].text for c in client.completions.create(
    model=model, prompt="Once upon a time", max_tokens=8, temperature=0, stream=True) if c.choices)
assert cstream == ctext, (cstream, ctext)
ok("completions stream equals whole")

# Models.
ids = [m.id for m in client.models.list().data]
assert model in ids, (model, ids)
assert client.models.retrieve(model).id == model
ok("models list and retrieve")

# Responses API, whole and streamed; the same prompt as the chat above gives the same text.
resp = client.responses.create(model=model, input="Hello, who are you?", temperature=0, max_output_tokens=8)
assert resp.status in ("completed", "incomplete"), resp.status
assert resp.output_text == text, (resp.output_text, text)
assert resp.usage.input_tokens == whole.usage.prompt_tokens and resp.usage.output_tokens > 0
events = list(client.responses.create(model=model, input="Hello, who are you?", temperature=0,
                                      max_output_tokens=8, stream=True))
types = [e.type for e in events]
assert types[0] == "response.created" and types[1] == "response.in_progress", types
assert types[-1] in ("response.completed", "response.incomplete"), types
assert "response.output_item.added" in types and "response.output_item.done" in types, types
deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
assert deltas == text, (deltas, text)
assert events[-1].response.usage.output_tokens == resp.usage.output_tokens
ok("responses whole and stream")

# Codex-style request: instructions, developer message, function tools, tool history.
client.responses.create(
    model=model, instructions="You are a coding agent.", max_output_tokens=4, temperature=0, store=False,
    tools=[{"type": "function", "name": "shell", "description": "run a command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "array", "items": {"type": "string"}}}}}],
    input=[{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "cwd: /tmp"}]},
           {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list files"}]},
           {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\": [\"ls\"]}"},
           {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}])
ok("responses with codex-style items and tools")

# Errors in OpenAI's shape.
try:
    client.chat.completions.create(model="no-such-model", messages=msgs)
    raise AssertionError("unknown model accepted")
except openai.NotFoundError as e:
    assert e.status_code == 404 and e.body["code"] == "model_not_found", e.body
try:
    client.chat.completions.create(model=model, messages=msgs, temperature=5)
    raise AssertionError("temperature 5 accepted")
except openai.BadRequestError as e:
    assert e.body["param"] == "temperature", e.body
try:
    client.chat.completions.create(model=model, messages=[{"role": "user", "content": "word " * 2000}], max_tokens=1)
    raise AssertionError("prompt longer than the context accepted")
except openai.BadRequestError as e:
    assert e.body["code"] == "context_length_exceeded", e.body
ok("errors")
print(json.dumps({"text": text}))
