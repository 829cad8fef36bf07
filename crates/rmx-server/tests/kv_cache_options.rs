//! Issue #24: the quantized KV cache through Ollama's options (`kv_bits`, `kv_group_size`,
//! `kv_quant_start`, rmx's own): values MLX cannot store are a 400 that says what is allowed,
//! before the model loads; good ones answer.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, call, model_name, service};
use serde_json::{json, Value};

#[tokio::test]
async fn kv_options_out_of_range_are_400_naming_what_is_allowed() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let cases = [
        (json!({"kv_bits": 3}), "4 or 8"),
        (json!({"kv_bits": 16}), "4 or 8"),
        (json!({"kv_bits": 8, "kv_group_size": 48}), "32, 64 or 128"),
        (json!({"kv_bits": 4, "kv_quant_start": -1}), "0 or more"),
        (json!({"kv_group_size": 32}), "need kv_bits"),
    ];
    for (options, want) in cases {
        for (path, mut body) in [
            (
                "/api/chat",
                json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            ("/api/generate", json!({"model": "m", "prompt": "hi"})),
        ] {
            body["options"] = options.clone();
            body["stream"] = json!(false);
            let (status, body) = call(&app, path, body).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {options}: {body}");
            let msg = body["error"].as_str().unwrap_or_default();
            assert!(msg.contains(want), "{path} {options}: {body}");
        }
    }
}

/// Good values answer on a model whose heads (32 wide, the tiny Qwen3's) take groups of 32;
/// a model whose heads no group size divides (the API suites' tiny model: 16) fails with what
/// to do.
#[tokio::test]
async fn kv_bits_answer_through_the_native_routes() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let qwen3 = rmx_tests::models::tiny_qwen3()
        .to_string_lossy()
        .into_owned();
    let options = json!({"num_predict": 4, "kv_bits": 8, "kv_group_size": 32});
    let req = json!({"model": qwen3, "prompt": "hi", "stream": false, "raw": true,
                     "options": options});
    let (status, body): (StatusCode, Value) = call(&app, "/api/generate", req).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["done"], true, "{body}");
    assert!(body["eval_count"].as_u64().unwrap_or(0) >= 1, "{body}");

    let req = json!({"model": model_name(), "prompt": "hi", "stream": false, "raw": true,
                     "options": options});
    let (_, body): (StatusCode, Value) = call(&app, "/api/generate", req).await;
    let msg = body["error"].as_str().unwrap_or_default();
    assert!(msg.contains("without --kv-bits"), "{body}");
}
