//! Issue #21: a model of a family the engine cannot load is the client's mistake, not the
//! daemon's: every surface answers a 400 in its own API's error shape, naming the family and
//! what loads, before anything is loaded (the folder here has no tokenizer, so a load would
//! have failed on that first), and the daemon goes on serving.

mod common_api;

use std::path::Path;

use axum::http::StatusCode;
use common_api::{app, call, get, json, model_name, service};
use serde_json::{json, Value};
use tower::ServiceExt;

/// A model folder of a family rmx does not load: a Gemma 3n config.json and a tiny (valid)
/// safetensors file.
fn gemma3n_folder(dir: &Path) -> String {
    let model = dir.join("tiny-gemma3n");
    std::fs::create_dir_all(&model).expect("mkdir");
    let config = json!({"architectures": ["Gemma3nForConditionalGeneration"],
                        "model_type": "gemma3n", "hidden_size": 8});
    std::fs::write(model.join("config.json"), config.to_string()).expect("write config");
    let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
    let mut weights = (header.len() as u64).to_le_bytes().to_vec();
    weights.extend_from_slice(header);
    weights.extend_from_slice(&[0; 8]);
    std::fs::write(model.join("model.safetensors"), weights).expect("write weights");
    model.to_string_lossy().into_owned()
}

/// The message names the model's family and the families that load.
fn names_the_family(message: &str) {
    assert!(
        message.contains("family `gemma3n` is not supported by this rmx; supported: ")
            && message.contains("llama")
            && message.contains("qwen3"),
        "{message}"
    );
}

#[tokio::test]
async fn issue_21_an_unsupported_family_is_a_400_in_each_apis_shape() {
    let home = tempfile::tempdir().expect("tempdir");
    let model = gemma3n_folder(home.path());
    let app = app(service(home.path()));
    let messages = json!([{"role": "user", "content": "hi"}]);

    // OpenAI: {"error": {"message", "type", "param", "code"}}, whole and streamed alike.
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": messages}),
        ),
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": messages, "stream": true}),
        ),
        ("/v1/completions", json!({"model": model, "prompt": "hi"})),
        ("/v1/responses", json!({"model": model, "input": "hi"})),
    ] {
        let (status, body) = call(&app, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let e = &body["error"];
        assert_eq!(e["type"], "invalid_request_error", "{body}");
        assert_eq!(e["param"], "model", "{body}");
        assert_eq!(e["code"], "model_not_supported", "{body}");
        names_the_family(e["message"].as_str().unwrap_or_default());
    }

    // Anthropic: {"type": "error", "error": {"type", "message"}}.
    for path in ["/v1/messages", "/v1/messages/count_tokens"] {
        let (status, body) = call(
            &app,
            path,
            json!({"model": model, "max_tokens": 5, "messages": messages}),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body["type"], "error", "{body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        names_the_family(body["error"]["message"].as_str().unwrap_or_default());
    }

    // Ollama: {"error": "..."}.
    for (path, body) in [
        (
            "/api/chat",
            json!({"model": model, "messages": messages, "stream": false}),
        ),
        (
            "/api/generate",
            json!({"model": model, "prompt": "hi", "stream": false}),
        ),
        ("/api/chat", json!({"model": model, "messages": messages})),
    ] {
        let (status, body) = call(&app, path, body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(body.as_object().map(|o| o.len()), Some(1), "{body}");
        names_the_family(body["error"].as_str().unwrap_or_default());
    }

    // Nothing was loaded or left half-admitted, and the daemon answers with a model it loads.
    let resp = app.clone().oneshot(get("/api/ps")).await.expect("ps");
    let (status, ps) = json(resp).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ps["models"], json!([]), "{ps}");
    let (status, body) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": model_name(), "messages": messages, "max_tokens": 3}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        body["choices"][0]["message"]["content"].is_string(),
        "{body}"
    );
    let (status, _) = call(
        &app,
        "/api/chat",
        json!({"model": model, "messages": messages, "stream": false}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "still refused, still serving"
    );
    let (status, body): (StatusCode, Value) =
        call(&app, "/api/show", json!({"model": model})).await;
    // What the model is stays readable, with why it cannot load.
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["info"]["cannot_load"]["family"], "gemma3n", "{body}");
}
