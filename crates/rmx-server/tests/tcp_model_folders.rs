//! Issue #20, "Paths outside the store": over TCP a request may name a model folder by path
//! only when the user registered it (an alias, an import, the model store) or it lies under
//! the daemon's model roots (`RMX_MODEL_ROOTS`). Any other folder, one with a config.json (like
//! `~/.docker`) or without, or none at all, is the same 404 in the same words on every route,
//! so nothing tells them apart; and a 404 never lists folders other clients loaded. The Unix
//! socket (the user's own CLI) may name any folder. The router as the daemon serves it on each
//! listener: `listener::over_tcp` is the mark `daemon::serve` puts on its TCP port.

mod common_api;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use common_api::{app, call, get, json, linked_model, service_with_roots};
use rmx_server::listener::over_tcp;
use rmx_store::ModelHints;
use serde_json::{json, Value};
use tower::ServiceExt;

/// Every route that takes a model name, asked for `model`: (what, status, body with the name
/// replaced by `NAME`).
async fn ask_everywhere(app: &Router, model: &str) -> Vec<(String, StatusCode, String)> {
    let chat = json!({"model": model, "messages": [{"role": "user", "content": "Hi"}],
                      "max_tokens": 2, "stream": false});
    let mut out = Vec::new();
    for (path, body) in [
        ("/api/show", json!({ "model": model })),
        (
            "/api/generate",
            json!({ "model": model, "keep_alive": "5m" }),
        ),
        ("/api/chat", chat.clone()),
        ("/v1/chat/completions", chat.clone()),
        ("/v1/messages", chat.clone()),
        ("/api/embed", json!({ "model": model, "input": "Hi" })),
        ("/api/pull", json!({ "model": model, "stream": false })),
    ] {
        let (status, body) = call(app, path, body).await;
        out.push((
            path.to_string(),
            status,
            body.to_string().replace(model, "NAME"),
        ));
    }
    let delete = Request::delete("/api/delete")
        .header("content-type", "application/json")
        .body(Body::from(json!({ "model": model }).to_string()))
        .expect("request");
    let (status, body) = json(app.clone().oneshot(delete).await.expect("response")).await;
    out.push((
        "/api/delete".into(),
        status,
        body.to_string().replace(model, "NAME"),
    ));
    let id = model.replace('/', "%2F");
    let (status, body) = json(
        app.clone()
            .oneshot(get(&format!("/v1/models/{id}")))
            .await
            .expect("response"),
    )
    .await;
    out.push((
        "/v1/models/{id}".into(),
        status,
        body.to_string().replace(model, "NAME"),
    ));
    out
}

#[tokio::test]
async fn issue_20_over_tcp_only_registered_or_rooted_folders_are_served() {
    let home = tempfile::tempdir().expect("tempdir");
    let h = home.path();
    // Like ~/.docker: a config.json that is no model's, beside a secret.
    let secret = h.join("secret");
    std::fs::create_dir_all(&secret).expect("mkdir");
    std::fs::write(secret.join("config.json"), r#"{"auths": {}}"#).expect("write");
    std::fs::write(secret.join("token.txt"), "hunter2").expect("write");
    let plain = h.join("plain");
    std::fs::create_dir_all(&plain).expect("mkdir");
    let outside = linked_model(&h.join("outside/tiny"));
    let rooted = linked_model(&h.join("roots/models/tiny"));
    let aliased = linked_model(&h.join("aliased/tiny"));
    let svc = service_with_roots(h, vec![h.join("roots")]);
    svc.store()
        .add_alias(
            "mine",
            &aliased.display().to_string(),
            ModelHints::default(),
        )
        .expect("alias");
    let socket = app(svc.clone());
    let tcp = over_tcp(socket.clone());

    // A folder loaded through the socket is not named in anybody's 404.
    let (status, body) = call(
        &socket,
        "/api/generate",
        json!({"model": outside.display().to_string(), "keep_alive": "5m"}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the socket may name any folder: {body}"
    );

    let refused = [
        secret.display().to_string(),
        plain.display().to_string(),
        h.join("missing").display().to_string(),
        outside.display().to_string(),
        // Through a root and out of it again.
        format!("{}/roots/../outside/tiny", h.display()),
    ];
    let reference = ask_everywhere(&tcp, &refused[0]).await;
    for (path, status, body) in &reference {
        let want = if path == "/api/pull" {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::NOT_FOUND
        };
        assert_eq!(*status, want, "{path}: {body}");
        assert!(
            !body.contains("token.txt") && !body.contains("hunter2"),
            "{body}"
        );
        assert!(!body.contains("config.json"), "{path}: {body}");
        assert!(
            !body.contains(&outside.display().to_string()),
            "{path}: a 404 names a folder another client loaded: {body}"
        );
    }
    for name in &refused[1..] {
        assert_eq!(
            ask_everywhere(&tcp, name).await,
            reference,
            "`{name}` is answered unlike `{}`",
            refused[0]
        );
    }

    // Nor do the listings of loaded models name it.
    for path in ["/api/ps", "/v1/models", "/health"] {
        let (status, body) = json(tcp.clone().oneshot(get(path)).await.expect("response")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(
            !body.to_string().contains(&outside.display().to_string()),
            "{path} over TCP names a folder another client loaded: {body}"
        );
    }
    let (_, ps) = json(
        socket
            .clone()
            .oneshot(get("/api/ps"))
            .await
            .expect("response"),
    )
    .await;
    assert_eq!(
        ps["models"][0]["name"],
        outside.display().to_string(),
        "{ps}"
    );

    // Served over TCP: a folder under a root, an alias and the aliased folder by its path.
    for name in [
        rooted.display().to_string(),
        "mine".to_string(),
        aliased.display().to_string(),
    ] {
        let (status, body) = call(&tcp, "/api/show", json!({ "model": name })).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
        let chat = json!({"model": name, "messages": [{"role": "user", "content": "Hi"}],
                          "max_tokens": 2});
        let (status, body) = call(&tcp, "/v1/chat/completions", chat).await;
        assert_eq!(status, StatusCode::OK, "{name}: {body}");
    }
    // The socket shows any folder.
    let (status, body): (StatusCode, Value) = call(
        &socket,
        "/api/show",
        json!({"model": secret.display().to_string()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}
