//! Issue #20: sampling values the model cannot use are refused with a 400 in each API's
//! shape, naming the field, on every route: a repetition penalty of 0 or below (NaN
//! logprobs), and on Ollama's routes the ranges the OpenAI routes already held (temperature
//! 1e308 and top_p 2 used to be taken there). A `top_k` of 2^31 or more keeps every token
//! instead of reaching MLX as a negative k (a 500).

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, model_name, service};
use serde_json::{json, Value};

fn message(body: &Value) -> &str {
    body["error"]["message"]
        .as_str()
        .or_else(|| body["error"].as_str())
        .unwrap_or_default()
}

#[tokio::test]
async fn issue_20_a_repetition_penalty_of_zero_or_less_is_400() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    for penalty in [0.0, -1.5] {
        for (path, mut body) in [
            (
                "/v1/chat/completions",
                json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            ("/v1/completions", json!({"model": "m", "prompt": "hi"})),
        ] {
            body["repetition_penalty"] = json!(penalty);
            let (status, body) = call(&app, path, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {penalty}: {body}");
            assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
            assert_eq!(body["error"]["param"], "repetition_penalty", "{body}");
            assert!(message(&body).contains("greater than 0"), "{body}");
        }
    }
}

#[tokio::test]
async fn issue_20_ollama_options_are_held_to_the_same_ranges() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let cases = [
        ("temperature", json!(1e308)),
        ("temperature", json!(-1)),
        ("top_p", json!(2)),
        ("min_p", json!(1.5)),
        ("repeat_penalty", json!(0)),
        ("repeat_penalty", json!(-1)),
        ("presence_penalty", json!(3)),
    ];
    for (field, value) in cases {
        for (path, mut body) in [
            (
                "/api/chat",
                json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            ("/api/generate", json!({"model": "m", "prompt": "hi"})),
        ] {
            body["options"] = json!({ field: value });
            let (status, body) = call(&app, path, body).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{path} {field}={value}: {body}"
            );
            // Ollama's shape: {"error": "..."}.
            let m = body["error"].as_str().unwrap_or_default();
            assert!(m.contains(&format!("`{field}`")), "{path}: {body}");
        }
    }
}

/// Needs the tiny model: the answer is sampled with every token kept.
#[tokio::test]
async fn issue_20_a_top_k_past_i32_keeps_every_token() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let model = model_name();
    let messages = json!([{"role": "user", "content": "hi"}]);
    for top_k in [1u64 << 31, u64::from(u32::MAX)] {
        let req = json!({"model": model, "messages": messages, "max_tokens": 3,
                         "temperature": 1, "seed": 1, "top_k": top_k});
        let (status, body) = call(&app, "/v1/chat/completions", req).await;
        assert_eq!(status, StatusCode::OK, "openai top_k {top_k}: {body}");

        let req = json!({"model": model, "messages": messages, "max_tokens": 3,
                         "temperature": 1, "top_k": top_k});
        let (status, body) = call(&app, "/v1/messages", req).await;
        assert_eq!(status, StatusCode::OK, "anthropic top_k {top_k}: {body}");

        let req = json!({"model": model, "messages": messages, "stream": false,
                         "options": {"num_predict": 3, "temperature": 1, "top_k": top_k}});
        let (status, body) = call(&app, "/api/chat", req).await;
        assert_eq!(status, StatusCode::OK, "ollama top_k {top_k}: {body}");
    }
}
