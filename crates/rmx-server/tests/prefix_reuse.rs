//! The prefix cache as the APIs report it (#19): a conversation's next turn reuses what the
//! daemon read for the last one, and says so in each API's own field: OpenAI chat's
//! `usage.prompt_tokens_details.cached_tokens`, Responses' `input_tokens_details`, Anthropic's
//! `cache_read_input_tokens` (with `input_tokens` only the tokens read anew).

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, model_name, service};
use serde_json::{json, Value};

const FIRST: &str =
    "Tell me about the villages by the sea in the long winter, the nets and the geese.";

fn turn(answer: &str) -> Value {
    json!([
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": "And in spring?"},
    ])
}

#[tokio::test]
async fn a_next_turn_reports_the_reused_prefix_on_every_surface() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    let first = json!({"model": model_name(), "temperature": 0, "max_tokens": 8,
                       "messages": [{"role": "user", "content": FIRST}]});
    let (status, body) = call(&app, "/v1/chat/completions", first).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["usage"]["prompt_tokens_details"]["cached_tokens"], 0,
        "{body}"
    );
    let answer = body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let first_prompt = body["usage"]["prompt_tokens"]
        .as_u64()
        .expect("prompt_tokens");

    let next = json!({"model": model_name(), "temperature": 0, "max_tokens": 8,
                      "messages": turn(&answer)});
    let (status, body) = call(&app, "/v1/chat/completions", next).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    // At least the first user message's turn comes from the cache.
    assert!(
        cached >= first_prompt / 2,
        "cached {cached} of {first_prompt}: {body}"
    );
    assert!(
        cached < body["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
        "{body}"
    );

    let (status, body) = call(
        &app,
        "/v1/responses",
        json!({"model": model_name(), "temperature": 0, "max_output_tokens": 8,
               "input": turn(&answer)}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let cached = body["usage"]["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    assert!(cached >= first_prompt / 2, "{body}");

    let (status, body) = call(
        &app,
        "/v1/messages",
        json!({"model": model_name(), "temperature": 0, "max_tokens": 8, "messages": turn(&answer)}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let read = body["usage"]["cache_read_input_tokens"]
        .as_u64()
        .unwrap_or(0);
    let fresh = body["usage"]["input_tokens"].as_u64().unwrap_or(0);
    assert!(read >= first_prompt / 2, "{body}");
    assert!(fresh > 0, "the new message is read anew: {body}");
}
