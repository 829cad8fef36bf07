//! HTTP for the suites: requests through a `Router` without a socket (`oneshot`), the router
//! on a real TCP port, and the SSE streams of the OpenAI and Anthropic surfaces taken apart.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use serde_json::Value;

pub fn post(path: &str, body: impl Into<Body>) -> Request<Body> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(body.into())
        .expect("request")
}

pub fn get(path: &str) -> Request<Body> {
    Request::get(path).body(Body::empty()).expect("request")
}

/// Status and JSON body of a response (panics with the text when it is not JSON).
pub async fn json(resp: axum::response::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, value)
}

/// POSTs `body` as JSON to `path` on `app`: the status and JSON body.
pub async fn call(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    use tower::ServiceExt;
    json(
        app.clone()
            .oneshot(post(path, body.to_string()))
            .await
            .expect("response"),
    )
    .await
}

/// POSTs `body` with `"stream": true` to `path` on `app`; requires a 200 and returns the SSE text.
pub async fn stream(app: &Router, path: &str, mut body: Value) -> String {
    use tower::ServiceExt;
    body["stream"] = Value::Bool(true);
    let resp = app
        .clone()
        .oneshot(post(path, body.to_string()))
        .await
        .expect("response");
    let (status, sse) = text(resp).await;
    assert_eq!(status, StatusCode::OK, "{sse}");
    sse
}

/// The JSON chunks of an OpenAI SSE body (`data: {...}` events; the closing `[DONE]` left out).
pub fn sse_chunks(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|ev| ev.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).expect("chunk"))
        .collect()
}

/// What an OpenAI chat stream carried, its deltas joined: reasoning, content, the tool calls'
/// names and arguments, and the last finish reason.
#[derive(Debug, Default)]
pub struct ChatStream {
    pub reasoning: String,
    pub content: String,
    pub names: String,
    pub args: String,
    pub finish: Value,
}

pub fn chat_stream(body: &str) -> ChatStream {
    let mut out = ChatStream::default();
    for c in sse_chunks(body) {
        let delta = &c["choices"][0]["delta"];
        out.reasoning
            .push_str(delta["reasoning_content"].as_str().unwrap_or(""));
        out.content
            .push_str(delta["content"].as_str().unwrap_or(""));
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            out.names
                .push_str(tc["function"]["name"].as_str().unwrap_or(""));
            out.args
                .push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
        }
        if !c["choices"][0]["finish_reason"].is_null() {
            out.finish = c["choices"][0]["finish_reason"].clone();
        }
    }
    out
}

/// An Anthropic stream's `content_block_delta`s of delta type `kind`, their `field` joined
/// (`thinking_delta`/`thinking`, `text_delta`/`text`, `input_json_delta`/`partial_json`).
pub fn anthropic_deltas(body: &str, kind: &str, field: &str) -> String {
    sse_named(body)
        .iter()
        .filter(|(name, data)| name == "content_block_delta" && data["delta"]["type"] == kind)
        .filter_map(|(_, data)| data["delta"][field].as_str().map(String::from))
        .collect()
}

/// The items of the array `list` whose `type` is `kind` (Responses output, Anthropic content).
pub fn of_type<'a>(list: &'a Value, kind: &str) -> Vec<&'a Value> {
    list.as_array()
        .expect("an array")
        .iter()
        .filter(|b| b["type"] == kind)
        .collect()
}

pub async fn text(resp: axum::response::Response) -> (StatusCode, String) {
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// The router served on a real TCP port on loopback, on its own runtime thread; returns the
/// base URL (`http://127.0.0.1:PORT`). The server lives until the process ends.
pub fn serve(app: Router) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            let _ = tx.send(format!("http://{addr}"));
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            axum::serve(listener, app).await.expect("serve");
        });
    });
    rx.recv().expect("server address")
}

/// The `(event name, JSON data)` pairs of a named-event SSE body (Anthropic's stream, OpenAI's
/// Responses stream).
pub fn sse_named(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter_map(|ev| {
            let name = ev.lines().find_map(|l| l.strip_prefix("event: "))?;
            let data = ev.lines().find_map(|l| l.strip_prefix("data: "))?;
            Some((name.to_string(), serde_json::from_str(data).ok()?))
        })
        .collect()
}

/// (status, body) of one HTTP/1.1 request written by hand on a fresh connection to `base`
/// ([`serve`]'s URL): for requests a client library would refuse or buffer (tens of MiB, odd
/// methods), and to time one request while others are in flight.
pub async fn raw_request(base: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.expect("write");
    s.write_all(body.as_bytes()).await.expect("write");
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}
