//! The OpenAI routes on the tiny model through the router (no socket): streamed text equals
//! the whole answer at temperature 0, the SSE framing ends in `data: [DONE]`, the usage chunk
//! comes last, tools are rendered into the prompt, and the Responses stream is well formed.

mod common_api;

use axum::http::StatusCode;
use common_api::{app, json, model_name, post, service, sse_named, text};
use serde_json::{json, Value};
use tower::ServiceExt;

fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| {
            ev.lines()
                .find_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        })
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn chat_stream_equals_whole_with_usage_chunk_and_done() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let base = json!({"model": model_name(), "messages": [{"role": "user", "content": "Hello"}],
                      "temperature": 0, "max_tokens": 6});
    let (status, whole) = json(
        app.clone()
            .oneshot(post("/v1/chat/completions", base.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    let answer = whole["choices"][0]["message"]["content"]
        .as_str()
        .expect("content")
        .to_string();
    assert_eq!(whole["usage"]["completion_tokens"], 6);
    assert_eq!(whole["choices"][0]["finish_reason"], "length");

    let mut req = base.clone();
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let resp = app
        .oneshot(post("/v1/chat/completions", req.to_string()))
        .await
        .expect("r");
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let (_, body) = text(resp).await;
    let data = sse_data(&body);
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"), "{body}");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk"))
        .collect();
    let streamed: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(streamed, answer, "{body}");
    let usage = &chunks.last().expect("usage chunk")["usage"];
    assert_eq!(usage["completion_tokens"], 6);
    assert_eq!(usage["total_tokens"], whole["usage"]["total_tokens"]);
    assert!(usage["prompt_tokens_details"]["cached_tokens"].is_number());
}

#[tokio::test]
async fn tools_are_rendered_into_the_prompt() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let plain = json!({"model": model_name(), "messages": [{"role": "user", "content": "Hi"}],
                       "temperature": 0, "max_tokens": 1});
    let mut tooled = plain.clone();
    tooled["tools"] = json!([{"type": "function", "function": {"name": "get_weather_in_city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let (_, a) = json(
        app.clone()
            .oneshot(post("/v1/chat/completions", plain.to_string()))
            .await
            .expect("r"),
    )
    .await;
    let (s, b) = json(
        app.clone()
            .oneshot(post("/v1/chat/completions", tooled.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let grown = b["usage"]["prompt_tokens"].as_u64().unwrap_or(0)
        - a["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
    assert!(
        grown > 20,
        "the tool definitions reach the template: {a} vs {b}"
    );
    // tool_choice none leaves them out.
    tooled["tool_choice"] = json!("none");
    let (_, c) = json(
        app.oneshot(post("/v1/chat/completions", tooled.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(c["usage"]["prompt_tokens"], a["usage"]["prompt_tokens"]);
}

#[tokio::test]
async fn responses_stream_is_well_formed_and_matches_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let req =
        json!({"model": model_name(), "input": "Hello", "temperature": 0, "max_output_tokens": 5});
    let (status, whole) = json(
        app.clone()
            .oneshot(post("/v1/responses", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{whole}");
    assert_eq!(whole["status"], "incomplete");
    assert_eq!(whole["incomplete_details"]["reason"], "max_output_tokens");
    let answer = whole["output"][0]["content"][0]["text"]
        .as_str()
        .expect("text")
        .to_string();

    let mut sreq = req.clone();
    sreq["stream"] = json!(true);
    let (_, body) = text(
        app.oneshot(post("/v1/responses", sreq.to_string()))
            .await
            .expect("r"),
    )
    .await;
    let events = sse_named(&body);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"response.created"), "{names:?}");
    assert_eq!(names.last(), Some(&"response.incomplete"), "{names:?}");
    for (name, data) in &events {
        assert_eq!(
            data["type"],
            name.as_str(),
            "the event line and the type agree"
        );
    }
    let streamed: String = events
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .filter_map(|(_, d)| d["delta"].as_str())
        .collect();
    assert_eq!(streamed, answer);
    let last = &events.last().expect("last").1["response"];
    assert_eq!(last["usage"]["output_tokens"], 5);
}

#[tokio::test]
async fn completions_and_models() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let req = json!({"model": model_name(), "prompt": "Once upon", "temperature": 0, "max_tokens": 4, "echo": true});
    let (status, body) = json(
        app.clone()
            .oneshot(post("/v1/completions", req.to_string()))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["object"], "text_completion");
    assert!(body["choices"][0]["text"]
        .as_str()
        .is_some_and(|t| t.starts_with("Once upon")));
    assert_eq!(body["usage"]["completion_tokens"], 4);
    // The model loaded by the request is listed.
    let (status, list) = json(app.oneshot(common_api::get("/v1/models")).await.expect("r")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["object"], "list");
    assert!(
        list["data"]
            .as_array()
            .is_some_and(|d| d.iter().any(|m| m["id"] == model_name().as_str())),
        "{list}"
    );
}

#[tokio::test]
async fn openapi_lists_every_route() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Keep the service alive while bodies stream: its end ends their answers.
    let svc = service(dir.path());
    let app = app(svc.clone());
    let (status, spec) = json(
        app.clone()
            .oneshot(common_api::get("/openapi.json"))
            .await
            .expect("r"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(spec["openapi"], "3.1.0");
    let paths = spec["paths"].as_object().expect("paths");
    for (method, path) in rmx_server::openapi::described_routes() {
        assert!(paths[path][method].is_object(), "{method} {path}");
        // Each described route is served: an unrouted path is the router's "no route" 404,
        // a method it does not take a 405.
        let uri = path.replace("{id}", "nope");
        let req = axum::http::Request::builder()
            .method(method.to_uppercase().as_str())
            .uri(&uri)
            .header("content-type", "application/json")
            .body(axum::body::Body::from("{}"))
            .expect("request");
        let resp = app.clone().oneshot(req).await.expect("response");
        assert_ne!(
            resp.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        let (status, body) = text(resp).await;
        assert!(
            !(status == StatusCode::NOT_FOUND && body.contains("no route for")),
            "{method} {path} is not routed: {body}"
        );
    }
    // And each route served is described: the surfaces' route tables name no others.
    for p in [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/embeddings",
        "/v1/rerank",
        "/rerank",
        "/v2/rerank",
        "/v1/models",
        "/v1/messages",
        "/messages",
        "/v1/messages/count_tokens",
        "/messages/count_tokens",
        "/api/chat",
        "/api/generate",
        "/api/embed",
        "/api/embeddings",
        "/api/tags",
        "/api/ps",
        "/api/show",
        "/api/delete",
        "/api/pull",
        "/api/version",
        "/health",
        "/openapi.json",
    ] {
        assert!(paths.contains_key(p), "{p} is not described");
    }
}
