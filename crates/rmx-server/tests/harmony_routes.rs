//! GPT-OSS's harmony output through every surface, on tiny `gpt_oss` models whose weights make
//! them write a fixed reply (tiny_models.py `--script`): a harmony tool call
//! (`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}
//! <|call|>`) comes back as a structured call on the OpenAI chat (whole and streamed),
//! Responses, Anthropic and Ollama routes, and an `analysis` message as reasoning, with no
//! harmony markup left in the content.

mod common_api;

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::http::StatusCode;
use common_api::{
    anthropic_deltas, app, call, chat_stream, of_type, scripted_model, service, sse_named, stream,
};
use serde_json::{json, Value};

const CALL: &str = "<|channel|>commentary to=functions.get_weather <|constrain|>json\
                    <|message|>{\"city\": \"Paris\"}<|call|>";
const THOUGHT: &str =
    "<|channel|>analysis<|message|>The user asks about Paris weather.<|end|><|return|>";

/// The GPT-OSS model scripted to write the tool call, built once per test binary run.
fn model() -> String {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    scripted_model(
        &MODEL,
        "harmony-gpt-oss-tool-call",
        "gpt_oss",
        &["--script", CALL],
    )
}

/// The GPT-OSS model scripted to write only an analysis message.
fn thinking_model() -> String {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    scripted_model(
        &MODEL,
        "harmony-gpt-oss-analysis",
        "gpt_oss",
        &["--script", THOUGHT],
    )
}

fn tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

fn messages() -> Value {
    json!([{"role": "user", "content": "What is the weather in Paris?"}])
}

fn paris(arguments: &str) {
    let args: Value = serde_json::from_str(arguments).expect("arguments are JSON");
    assert_eq!(args, json!({"city": "Paris"}));
}

#[tokio::test]
async fn a_harmony_tool_call_is_a_call_on_openai_chat_whole_and_streamed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let req = json!({"model": model(), "messages": messages(), "tools": tools(),
                     "temperature": 0, "max_tokens": 40});
    let (status, body) = call(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    let content = choice["message"]["content"].as_str().unwrap_or("");
    assert!(!content.contains("<|"), "markup in the content: {body}");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    paris(
        calls[0]["function"]["arguments"]
            .as_str()
            .expect("arguments"),
    );

    let sse = stream(&app, "/v1/chat/completions", req).await;
    let streamed = chat_stream(&sse);
    assert_eq!(streamed.names, "get_weather", "{sse}");
    paris(&streamed.args);
    assert!(
        !streamed.content.contains("<|"),
        "markup in the content: {sse}"
    );
    assert_eq!(streamed.finish, "tool_calls", "{sse}");
}

#[tokio::test]
async fn a_harmony_tool_call_is_a_call_on_responses_anthropic_and_ollama() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());

    let (status, body) = call(
        &app,
        "/v1/responses",
        json!({"model": model(), "input": "What is the weather in Paris?", "temperature": 0,
               "max_output_tokens": 40,
               "tools": [{"type": "function", "name": "get_weather",
                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let calls: Vec<&Value> = of_type(&body["output"], "function_call");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["name"], "get_weather");
    paris(calls[0]["arguments"].as_str().expect("arguments"));

    let anthropic = json!({"model": model(), "max_tokens": 40, "temperature": 0,
        "messages": messages(),
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]});
    let (status, body) = call(&app, "/v1/messages", anthropic.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stop_reason"], "tool_use", "{body}");
    let uses: Vec<&Value> = of_type(&body["content"], "tool_use");
    assert_eq!(uses.len(), 1, "{body}");
    assert_eq!(uses[0]["name"], "get_weather");
    assert_eq!(uses[0]["input"], json!({"city": "Paris"}));

    let sse = stream(&app, "/v1/messages", anthropic).await;
    let events = sse_named(&sse);
    let tool_block = events.iter().any(|(name, data)| {
        name == "content_block_start"
            && data["content_block"]["type"] == "tool_use"
            && data["content_block"]["name"] == "get_weather"
    });
    assert!(tool_block, "{sse}");
    let partial = anthropic_deltas(&sse, "input_json_delta", "partial_json");
    paris(&partial);

    let (status, body) = call(
        &app,
        "/api/chat",
        json!({"model": model(), "messages": messages(), "tools": tools(), "stream": false,
               "options": {"temperature": 0, "num_predict": 40}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let calls = body["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(calls[0]["function"]["arguments"], json!({"city": "Paris"}));
    assert!(!body["message"]["content"]
        .as_str()
        .unwrap_or("")
        .contains("<|"));
}

#[tokio::test]
async fn a_harmony_analysis_message_is_reasoning_on_openai_and_anthropic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let app = app(svc.clone());
    let thought = "The user asks about Paris weather.";

    let req = json!({"model": thinking_model(), "messages": messages(), "temperature": 0,
                     "max_tokens": 40});
    let (status, body) = call(&app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let message = &body["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], thought, "{body}");
    assert!(
        !message["content"].as_str().unwrap_or("").contains("<|"),
        "{body}"
    );
    assert!(
        body["usage"]["completion_tokens_details"]["reasoning_tokens"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{body}"
    );

    let sse = stream(&app, "/v1/chat/completions", req).await;
    assert_eq!(chat_stream(&sse).reasoning, thought, "{sse}");

    let anthropic = json!({"model": thinking_model(), "max_tokens": 40, "temperature": 0,
                           "messages": messages()});
    let (status, body) = call(&app, "/v1/messages", anthropic.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let thinking: Vec<&Value> = of_type(&body["content"], "thinking");
    assert_eq!(thinking.len(), 1, "{body}");
    assert_eq!(thinking[0]["thinking"], thought, "{body}");

    let sse = stream(&app, "/v1/messages", anthropic).await;
    let streamed_thought = anthropic_deltas(&sse, "thinking_delta", "thinking");
    assert_eq!(streamed_thought, thought, "{sse}");
}
