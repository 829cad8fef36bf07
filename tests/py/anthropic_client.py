"""The official `anthropic` SDK against a running rmx daemon.

usage: anthropic_client.py BASE_URL MODEL   (BASE_URL without /v1, as Claude Code takes it)
"""
import json
import sys

import anthropic
import httpx

base, model = sys.argv[1], sys.argv[2]
client = anthropic.Anthropic(base_url=base, api_key="unused", max_retries=0, timeout=120)
msgs = [{"role": "user", "content": "Hello, who are you?"}]
# This SDK has no `temperature` argument any more; the API still takes it.
greedy = dict(max_tokens=8, extra_body={"temperature": 0})


def ok(name):
    print("ok", name, flush=True)


whole = client.messages.create(model=model, messages=msgs, system="Be brief.", **greedy)
assert whole.type == "message" and whole.role == "assistant"
text = "".join(b.text for b in whole.content if b.type == "text")
assert text, whole
assert whole.stop_reason in ("end_turn", "max_tokens"), whole.stop_reason
assert whole.usage.output_tokens > 0
ok("messages whole")

# The raw event order.
events = list(client.messages.create(model=model, messages=msgs, system="Be brief.", stream=True, **greedy))
types = [e.type for e in events if e.type != "ping"]
assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"], types
body = types[1:-2]
i = 0
while i < len(body):
    assert body[i] == "content_block_start", types
    i += 1
    while body[i] == "content_block_delta":
        i += 1
    assert body[i] == "content_block_stop", types
    i += 1
streamed = "".join(e.delta.text for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta")
assert streamed == text, (streamed, text)
delta = [e for e in events if e.type == "message_delta"][0]
assert delta.delta.stop_reason == whole.stop_reason and delta.usage.output_tokens == whole.usage.output_tokens
ok("event order, stream equals whole")

# A stop sequence taken from inside the answer cuts it there and is named.
at = next(i for i in range(1, len(text) - 1)
          if text.find(text[i:i + 2]) == i and text[i:i + 2].strip())
stop = text[at:at + 2]
cut = client.messages.create(model=model, messages=msgs, system="Be brief.",
                             stop_sequences=["never in this answer", stop], **greedy)
assert "".join(b.text for b in cut.content if b.type == "text") == text[:at], (cut, stop)
assert (cut.stop_reason, cut.stop_sequence) == ("stop_sequence", stop), cut
with client.messages.stream(model=model, messages=msgs, system="Be brief.",
                            stop_sequences=[stop], **greedy) as s:
    final = s.get_final_message()
assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", stop), final
ok("stop_sequences")

# The SDK's stream helper accumulates the same message.
with client.messages.stream(model=model, messages=msgs, system="Be brief.", **greedy) as s:
    final = s.get_final_message()
assert "".join(b.text for b in final.content if b.type == "text") == text
ok("stream helper")

# Tools, tool_use / tool_result history, thinking blocks in the history.
tools = [{"name": "get_weather", "description": "Weather for a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
with_tools = client.messages.create(model=model, messages=msgs, tools=tools, **greedy)
assert with_tools.usage.input_tokens + with_tools.usage.cache_read_input_tokens > \
    whole.usage.input_tokens + whole.usage.cache_read_input_tokens + 20
client.messages.create(model=model, tools=tools, tool_choice={"type": "any"}, **greedy, messages=msgs + [
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should check.", "signature": ""},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}])
ok("tools accepted and rendered, tool history")

# tool_choice any / tool is enforced: the random model's reply is one tool_use block.
for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
    forced = client.messages.create(model=model, tools=tools, tool_choice=choice, messages=msgs,
                                    max_tokens=80, extra_body={"temperature": 0.8})
    uses = [b for b in forced.content if b.type == "tool_use"]
    assert forced.stop_reason == "tool_use" and len(uses) == 1, forced
    assert uses[0].name == "get_weather" and isinstance(uses[0].input, dict), uses[0]
ok("tool_choice any and tool enforced")

# count_tokens agrees with the usage of the same request.
count = client.messages.count_tokens(model=model, messages=msgs, system="Be brief.")
assert count.input_tokens == whole.usage.input_tokens + whole.usage.cache_read_input_tokens, (count, whole.usage)
ok("count_tokens")

# Without /v1 (some setups put /v1 in the base URL and the client adds only /messages).
r = httpx.post(base + "/messages", timeout=120,
               json=dict(model=model, messages=msgs, system="Be brief.", max_tokens=8, temperature=0))
assert r.status_code == 200 and r.json()["content"][0]["text"] == text, r.text
ok("/messages without /v1")

try:
    client.messages.create(model="no-such-model", messages=msgs, max_tokens=4)
    raise AssertionError("unknown model accepted")
except anthropic.NotFoundError as e:
    assert e.body["type"] == "error" and e.body["error"]["type"] == "not_found_error", e.body
try:
    client.messages.create(model=model, messages=[{"role": "user", "content": "word " * 2000}], max_tokens=1)
    raise AssertionError("prompt longer than the context accepted")
except anthropic.BadRequestError as e:
    assert "context" in e.body["error"]["message"], e.body
ok("errors")
print(json.dumps({"text": text}))
