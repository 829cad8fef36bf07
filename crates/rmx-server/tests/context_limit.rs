//! Issue #20: a request's token limit never takes an answer past the model's context. A huge
//! limit (4,000,000,000 against the tiny model's 512-token context) and Ollama's "no limit"
//! `num_predict`s (-1 infinite, -2 fill the context) end where prompt + answer fill the
//! context, with each API's "length" finish. The engine stops only at the number it is given:
//! before the clamp, a huge `max_tokens` generated on past the context (the time bound below
//! turns that into a failure).

mod common_api;

use std::future::Future;
use std::time::Duration;

use axum::http::StatusCode;
use common_api::{app, call, chat_stream, model_name, service, sse_chunks, stream, CONTEXT};
use serde_json::{json, Value};

const HUGE: u64 = 4_000_000_000;

/// A prompt that leaves little room in the context, so that each answer is short.
fn long_text() -> String {
    "word ".repeat(440)
}

/// Fails the test rather than generating for hours when an answer runs past the context.
async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(300), f)
        .await
        .expect("the answer did not end at the context's length")
}

/// Prompt and answer fill the context exactly.
fn fills_context(prompt: &Value, answer: &Value, what: &str) {
    let (p, a) = (
        prompt.as_u64().expect("prompt tokens"),
        answer.as_u64().expect("answer tokens"),
    );
    assert!(
        p < CONTEXT as u64 - 8,
        "{what}: the prompt ({p}) leaves no room"
    );
    assert_eq!(p + a, CONTEXT as u64, "{what}: prompt {p} + answer {a}");
}

#[tokio::test]
async fn issue_20_a_limit_past_the_context_ends_at_it_on_every_surface() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let model = model_name();
    let messages = json!([{"role": "user", "content": long_text()}]);

    // OpenAI chat: `max_tokens` and `max_completion_tokens`, whole and streamed.
    for key in ["max_tokens", "max_completion_tokens"] {
        let mut req = json!({"model": model, "messages": messages, "temperature": 0});
        req[key] = json!(HUGE);
        let (status, body) = bounded(call(&app, "/v1/chat/completions", req.clone())).await;
        assert_eq!(status, StatusCode::OK, "{key}: {body}");
        assert_eq!(
            body["choices"][0]["finish_reason"], "length",
            "{key}: {body}"
        );
        let u = &body["usage"];
        fills_context(&u["prompt_tokens"], &u["completion_tokens"], key);

        req["stream_options"] = json!({"include_usage": true});
        let sse = bounded(stream(&app, "/v1/chat/completions", req)).await;
        assert_eq!(chat_stream(&sse).finish, "length", "{key} streamed: {sse}");
        let usage = sse_chunks(&sse)
            .into_iter()
            .find_map(|c| c.get("usage").filter(|u| !u.is_null()).cloned())
            .expect("a usage chunk");
        fills_context(&usage["prompt_tokens"], &usage["completion_tokens"], key);
    }

    // OpenAI completions and Responses.
    let req = json!({"model": model, "prompt": long_text(), "temperature": 0, "max_tokens": HUGE});
    let (status, body) = bounded(call(&app, "/v1/completions", req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "length", "{body}");
    let u = &body["usage"];
    fills_context(&u["prompt_tokens"], &u["completion_tokens"], "completions");

    let req = json!({"model": model, "input": long_text(), "temperature": 0,
                     "max_output_tokens": HUGE});
    let (status, body) = bounded(call(&app, "/v1/responses", req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "incomplete", "{body}");
    assert_eq!(body["incomplete_details"]["reason"], "max_output_tokens");
    let u = &body["usage"];
    fills_context(&u["input_tokens"], &u["output_tokens"], "responses");

    // Anthropic: its input_tokens leave out the cached ones.
    let req = json!({"model": model, "messages": messages, "temperature": 0, "max_tokens": HUGE});
    let (status, body) = bounded(call(&app, "/v1/messages", req)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["stop_reason"], "max_tokens", "{body}");
    let u = &body["usage"];
    let input = u["input_tokens"].as_u64().unwrap_or(0)
        + u["cache_read_input_tokens"].as_u64().unwrap_or(0);
    fills_context(&json!(input), &u["output_tokens"], "anthropic");

    // Ollama: a huge num_predict, -1 (infinite) and -2 (fill the context).
    for n in [json!(HUGE), json!(-1), json!(-2)] {
        let req = json!({"model": model, "messages": messages, "stream": false,
                         "options": {"temperature": 0, "num_predict": n}});
        let (status, body) = bounded(call(&app, "/api/chat", req)).await;
        assert_eq!(status, StatusCode::OK, "num_predict {n}: {body}");
        assert_eq!(body["done_reason"], "length", "num_predict {n}: {body}");
        let what = format!("num_predict {n}");
        fills_context(&body["prompt_eval_count"], &body["eval_count"], &what);
    }
}
