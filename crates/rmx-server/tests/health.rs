//! `GET /health`: 200 with the daemon's version, and the models it holds once one is loaded.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, get, json, model_name, post, service};
use serde_json::json;
use tower::ServiceExt;

#[tokio::test]
async fn health_answers_with_the_version_and_the_models_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let svc = service(dir.path());
    let (status, body) = json(
        app(svc.clone())
            .oneshot(get("/health"))
            .await
            .expect("health"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert_eq!(body["version"], rmx_api::VERSION);
    assert_eq!(body["models"], json!([]), "nothing loaded yet: {body}");

    let req = json!({"model": model_name(), "messages": [{"role": "user", "content": "Hi"}],
                     "max_tokens": 2});
    let (status, answer) = json(
        app(svc.clone())
            .oneshot(post("/v1/chat/completions", req.to_string()))
            .await
            .expect("chat"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");

    let (_, body) = json(app(svc).oneshot(get("/health")).await.expect("health")).await;
    let models = body["models"].as_array().expect("models");
    assert_eq!(models.len(), 1, "{body}");
    assert_eq!(models[0]["name"], model_name());
    assert_eq!(models[0]["state"], "loaded");
    assert_eq!(models[0]["active"], 0, "the answer is over: {body}");
}
