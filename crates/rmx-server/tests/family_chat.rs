//! The newer families end to end: tiny models whose weights make them answer fixed text under
//! their chat templates, through the OpenAI and Anthropic surfaces, whole and streamed. With
//! thinking on each reasons and calls `get_weather` in its own syntax; with thinking off (the
//! template's empty thought) it answers plainly.
//! - Qwen3.5 (#18; hybrid DeltaNet + gated attention, the vision-language layout) under the
//!   Qwen3 template: `<think>` and the Qwen3-Coder XML call Qwen3.5 writes.
//! - Gemma 4 (#18; gemma4_text) under a template in Gemma 4's manner (tiny_models.py): the
//!   `<|channel>thought ... <channel|>` channel and `<|tool_call>call:..{..}<tool_call|>`,
//!   whose markers are special tokens.

mod common_api;

use std::path::PathBuf;
use std::sync::OnceLock;

use axum::http::StatusCode;
use axum::Router;
use common_api::{
    anthropic_deltas, app, call, chat_stream, of_type, scripted_model, service, sse_named, stream,
};
use serde_json::{json, Value};

const THOUGHT: &str = "The user wants the weather.";
const ANSWER: &str = "Sunny in Paris!";

/// A scripted model and the arguments of the call it writes.
struct Case {
    model: String,
    args: Value,
}

/// After the generation prompt with thinking on (`assistant\n`): a thought and an XML tool
/// call; after the one with thinking off (`...</think>\n\n`): a plain answer.
fn qwen3_5() -> Case {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    let scripts = json!([
        ["assistant\n", format!("<think>{THOUGHT}</think><tool_call><function=get_weather><parameter=city>Paris</tool_call><|im_end|>")],
        ["</think>\n\n", format!("{ANSWER}<|im_end|>")],
    ]);
    Case {
        model: scripted_model(
            &MODEL,
            "qwen3_5-scripted-chat",
            "qwen3_5",
            &["--scripts", &scripts.to_string()],
        ),
        args: json!({"city": "Paris"}),
    }
}

/// The same for Gemma 4: after `model\n` a thought channel and a call; after the empty
/// thought (`<channel|>\n\n`) the answer. (`days :3`: a chain needs each token to have one
/// successor, and `:` already leads to `get`.)
fn gemma4() -> Case {
    static MODEL: OnceLock<PathBuf> = OnceLock::new();
    let scripts = json!([
        ["model\n", format!("<|channel>thought{THOUGHT}<channel|><|tool_call>call:get_weather{{days :3}}<tool_call|><end_of_turn>")],
        ["\n\n", format!("{ANSWER}<end_of_turn>")],
    ]);
    Case {
        model: scripted_model(
            &MODEL,
            "gemma4-scripted-chat",
            "gemma4_text",
            &["--scripts", &scripts.to_string()],
        ),
        args: json!({"days": 3}),
    }
}

fn messages() -> Value {
    json!([{"role": "user", "content": "What is the weather in Paris?"}])
}

fn parameters() -> Value {
    json!({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}})
}

fn openai_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
        "parameters": parameters()}}])
}

fn anthropic_tools() -> Value {
    json!([{"name": "get_weather", "description": "Weather for a city", "input_schema": parameters()}])
}

fn check_args(arguments: &str, want: &Value) {
    let args: Value = serde_json::from_str(arguments).expect("arguments are JSON");
    assert_eq!(&args, want);
}

async fn openai_thinking_on_reasons_and_calls_the_tool(app: &Router, case: &Case) {
    let req = json!({"model": case.model, "messages": messages(), "tools": openai_tools(),
                     "temperature": 0, "max_tokens": 60});
    let (status, body) = call(app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{body}");
    assert_eq!(choice["message"]["reasoning_content"], THOUGHT, "{body}");
    let content = choice["message"]["content"].as_str().unwrap_or("");
    assert!(!content.contains('<'), "markup in the content: {body}");
    let calls = choice["message"]["tool_calls"]
        .as_array()
        .expect("tool_calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let args = calls[0]["function"]["arguments"].as_str();
    check_args(args.expect("arguments"), &case.args);

    let sse = stream(app, "/v1/chat/completions", req).await;
    let streamed = chat_stream(&sse);
    assert_eq!(streamed.reasoning, THOUGHT, "{sse}");
    assert!(
        !streamed.content.contains('<'),
        "markup in the content: {sse}"
    );
    assert_eq!(streamed.names, "get_weather", "{sse}");
    check_args(&streamed.args, &case.args);
    assert_eq!(streamed.finish, "tool_calls", "{sse}");
}

async fn openai_thinking_off_answers_plainly(app: &Router, case: &Case) {
    let req = json!({"model": case.model, "messages": messages(), "temperature": 0, "max_tokens": 60,
                     "chat_template_kwargs": {"enable_thinking": false}});
    let (status, body) = call(app, "/v1/chat/completions", req.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let message = &body["choices"][0]["message"];
    assert_eq!(message["content"], ANSWER, "{body}");
    assert!(
        message["reasoning_content"]
            .as_str()
            .unwrap_or("")
            .is_empty(),
        "{body}"
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop", "{body}");

    let sse = stream(app, "/v1/chat/completions", req).await;
    assert_eq!(chat_stream(&sse).content, ANSWER, "{sse}");
}

async fn anthropic_thinking_on_and_off_and_a_tool_use(app: &Router, case: &Case) {
    let on = json!({"model": case.model, "max_tokens": 60, "temperature": 0, "messages": messages(),
                    "tools": anthropic_tools()});
    let (status, body) = call(app, "/v1/messages", on.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stop_reason"], "tool_use", "{body}");
    let thinking = of_type(&body["content"], "thinking");
    assert_eq!(thinking.len(), 1, "{body}");
    assert_eq!(thinking[0]["thinking"], THOUGHT, "{body}");
    let uses = of_type(&body["content"], "tool_use");
    assert_eq!(uses.len(), 1, "{body}");
    assert_eq!(uses[0]["name"], "get_weather");
    assert_eq!(uses[0]["input"], case.args);

    let sse = stream(app, "/v1/messages", on).await;
    let events = sse_named(&sse);
    assert_eq!(
        anthropic_deltas(&sse, "thinking_delta", "thinking"),
        THOUGHT,
        "{sse}"
    );
    let partial = anthropic_deltas(&sse, "input_json_delta", "partial_json");
    check_args(&partial, &case.args);
    assert!(
        events
            .iter()
            .any(|(name, data)| name == "content_block_start"
                && data["content_block"]["type"] == "tool_use"
                && data["content_block"]["name"] == "get_weather"),
        "{sse}"
    );

    let off = json!({"model": case.model, "max_tokens": 60, "temperature": 0, "messages": messages(),
                     "thinking": {"type": "disabled"}});
    let (status, body) = call(app, "/v1/messages", off.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stop_reason"], "end_turn", "{body}");
    assert!(of_type(&body["content"], "thinking").is_empty(), "{body}");
    let text = of_type(&body["content"], "text");
    assert_eq!(text.len(), 1, "{body}");
    assert_eq!(text[0]["text"], ANSWER, "{body}");

    let sse = stream(app, "/v1/messages", off).await;
    assert_eq!(
        anthropic_deltas(&sse, "text_delta", "text"),
        ANSWER,
        "{sse}"
    );
}

/// Every check on one family's model, on one service.
async fn family(case: Case) {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    openai_thinking_on_reasons_and_calls_the_tool(&app, &case).await;
    openai_thinking_off_answers_plainly(&app, &case).await;
    anthropic_thinking_on_and_off_and_a_tool_use(&app, &case).await;
}

#[tokio::test]
async fn qwen3_5_thinks_calls_tools_and_answers_on_openai_and_anthropic() {
    family(qwen3_5()).await;
}

#[tokio::test]
async fn gemma4_thinks_calls_tools_and_answers_on_openai_and_anthropic() {
    family(gemma4()).await;
}
