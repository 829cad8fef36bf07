//! Issue #20, "No Origin/Host checks": a page on any site could POST `text/plain` bodies to the
//! generation and pull routes (no preflight, so CORS never stopped them), and any `Host` was
//! served, so a DNS-rebound page could read every answer. Through `protect`, as `rmx serve`
//! wraps its TCP port.

mod common_api;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use common_api::{json, model_name};
use rmx_api::KeepAlive;
use rmx_server::security::{protect, SecurityConfig};
use rmx_server::{Service, ServiceConfig};
use rmx_store::{Store, StoreConfig};
use serde_json::{json, Value};
use tower::ServiceExt;

const EVIL: &str = "https://evil.example";

/// A hub that answers 404 to everything and counts the requests that reached it.
fn counting_hub() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the hub");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            counted.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    (url, hits)
}

/// The daemon's TCP app as `rmx serve` wraps it on 127.0.0.1:8000, its pulls going to `hub`.
fn app(home: &std::path::Path, hub: &str, cors_origins: &[&str]) -> Router {
    let store = Store::new(StoreConfig::new(home.join("hub"), home.join("rmx"), hub));
    let service = Service::new(ServiceConfig {
        store,
        default_keep_alive: KeepAlive::from_env(),
        max_loaded_models: 2,
        memory_budget: 8 << 30,
        model_roots: Default::default(),
        kv_quant: None,
        speculative: None,
        image_urls: None,
    });
    let config = SecurityConfig {
        cors_origins: cors_origins.iter().map(|s| s.to_string()).collect(),
        listen_addr: Some("127.0.0.1:8000".parse().expect("addr")),
        ..SecurityConfig::default()
    };
    protect(rmx_server::router(service), &config)
}

/// What a page's `fetch(url, {method: "POST", body})` sends without a preflight.
fn simple_post(path: &str, origin: Option<&str>, body: &Value) -> Request<Body> {
    let mut b = Request::post(path).header("content-type", "text/plain;charset=UTF-8");
    if let Some(o) = origin {
        b = b.header("origin", o);
    }
    b.body(Body::from(body.to_string())).expect("request")
}

fn bodies() -> [(&'static str, Value); 3] {
    let model = model_name();
    [
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}),
        ),
        (
            "/api/generate",
            json!({"model": model, "prompt": "Hi", "stream": false, "options": {"num_predict": 2}}),
        ),
        (
            "/api/pull",
            json!({"model": "someone/some-model", "stream": false}),
        ),
    ]
}

/// The error message, in OpenAI's shape or Ollama's.
fn message(body: &Value) -> &str {
    body["error"]["message"]
        .as_str()
        .or(body["error"].as_str())
        .unwrap_or_else(|| panic!("no error message: {body}"))
}

async fn refused_before_any_handler(app: &Router, hits: &AtomicUsize) {
    for (path, body) in bodies() {
        let resp = app
            .clone()
            .oneshot(simple_post(path, Some(EVIL), &body))
            .await
            .expect("response");
        assert!(resp.headers().get("access-control-allow-origin").is_none());
        let (status, body) = json(resp).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
        let m = message(&body);
        assert!(m.contains(EVIL) && m.contains("RMX_CORS_ORIGINS"), "{m}");
        if path.starts_with("/api/") {
            assert!(body["error"].is_string(), "Ollama's shape: {body}");
        } else {
            assert!(body["error"]["type"].is_string(), "OpenAI's shape: {body}");
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0, "the pull reached the hub");
}

async fn run_as_before(app: &Router, origin: Option<&str>, hits: &AtomicUsize) {
    let before = hits.load(Ordering::SeqCst);
    for (path, body) in bodies() {
        let resp = app
            .clone()
            .oneshot(simple_post(path, origin, &body))
            .await
            .expect("response");
        let (status, body) = json(resp).await;
        if path == "/api/pull" {
            // The fake hub has no such model: the handler ran and asked it.
            assert_ne!(status, StatusCode::FORBIDDEN, "{origin:?} {path}: {body}");
            assert!(hits.load(Ordering::SeqCst) > before, "{origin:?}: no pull");
        } else {
            assert_eq!(status, StatusCode::OK, "{origin:?} {path}: {body}");
        }
    }
}

#[tokio::test]
async fn issue_20_a_foreign_page_cannot_post_simple_requests() {
    let home = tempfile::tempdir().expect("tempdir");
    let (hub, hits) = counting_hub();
    let app = app(home.path(), &hub, &[]);
    refused_before_any_handler(&app, &hits).await;
    // Its preflight is refused the same way.
    let req = Request::options("/v1/chat/completions")
        .header("origin", EVIL)
        .header("access-control-request-method", "POST")
        .body(Body::empty())
        .expect("request");
    let (status, _) = json(app.oneshot(req).await.expect("response")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn issue_20_clients_and_local_pages_still_call() {
    let home = tempfile::tempdir().expect("tempdir");
    let (hub, hits) = counting_hub();
    let app = app(home.path(), &hub, &[]);
    run_as_before(&app, None, &hits).await;
    run_as_before(&app, Some("http://localhost:3000"), &hits).await;
}

/// With `RMX_CORS_ORIGINS` set, the preflight of a foreign page was refused but its simple POST
/// still ran.
#[tokio::test]
async fn issue_20_listed_origins_call_and_the_others_stay_out() {
    let home = tempfile::tempdir().expect("tempdir");
    let (hub, hits) = counting_hub();
    let listed = "https://app.example";
    let app = app(home.path(), &hub, &[listed]);
    refused_before_any_handler(&app, &hits).await;
    run_as_before(&app, Some(listed), &hits).await;

    let req = Request::options("/v1/chat/completions")
        .header("origin", listed)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .body(Body::empty())
        .expect("request");
    let resp = app.clone().oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(resp.headers()["access-control-allow-origin"], listed);
    // The preflighted request itself.
    let (path, body) = bodies()[0].clone();
    let req = Request::post(path)
        .header("origin", listed)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("request");
    let resp = app.oneshot(req).await.expect("response");
    assert_eq!(resp.headers()["access-control-allow-origin"], listed);
    let (status, body) = json(resp).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// Status and body of `GET /api/version` sent to `addr` with `host` as the Host header.
fn get_with_host(addr: SocketAddr, host: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "GET /api/version HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    let status = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status: {out}"));
    let body = out
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

#[test]
fn issue_20_foreign_host_names_are_refused_on_loopback() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(home.path(), "http://127.0.0.1:9", &[]);
    let url = common_api::serve(app);
    let addr: SocketAddr = url.trim_start_matches("http://").parse().expect("address");
    let port = addr.port();
    let (status, body) = get_with_host(addr, "evil.example");
    assert_eq!(status, 403, "{body}");
    let body: Value = serde_json::from_str(&body).expect("a JSON error");
    assert!(message(&body).contains("evil.example"), "{body}");
    assert_eq!(get_with_host(addr, &format!("evil.example:{port}")).0, 403);
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let (status, body) = get_with_host(addr, &host);
        assert_eq!(status, 200, "{host}: {body}");
    }
}

/// Bound to the network, clients reach the daemon under names it cannot know.
#[tokio::test]
async fn issue_20_any_host_is_served_on_the_network() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = SecurityConfig {
        listen_addr: Some("0.0.0.0:8000".parse().expect("addr")),
        ..SecurityConfig::default()
    };
    let app = protect(
        rmx_server::router(common_api::service(home.path())),
        &config,
    );
    let req = Request::get("/api/version")
        .header("host", "gpu-box.example:8000")
        .body(Body::empty())
        .expect("request");
    let resp = app.oneshot(req).await.expect("response");
    assert_eq!(resp.status(), StatusCode::OK);
}
