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
    // A template with no tool-call markup at all.
    let dir = with_template(&home.path().join("plain"), plain);
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": dir.to_string_lossy(), "messages": [{"role": "user", "content": "x"}],
               "tools": tools(), "tool_choice": "required", "max_tokens": 5}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("no tool-call format"),
        "{body}"
    );
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
