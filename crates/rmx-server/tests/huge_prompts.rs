//! Issue #20, "Huge bodies": a request just under the 32 MiB body limit whose text is far past
//! the model's context is refused with a 400 in its API's own shape that says the prompt is
//! longer than the context, on every surface that takes text (chat and raw prompts), without
//! tokenizing the whole text (33 s and 7 GB before the fix); and the daemon answers other
//! requests meanwhile. Real TCP, raw HTTP/1.1, on the tiny model (a 512-token context).

mod common_api;

use std::time::Duration;

use common_api::{model_name, raw_request, serve_service, service, CONTEXT};
use serde_json::{json, Value};

/// What each API says: its error message, checked to be in that API's shape.
fn message(path: &str, body: &str) -> String {
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
    let text = |v: &Value| v.as_str().map(str::to_string);
    let said = if path.starts_with("/api/") {
        text(&v["error"])
    } else if path == "/v1/messages" {
        assert_eq!(v["type"], "error", "{path}: {body}");
        assert_eq!(
            v["error"]["type"], "invalid_request_error",
            "{path}: {body}"
        );
        text(&v["error"]["message"])
    } else {
        assert_eq!(
            v["error"]["type"], "invalid_request_error",
            "{path}: {body}"
        );
        assert_eq!(
            v["error"]["code"], "context_length_exceeded",
            "{path}: {body}"
        );
        text(&v["error"]["message"])
    };
    said.unwrap_or_else(|| panic!("{path}: no message: {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_20_a_huge_prompt_is_refused_early_and_the_daemon_keeps_serving() {
    let home = tempfile::tempdir().expect("tempdir");
    let model = model_name();
    let served = serve_service(service(home.path()));
    let base = served.base.clone();
    let load = json!({"model": model, "keep_alive": "5m"}).to_string();
    let (status, body) = raw_request(&base, "POST", "/api/generate", &load).await;
    assert_eq!(status, 200, "{body}");

    // About 30 MiB of words: under the body limit, some 6M tokens.
    let text = "lorem ipsum dolor sit amet ".repeat(30 << 20 >> 5);
    let messages = json!([{"role": "user", "content": text}]);
    let bodies = [
        (
            "/v1/chat/completions",
            json!({"model": model, "messages": messages, "max_tokens": 2}),
        ),
        (
            "/v1/messages",
            json!({"model": model, "messages": messages, "max_tokens": 2}),
        ),
        (
            "/api/chat",
            json!({"model": model, "messages": messages, "stream": false}),
        ),
        (
            "/v1/completions",
            json!({"model": model, "prompt": text, "max_tokens": 2}),
        ),
        (
            "/api/generate",
            json!({"model": model, "prompt": text, "raw": true, "stream": false}),
        ),
    ];
    for (path, body) in bodies {
        let body = body.to_string();
        assert!(body.len() < 32 << 20, "{path}: {} bytes", body.len());
        let call = {
            let base = base.clone();
            tokio::spawn(async move { raw_request(&base, "POST", path, &body).await })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let version = tokio::time::timeout(
            Duration::from_secs(1),
            raw_request(&base, "GET", "/api/version", ""),
        )
        .await
        .unwrap_or_else(|_| panic!("/api/version answers within 1 s while {path} is read"));
        assert_eq!(version.0, 200, "{}", version.1);
        let (status, answer) = tokio::time::timeout(Duration::from_secs(60), call)
            .await
            .unwrap_or_else(|_| panic!("{path}: no answer within 60 s"))
            .expect("request task");
        assert_eq!(status, 400, "{path}: {}", &answer[..answer.len().min(500)]);
        let said = message(path, &answer);
        assert!(
            said.contains("longer than the model's context") && said.contains(&CONTEXT.to_string()),
            "{path}: {said}"
        );
    }

    // A prompt that fits is still answered.
    let chat = json!({"model": model, "messages": [{"role": "user", "content": "Hi"}],
                      "max_tokens": 2})
    .to_string();
    let (status, body) = raw_request(&base, "POST", "/v1/chat/completions", &chat).await;
    assert_eq!(status, 200, "{body}");
}
