//! The API key, CORS and rate-limit layers, through the router without a socket: each
//! rejection speaks the error shape of the API the path belongs to.

mod common_api;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common_api::{json, service};
use rmx_server::security::{check_listen_addr, protect, SecurityConfig, SecurityError};
use serde_json::json;
use tower::ServiceExt;

fn app(config: &SecurityConfig) -> (axum::Router, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    (
        protect(rmx_server::router(service(dir.path())), config),
        dir,
    )
}

fn keyed() -> SecurityConfig {
    SecurityConfig {
        api_key: Some("s3cret".into()),
        ..SecurityConfig::default()
    }
}

fn models(header: Option<(&str, &str)>) -> Request<Body> {
    let mut b = Request::get("/v1/models");
    if let Some((k, v)) = header {
        b = b.header(k, v);
    }
    b.body(Body::empty()).expect("request")
}

#[tokio::test]
async fn api_key_accepted_as_bearer_and_x_api_key() {
    let (app, _dir) = app(&keyed());
    for h in [("authorization", "Bearer s3cret"), ("x-api-key", "s3cret")] {
        let resp = app
            .clone()
            .oneshot(models(Some(h)))
            .await
            .expect("response");
        assert_eq!(resp.status(), StatusCode::OK, "{h:?}");
    }
}

#[tokio::test]
async fn missing_or_wrong_key_is_401_in_each_apis_shape() {
    let (app, _dir) = app(&keyed());
    let (status, body) = json(app.clone().oneshot(models(None)).await.expect("response")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["type"], "authentication_error", "{body}");
    let (status, _) = json(
        app.clone()
            .oneshot(models(Some(("authorization", "Bearer nope"))))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    let req = Request::post("/v1/messages")
        .header("x-api-key", "wrong")
        .body(Body::from(
            json!({"model": "m", "max_tokens": 1, "messages": []}).to_string(),
        ))
        .expect("request");
    let (status, body) = json(app.clone().oneshot(req).await.expect("response")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid API key"}})
    );

    let req = Request::get("/api/tags")
        .body(Body::empty())
        .expect("request");
    let (status, body) = json(app.oneshot(req).await.expect("response")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body["error"].is_string(), "Ollama's shape: {body}");
}

#[test]
fn non_loopback_address_needs_a_key() {
    let open = "0.0.0.0:8000".parse().expect("addr");
    assert_eq!(
        check_listen_addr(open, &SecurityConfig::default()),
        Err(SecurityError::KeyRequired { addr: open })
    );
    assert_eq!(check_listen_addr(open, &keyed()), Ok(()));
    assert_eq!(
        check_listen_addr(
            "127.0.0.1:8000".parse().expect("addr"),
            &SecurityConfig::default()
        ),
        Ok(())
    );
}

#[tokio::test]
async fn cors_allow_list() {
    let config = SecurityConfig {
        api_key: Some("k".into()),
        cors_origins: vec!["http://localhost:3000".into()],
        ..SecurityConfig::default()
    };
    let (app, _dir) = app(&config);
    let preflight = |origin: &str| {
        Request::options("/v1/chat/completions")
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .body(Body::empty())
            .expect("request")
    };
    // A preflight needs no key and gets the CORS headers.
    let resp = app
        .clone()
        .oneshot(preflight("http://localhost:3000"))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
    assert_eq!(
        resp.headers()["access-control-allow-headers"],
        "authorization, content-type"
    );
    let resp = app
        .clone()
        .oneshot(preflight("http://evil.example"))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(resp.headers().get("access-control-allow-origin").is_none());
    // Errors carry the header too, so the browser shows the real error.
    let req = Request::get("/v1/models")
        .header("origin", "http://localhost:3000")
        .body(Body::empty())
        .expect("request");
    let resp = app.oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        resp.headers()["access-control-allow-origin"],
        "http://localhost:3000"
    );
}

#[tokio::test]
async fn rate_limit_per_client_is_429_with_retry_after() {
    let config = SecurityConfig {
        rate_limit: Some(2),
        ..SecurityConfig::default()
    };
    let (app, _dir) = app(&config);
    for _ in 0..2 {
        let resp = app.clone().oneshot(models(None)).await.expect("response");
        assert_eq!(resp.status(), StatusCode::OK);
    }
    let resp = app.clone().oneshot(models(None)).await.expect("response");
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().get("retry-after").is_some());
    let (_, body) = json(resp).await;
    assert_eq!(body["error"]["type"], "rate_limit_error", "{body}");
    // Another client (by its key) has its own budget.
    let resp = app
        .oneshot(models(Some(("x-api-key", "other"))))
        .await
        .expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
}
