//! Issue #20, "Hostile chat templates": a model whose chat template loops for ever or grows
//! a string without end is answered with a 400 naming the model and the limit, within
//! seconds; the daemon answers other requests meanwhile and goes on serving models whose
//! templates are fine. Real TCP, raw HTTP/1.1, on copies of the tiny model.

mod common_api;

use std::time::{Duration, Instant};

use common_api::{model_name, raw_request, serve_service, service, with_template};
use serde_json::{json, Value};

fn chat(model: &str) -> String {
    json!({"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2})
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_20_a_hostile_chat_template_is_a_400_and_the_daemon_keeps_serving() {
    let home = tempfile::tempdir().expect("tempdir");
    let hostile = [
        (
            "loop",
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        ),
        (
            "doubling",
            "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        ),
    ];
    let models: Vec<String> = hostile
        .iter()
        .map(|(name, source)| {
            let dir = home.path().join(name);
            std::fs::create_dir_all(&dir).expect("mkdir");
            with_template(&dir, source).to_string_lossy().into_owned()
        })
        .collect();
    // Load the models first, so the clock below times the render and not the load.
    let served = serve_service(service(home.path()));
    let base = served.base.clone();
    for model in &models {
        let body = json!({"model": model, "keep_alive": "5m"}).to_string();
        let (status, body) = raw_request(&base, "POST", "/api/generate", &body).await;
        assert_eq!(status, 200, "{body}");
    }

    // Both at once: before the fix each held one of the server's two workers for good.
    let started = Instant::now();
    let calls: Vec<_> = models
        .iter()
        .map(|model| {
            let (base, body) = (base.clone(), chat(model));
            tokio::spawn(
                async move { raw_request(&base, "POST", "/v1/chat/completions", &body).await },
            )
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let version = tokio::time::timeout(
        Duration::from_secs(1),
        raw_request(&base, "GET", "/api/version", ""),
    )
    .await
    .expect("/api/version answers within 1 s while the templates render");
    assert_eq!(version.0, 200, "{}", version.1);

    for (call, model) in calls.into_iter().zip(&models) {
        let (status, body) = tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("the hostile template is refused within 10 s")
            .expect("request task");
        assert_eq!(status, 400, "{body}");
        let v: Value = serde_json::from_str(&body).expect("JSON error body");
        let e = &v["error"];
        assert_eq!(e["type"], "invalid_request_error", "{body}");
        assert_eq!(e["code"], "chat_template_limit_exceeded", "{body}");
        let message = e["message"].as_str().unwrap_or_default();
        assert!(message.contains(model.as_str()), "{body}");
        assert!(
            message.contains("chat template exceeded the limit"),
            "{body}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(10));

    let (status, body) =
        raw_request(&base, "POST", "/v1/chat/completions", &chat(&model_name())).await;
    assert_eq!(
        status, 200,
        "a model with a sound template still answers: {body}"
    );
}
