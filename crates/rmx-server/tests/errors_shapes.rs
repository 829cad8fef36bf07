//! Every error of the OpenAI and Anthropic surfaces, in each API's own shape and status,
//! through the router without a socket. Bad input is never a 500.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, get, json, model_name, post, service};
use serde_json::{json, Value};
use tower::ServiceExt;

async fn call(req: axum::http::Request<axum::body::Body>) -> (StatusCode, Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let resp = app(service(dir.path()))
        .oneshot(req)
        .await
        .expect("response");
    json(resp).await
}

fn assert_openai(body: &Value) {
    let e = &body["error"];
    assert!(e["message"].is_string() && e["type"].is_string(), "{body}");
    assert!(
        e.get("param").is_some() && e.get("code").is_some(),
        "param and code are always present: {body}"
    );
}

fn assert_anthropic(body: &Value, kind: &str) {
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], kind, "{body}");
    assert!(body["error"]["message"].is_string(), "{body}");
}

#[tokio::test]
async fn openai_unknown_model_is_404_listing_what_exists() {
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"model": "nope", "messages": [{"role": "user", "content": "hi"}]}),
        ),
        ("/v1/completions", json!({"model": "nope", "prompt": "hi"})),
        ("/v1/responses", json!({"model": "nope", "input": "hi"})),
    ] {
        let (status, body) = call(post(path, body.to_string())).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {body}");
        assert_openai(&body);
        assert_eq!(body["error"]["code"], "model_not_found");
        let msg = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            msg.contains("nope") && msg.contains("no models are downloaded"),
            "{msg}"
        );
    }
    let (status, body) = call(get("/v1/models/nope")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_openai(&body);
}

#[tokio::test]
async fn openai_malformed_json_is_400() {
    let (status, body) = call(post("/v1/chat/completions", "{\"model\": ")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_openai(&body);
    assert_eq!(body["error"]["type"], "invalid_request_error");
}

#[tokio::test]
async fn openai_wrong_type_names_the_field() {
    let cases = [
        (
            json!({"model": "m", "messages": [{"role": "user", "content": 5}]}),
            "messages[0].content",
        ),
        (
            json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "m", "messages": [], "temperature": "hot"}),
            "temperature",
        ),
        (
            json!({"model": "m", "messages": [], "max_tokens": -1}),
            "max_tokens",
        ),
        (json!({"messages": []}), "model"),
    ];
    for (body, field) in cases {
        let (status, resp) = call(post("/v1/chat/completions", body.to_string())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {resp}");
        assert_openai(&resp);
        assert_eq!(resp["error"]["param"], field, "{body}: {resp}");
        assert!(
            resp["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(field)),
            "{resp}"
        );
    }
    let (status, resp) = call(post(
        "/v1/responses",
        json!({"model": "m", "input": 3}).to_string(),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{resp}");
    assert_eq!(resp["error"]["param"], "input");
}

#[tokio::test]
async fn openai_out_of_range_values_are_400_naming_the_param() {
    let (status, body) = call(post(
        "/v1/chat/completions",
        json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 7})
            .to_string(),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["param"], "top_p");
}

#[tokio::test]
async fn openai_oversized_body_is_413() {
    let big = format!(
        "{{\"model\": \"m\", \"messages\": [{{\"role\": \"user\", \"content\": \"{}\"}}]}}",
        "x".repeat(rmx_server::router::BODY_LIMIT + 1)
    );
    let (status, body) = call(post("/v1/chat/completions", big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_openai(&body);
}

#[tokio::test]
async fn anthropic_unknown_model_is_404() {
    let body =
        json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]});
    for path in ["/v1/messages", "/messages", "/v1/messages/count_tokens"] {
        let (status, resp) = call(post(path, body.to_string())).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {resp}");
        assert_anthropic(&resp, "not_found_error");
        assert!(resp["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("nope")));
    }
}

#[tokio::test]
async fn anthropic_malformed_and_wrong_types_are_400() {
    let (status, resp) = call(post("/v1/messages", "[1,")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_anthropic(&resp, "invalid_request_error");
    for (body, field) in [
        (json!({"model": "m", "messages": []}), "max_tokens"),
        (
            json!({"model": "m", "max_tokens": "many", "messages": []}),
            "max_tokens",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": [{"role": "robot", "content": "x"}]}),
            "messages[0].role",
        ),
        (
            json!({"model": "m", "max_tokens": 5, "messages": []}),
            "messages",
        ),
    ] {
        let (status, resp) = call(post("/v1/messages", body.to_string())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{resp}");
        assert_anthropic(&resp, "invalid_request_error");
        assert!(
            resp["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(field)),
            "{field}: {resp}"
        );
    }
}

#[tokio::test]
async fn anthropic_oversized_body_is_413() {
    let big = "x".repeat(rmx_server::router::BODY_LIMIT + 1);
    let (status, resp) = call(post("/v1/messages", big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_anthropic(&resp, "request_too_large");
}

/// Needs the tiny model (RMX_TEST_PYTHON): its context is 512 tokens.
#[tokio::test]
async fn prompt_longer_than_the_context_is_400_with_both_numbers() {
    let model = model_name();
    let long = "word ".repeat(2000);
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    let req =
        json!({"model": model, "messages": [{"role": "user", "content": long}], "max_tokens": 1});
    let resp = app
        .clone()
        .oneshot(post("/v1/chat/completions", req.to_string()))
        .await
        .expect("response");
    let (status, body) = json(resp).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_openai(&body);
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    let msg = body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let numbers: Vec<usize> = msg
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect();
    assert!(numbers.contains(&common_api::CONTEXT), "{msg}");
    assert!(
        numbers.iter().any(|&n| n > 2000),
        "the prompt's length: {msg}"
    );

    let req =
        json!({"model": model, "max_tokens": 1, "messages": [{"role": "user", "content": long}]});
    let resp = app
        .oneshot(post("/v1/messages", req.to_string()))
        .await
        .expect("response");
    let (status, body) = json(resp).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_anthropic(&body, "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("512")),
        "{body}"
    );
}

/// Issue #20: a path nothing serves was an empty 404; now it is JSON in the path's API shape
/// (OpenAI's for anything outside `/api/` and the Anthropic routes), naming the request.
#[tokio::test]
async fn issue_20_an_unknown_route_is_a_json_404_in_the_paths_shape() {
    let (status, body) = call(get("/v1/nothing")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_openai(&body);
    assert_eq!(body["error"]["code"], "unknown_route", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("GET /v1/nothing")),
        "{body}"
    );
    let (status, body) = call(post("/", "{}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_openai(&body);

    let (status, body) = call(post("/api/nothing", "{}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|m| m.contains("POST /api/nothing")),
        "Ollama's shape: {body}"
    );
}

/// Issue #20: a method a route does not take was an empty 405; now it is JSON in the path's
/// API shape naming the methods it takes, which the `Allow` header lists too.
#[tokio::test]
async fn issue_20_a_wrong_method_is_a_json_405_naming_the_allowed_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app = app(service(dir.path()));
    let send = |method: &str, path: &str| {
        axum::http::Request::builder()
            .method(method)
            .uri(path)
            .body(axum::body::Body::empty())
            .expect("request")
    };
    let cases = [
        ("GET", "/v1/chat/completions", "POST"),
        ("DELETE", "/v1/models", "GET"),
        ("GET", "/api/chat", "POST"),
        ("POST", "/api/delete", "DELETE"),
        ("GET", "/v1/messages", "POST"),
    ];
    for (method, path, allowed) in cases {
        let resp = app
            .clone()
            .oneshot(send(method, path))
            .await
            .expect("response");
        let allow = resp
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let (status, body) = json(resp).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(allow.contains(allowed), "{method} {path}: Allow {allow:?}");
        let message = if path.starts_with("/api/") {
            body["error"].as_str().map(str::to_string)
        } else if path.starts_with("/v1/messages") {
            assert_anthropic(&body, "invalid_request_error");
            body["error"]["message"].as_str().map(str::to_string)
        } else {
            assert_openai(&body);
            assert_eq!(body["error"]["code"], "method_not_allowed", "{body}");
            body["error"]["message"].as_str().map(str::to_string)
        }
        .unwrap_or_else(|| panic!("{method} {path}: no message in {body}"));
        assert!(
            message.contains(method) && message.contains(allowed),
            "{method} {path}: {message}"
        );
    }
}

/// Issue #20: Ollama's routes answered an oversized body in plain text.
#[tokio::test]
async fn issue_20_ollamas_413_is_json() {
    let big = "x".repeat(rmx_server::router::BODY_LIMIT + 1);
    for path in ["/api/chat", "/api/generate"] {
        let (status, body) = call(post(path, big.clone())).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{path}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|m| m.contains("larger than")),
            "{path}: {body}"
        );
    }
}

#[tokio::test]
async fn issue_20_ollama_refuses_unknown_roles_and_bad_images_instead_of_misreading_them() {
    let user = json!({"role": "user", "content": "hi"});
    for (path, body, names) in [
        (
            "/api/chat",
            json!({"model": "m", "messages": [user, {"role": "robot", "content": "x"}]}),
            "messages[1].role",
        ),
        (
            "/api/chat",
            json!({"model": "m", "messages": [{"role": "user", "content": "what is this?",
                                                "images": ["not base64!"]}]}),
            "messages[0].images[0]",
        ),
        (
            "/api/generate",
            json!({"model": "m", "prompt": "what is this?", "images": ["not base64!"]}),
            "images[0]",
        ),
    ] {
        let (status, body) = call(post(path, body.to_string())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let msg = body["error"].as_str().unwrap_or_default();
        assert!(msg.starts_with(names), "{path}: {body}");
    }
}
