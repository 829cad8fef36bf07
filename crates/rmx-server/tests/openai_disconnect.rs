//! A client that hangs up cancels its generation, streamed (OpenAI chat) or whole (Anthropic
//! messages): the model stops being "in use" long before the answer would have ended. Real
//! TCP, raw HTTP/1.1, on the tiny model.

mod common_api;

use std::time::{Duration, Instant};

use common_api::{model_name, serve_service, service};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn send(base: &str, method: &str, path: &str, body: &str) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.expect("write");
    s
}

async fn whole(base: &str, method: &str, path: &str, body: &str) -> String {
    let mut s = send(base, method, path, body).await;
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.expect("read");
    let text = String::from_utf8_lossy(&out).into_owned();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

async fn in_use(base: &str) -> bool {
    let body = whole(base, "GET", "/api/ps", "").await;
    let v: Value = serde_json::from_str(body.trim()).unwrap_or(Value::Null);
    v["models"]
        .as_array()
        // A request holds the model, or its engine still holds a sequence.
        .is_some_and(|m| {
            m.iter()
                .any(|m| m["until"] == "in use" || m["running"].as_u64().unwrap_or(0) > 0)
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_cancels_the_generation() {
    let home = tempfile::tempdir().expect("tempdir");
    let served = serve_service(service(home.path()));
    let base = served.base.clone();
    let req = |stream: bool| {
        json!({"model": model_name(), "messages": [{"role": "user", "content": "Hi"}],
               "temperature": 0, "max_tokens": 480, "stream": stream})
        .to_string()
    };
    // How long the whole answer takes here, now (the machine may be busy).
    let started = Instant::now();
    let full = whole(&base, "POST", "/v1/chat/completions", &req(false)).await;
    let t_full = started.elapsed();
    assert!(full.contains("\"completion_tokens\":480"), "{full}");

    let mut s = send(&base, "POST", "/v1/chat/completions", &req(true)).await;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&seen).contains("\"content\":\"") || seen.len() < 2000 {
        let n = s.read(&mut buf).await.expect("read");
        assert!(
            n > 0,
            "stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    assert!(
        in_use(&base).await,
        "the model is busy while the answer streams"
    );
    drop(s);
    let hung_up = Instant::now();
    while in_use(&base).await {
        assert!(
            hung_up.elapsed() < t_full / 2,
            "still generating {:?} after the client left (a whole answer takes {t_full:?})",
            hung_up.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_up_on_a_whole_answer_cancels_it_too() {
    let home = tempfile::tempdir().expect("tempdir");
    let served = serve_service(service(home.path()));
    let base = served.base.clone();
    let body = json!({"model": model_name(), "max_tokens": 480, "temperature": 0,
                      "messages": [{"role": "user", "content": "Hi"}]})
    .to_string();
    let started = Instant::now();
    let full = whole(&base, "POST", "/v1/messages", &body).await;
    let t_full = started.elapsed();
    assert!(full.contains("\"output_tokens\":480"), "{full}");

    let s = send(&base, "POST", "/v1/messages", &body).await;
    let waiting = Instant::now();
    while !in_use(&base).await {
        assert!(waiting.elapsed() < t_full, "the answer never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(s);
    let hung_up = Instant::now();
    while in_use(&base).await {
        assert!(
            hung_up.elapsed() < t_full / 2,
            "still generating {:?} after the client left (a whole answer takes {t_full:?})",
            hung_up.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
