//! Issue #20: `GET /metrics` in the OpenMetrics text Prometheus scrapes: requests by route and
//! status, prompt and generated tokens, time to first token and decode time, the sequences
//! running and waiting, the loaded models and memory; counted through the real router.

mod common_api;

use std::collections::HashMap;

use axum::http::{header, StatusCode};
use common_api::{app, call, get, model_name, service, text};
use serde_json::json;
use tower::ServiceExt;

/// The samples of an OpenMetrics text (`name{labels} value`), each line checked for shape.
fn samples(body: &str) -> HashMap<String, f64> {
    assert!(body.ends_with("# EOF\n"), "{body}");
    let mut out = HashMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("not `name value`: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {line}"));
        assert!(
            name.starts_with("rmx_") && !name.contains(' '),
            "not a metric name: {line}"
        );
        out.insert(name.to_string(), value);
    }
    out
}

async fn scrape(app: &axum::Router) -> HashMap<String, f64> {
    let resp = app
        .clone()
        .oneshot(get("/metrics"))
        .await
        .expect("response");
    let kind = resp.headers()[header::CONTENT_TYPE]
        .to_str()
        .unwrap_or_default()
        .to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let (status, body) = text(resp).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    samples(&body)
}

#[tokio::test]
async fn issue_20_metrics_count_requests_tokens_and_times() {
    let home = tempfile::tempdir().expect("tempdir");
    let app = app(service(home.path()));
    let before = scrape(&app).await;
    assert_eq!(before["rmx_loaded_models"], 0.0, "{before:?}");
    assert_eq!(before["rmx_generated_tokens_total"], 0.0, "{before:?}");

    let chat = json!({"model": model_name(), "messages": [{"role": "user", "content": "Hello"}],
                      "max_tokens": 4, "temperature": 0});
    let (status, body) = call(&app, "/v1/chat/completions", chat).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _) = call(
        &app,
        "/v1/chat/completions",
        json!({"model": "nobody/nothing",
        "messages": [{"role": "user", "content": "Hello"}]}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let after = scrape(&app).await;
    let usage = &body["usage"];
    let count = |name: &str| {
        after
            .get(name)
            .copied()
            .unwrap_or_else(|| panic!("no {name}: {after:?}"))
    };
    assert_eq!(
        count("rmx_http_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"),
        1.0
    );
    assert_eq!(
        count("rmx_http_requests_total{route=\"/v1/chat/completions\",status=\"404\"}"),
        1.0
    );
    assert_eq!(
        count("rmx_prompt_tokens_total"),
        usage["prompt_tokens"].as_f64().expect("prompt tokens")
    );
    assert_eq!(
        count("rmx_generated_tokens_total"),
        usage["completion_tokens"]
            .as_f64()
            .expect("completion tokens")
    );
    assert_eq!(count("rmx_time_to_first_token_seconds_count"), 1.0);
    assert!(count("rmx_time_to_first_token_seconds_sum") > 0.0);
    assert_eq!(count("rmx_decode_seconds_count"), 1.0);
    assert_eq!(count("rmx_loaded_models"), 1.0);
    assert!(count("rmx_loaded_model_bytes") > 0.0);
    assert_eq!(count("rmx_running_sequences"), 0.0);
    assert_eq!(count("rmx_waiting_sequences"), 0.0);
    assert!(count("rmx_resident_memory_bytes") > 0.0);
    assert!(count("rmx_mlx_active_memory_bytes") > 0.0);
}
