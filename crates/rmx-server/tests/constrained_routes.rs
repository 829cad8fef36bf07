//! Constrained decoding through every surface, on the tiny random model (whose free output is
//! random text, so only the constraint makes these answers parse): JSON mode, forced tool
//! calls, the 400 for tool-call formats that cannot be forced, and reasoning token counts.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, model_name, of_type, service, with_template};
use serde_json::{json, Value};

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
    ])
}

fn object(text: &str) -> serde_json::Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(m)) => m,
        other => panic!("not a JSON object: {text:?} ({other:?})"),
    }
}

#[tokio::test]
async fn json_mode_answers_parse_on_openai_and_ollama() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let messages = json!([{"role": "user", "content": "Describe a cat"}]);
    for (seed, format) in [
        (1, json!({"type": "json_object"})),
        (
            2,
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}),
        ),
    ] {
        let (status, body) = call(
            &app,
            "/v1/chat/completions",
            json!({"model": model_name(), "messages": messages, "response_format": format,
                   "temperature": 0.8, "seed": seed, "max_tokens": 60}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let choice = &body["choices"][0];
        object(choice["message"]["content"].as_str().expect("content"));
        assert_eq!(choice["finish_reason"], "stop", "{body}");
    }
    // A schema's properties and types are enforced too: the required ones, in the schema's
    // order, an optional one where the model writes it, nothing else.
    let schema = json!({"type": "object", "required": ["name", "age"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                       "pet": {"enum": ["cat", "dog"]}},
        "additionalProperties": false});
    let keys_ok = |o: &serde_json::Map<String, Value>| {
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        keys == ["name", "age"] || keys == ["name", "age", "pet"]
    };
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": model_name(), "messages": messages, "temperature": 0.8, "seed": 9,
               "max_tokens": 60,
               "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let o = object(
        body["choices"][0]["message"]["content"]
            .as_str()
            .expect("content"),
    );
    assert!(keys_ok(&o), "{body}");
    assert!(o["name"].is_string() && o["age"].as_f64().is_some_and(|a| a.fract() == 0.0));
    assert!(
        o.get("pet").is_none_or(|p| p == "cat" || p == "dog"),
        "{body}"
    );
    let (status, body) = call(
        &app,
        "/v1/responses",
        json!({"model": model_name(), "input": "a person", "temperature": 0.8, "max_output_tokens": 60,
               "text": {"format": {"type": "json_schema", "name": "p", "schema": schema}}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let text = body["output"]
        .as_array()
        .expect("output")
        .iter()
        .filter(|o| o["type"] == "message")
        .flat_map(|o| o["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|c| c["text"].as_str().map(str::to_string))
        .collect::<String>();
    assert!(keys_ok(&object(&text)), "{body}");
    // A schema that cannot be enforced is refused, with what is wrong, not answered loosely.
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": model_name(), "messages": messages, "max_tokens": 10,
               "response_format": {"type": "json_schema", "json_schema": {"name": "u",
                   "schema": {"type": "array", "uniqueItems": true}}}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or("");
    assert!(message.contains("uniqueItems"), "{body}");
    let (status, body) = call(
        &app,
        "/api/chat",
        json!({"model": model_name(), "messages": messages, "format": "json", "stream": false,
               "options": {"temperature": 0.8, "seed": 3, "num_predict": 60}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    object(body["message"]["content"].as_str().expect("content"));
    let (status, body) = call(
        &app,
        "/api/generate",
        json!({"model": model_name(), "prompt": "a cat", "format": {"type": "object"},
               "stream": false, "options": {"seed": 4, "num_predict": 60}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    object(body["response"].as_str().expect("response"));
    let (status, body) = call(
        &app,
        "/api/generate",
        json!({"model": model_name(), "prompt": "a cat", "format": "yaml", "stream": false}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"].as_str().unwrap_or("").contains("format"),
        "{body}"
    );
}

#[tokio::test]
async fn forced_tool_calls_come_back_as_calls_on_every_surface() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let messages = json!([{"role": "user", "content": "What time is it?"}]);
    for (seed, choice, names) in [
        (1, json!("required"), vec!["get_weather", "get_time"]),
        (
            2,
            json!({"type": "function", "function": {"name": "get_time"}}),
            vec!["get_time"],
        ),
    ] {
        let (status, body) = call(
            &app,
            "/v1/chat/completions",
            json!({"model": model_name(), "messages": messages, "tools": tools(),
                   "tool_choice": choice, "temperature": 0.8, "seed": seed, "max_tokens": 80}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let c = &body["choices"][0];
        assert_eq!(c["finish_reason"], "tool_calls", "{body}");
        let calls = c["message"]["tool_calls"].as_array().expect("tool_calls");
        assert_eq!(calls.len(), 1, "{body}");
        let name = calls[0]["function"]["name"].as_str().expect("name");
        assert!(names.contains(&name), "{body}");
        object(calls[0]["function"]["arguments"].as_str().expect("args"));
    }

    let anthropic_tools = json!([
        {"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
    ]);
    for choice in [
        json!({"type": "any"}),
        json!({"type": "tool", "name": "get_weather"}),
    ] {
        let (status, body) = call(
            &app,
            "/v1/messages",
            json!({"model": model_name(), "max_tokens": 80, "messages": messages,
                   "tools": anthropic_tools, "tool_choice": choice, "temperature": 0.8}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["stop_reason"], "tool_use", "{body}");
        let uses = of_type(&body["content"], "tool_use");
        assert_eq!(uses.len(), 1, "{body}");
        assert!(uses[0]["input"].is_object(), "{body}");
        if choice["type"] == "tool" {
            assert_eq!(uses[0]["name"], "get_weather", "{body}");
        }
    }

    let (status, body) = call(
        &app,
        "/v1/responses",
        json!({"model": model_name(), "input": "What time is it?", "max_output_tokens": 80,
               "tools": [{"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}],
               "tool_choice": "required", "temperature": 0.8}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let calls: Vec<&Value> = of_type(&body["output"], "function_call");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["name"], "get_time");
    object(calls[0]["arguments"].as_str().expect("arguments"));
}

#[tokio::test]
async fn forcing_a_call_in_a_format_that_cannot_be_forced_is_a_400() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let plain =
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
                 {% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
    let cases = [(
        with_template(
            home.path(),
            &format!("{plain}{{% if tools %}}[TOOL_CALLS]{{% endif %}}"),
        ),
        "mistral",
    )];
    for (dir, format) in cases {
        let model = dir.to_string_lossy().into_owned();
        let (status, body) = call(
            &app,
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "x"}],
                   "tools": tools(), "tool_choice": "required", "max_tokens": 5}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let message = body["error"]["message"].as_str().expect("message");
        assert!(
            message.contains("tool_choice") && message.contains(format),
            "{message}"
        );
        let (status, body) = call(
            &app,
            "/v1/messages",
            json!({"model": model, "max_tokens": 5, "messages": [{"role": "user", "content": "x"}],
                   "tools": [{"name": "f", "input_schema": {"type": "object"}}],
                   "tool_choice": {"type": "any"}}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(format),
            "{body}"
        );
        // Left to the model, the same request is answered.
        let (status, body) = call(
            &app,
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "x"}],
                   "tools": tools(), "tool_choice": "auto", "max_tokens": 5}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // A template with no tool-call markup at all: the family's format (Qwen3 writes Hermes
    // calls; config.json's model_type says so when no alias does) is forced instead.
    let dir = with_template(&home.path().join("plain"), plain);
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": dir.to_string_lossy(), "messages": [{"role": "user", "content": "x"}],
               "tools": tools(), "tool_choice": "required", "max_tokens": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let content = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("");
    assert!(content.starts_with("<tool_call>"), "{body}");
}

#[tokio::test]
async fn reasoning_tokens_are_counted_and_json_follows_the_thought() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    // A template that opens the thought in the prompt, as thinking models' templates can.
    let dir = with_template(
        home.path(),
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}\
         {% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}",
    );
    let model = dir.to_string_lossy().into_owned();
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": model, "messages": [{"role": "user", "content": "x"}],
               "response_format": {"type": "json_object"}, "temperature": 0.8, "seed": 5,
               "max_tokens": 40}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let message = &body["choices"][0]["message"];
    object(message["content"].as_str().expect("content").trim());
    assert!(
        !message["reasoning_content"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{body}"
    );
    let usage = &body["usage"];
    let reasoning = usage["completion_tokens_details"]["reasoning_tokens"]
        .as_u64()
        .expect("reasoning_tokens");
    let completion = usage["completion_tokens"].as_u64().expect("completion");
    assert!(reasoning > 0 && reasoning < completion, "{usage}");

    let (status, body) = call(
        &app,
        "/v1/responses",
        json!({"model": model, "input": "x", "max_output_tokens": 12, "temperature": 0.8}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let details = &body["usage"]["output_tokens_details"]["reasoning_tokens"];
    // The whole answer stayed inside the open thought: every token is reasoning.
    assert_eq!(details, &body["usage"]["output_tokens"], "{body}");
}

/// The text of a chat completion, or of a completion.
fn answer(body: &Value) -> &str {
    let c = &body["choices"][0];
    c["message"]["content"]
        .as_str()
        .or_else(|| c["text"].as_str())
        .unwrap_or_else(|| panic!("no text: {body}"))
}

#[tokio::test]
async fn structured_outputs_constrain_to_a_regex_a_choice_a_grammar_or_a_schema() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let messages = json!([{"role": "user", "content": "Pick one"}]);
    let chat = |so: Value, seed: u64| {
        json!({"model": model_name(), "messages": messages, "temperature": 1.0, "seed": seed,
               "max_tokens": 40, "structured_outputs": so})
    };
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        chat(json!({"regex": "[a-f]{3}-[0-9]{2}"}), 1),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let text = answer(&body);
    let b = text.as_bytes();
    assert!(
        b.len() == 6
            && b[..3].iter().all(|c| (b'a'..=b'f').contains(c))
            && b[3] == b'-'
            && b[4..].iter().all(u8::is_ascii_digit),
        "{body}"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");
    let choices = ["positive", "negative", "neutral"];
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        chat(json!({"choice": choices}), 2),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(choices.contains(&answer(&body)), "{body}");
    let lark = "start: \"[\" NUM (\", \" NUM)* \"]\"\nNUM: /[1-9][0-9]?/";
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        chat(json!({"grammar": lark}), 3),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let v: Value = serde_json::from_str(answer(&body)).expect("a JSON list of numbers");
    assert!(
        v.as_array().is_some_and(|a| a.iter().all(Value::is_u64)),
        "{body}"
    );
    // The schema may come as an object or as JSON text, as vLLM takes it.
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"], "additionalProperties": false});
    for so in [json!({"json": schema}), json!({"json": schema.to_string()})] {
        let (status, body) = call(&app, "/v1/chat/completions", chat(so, 4)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let o = object(answer(&body));
        assert!(o["ok"].is_boolean() && o.len() == 1, "{body}");
    }
    // `/v1/completions` takes it too.
    let (status, body) = call(
        &app,
        "/v1/completions",
        json!({"model": model_name(), "prompt": "The answer is", "max_tokens": 20, "seed": 5,
               "temperature": 1.0, "structured_outputs": {"choice": ["yes", "no"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(["yes", "no"].contains(&answer(&body)), "{body}");
}

#[tokio::test]
async fn bad_structured_outputs_are_a_400_naming_the_field_and_the_reason() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    for (so, says) in [
        (json!({"regex": "a", "choice": ["a"]}), "exactly one"),
        (json!({}), "exactly one"),
        (json!({"regex": "(unclosed"}), "unclosed"),
        (json!({"grammar": "start: missing_rule"}), "missing_rule"),
        (json!({"json": "{not json"}), "not JSON"),
        (
            json!({"json": {"type": "array", "uniqueItems": true}}),
            "uniqueItems",
        ),
    ] {
        let (status, body) = call(
            &app,
            "/v1/chat/completions",
            json!({"model": model_name(), "messages": [{"role": "user", "content": "x"}],
                   "max_tokens": 5, "structured_outputs": so}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{so}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{so}: {body}");
    }
}

#[tokio::test]
async fn strict_tools_under_auto_still_answer() {
    // Whether the random model calls a tool is up to it; the grammar that holds its calls to
    // the schemas (unit-tested in rmx-text) must not stop it from answering either way.
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "strict": true,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"], "additionalProperties": false}}}]);
    for seed in 0..3 {
        let (status, body) = call(
            &app,
            "/v1/chat/completions",
            json!({"model": model_name(), "messages": [{"role": "user", "content": "Weather?"}],
                   "tools": tools, "temperature": 1.0, "seed": seed, "max_tokens": 30}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let message = &body["choices"][0]["message"];
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let args = object(call["function"]["arguments"].as_str().expect("arguments"));
            assert!(args["city"].is_string() && args.len() == 1, "{body}");
        }
    }
}
